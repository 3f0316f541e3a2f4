"""The embedder contract shared by every provider.

An embedder turns texts into unit-length float32 vectors. The store records
``(name, model, dim)`` as its signature, so two embedders with the same
signature must produce vectors from the same space.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

Matrix = npt.NDArray[np.float32]


class EmbeddingUnavailable(Exception):
    """The provider could not embed right now (network, timeout, 5xx, 429, missing key).

    Retry-safe; nothing stored.
    """


class EmbeddingFailed(Exception):
    """The provider refused the request or answered with something unusable
    (4xx other than auth and rate limits, wrong count or dimension).

    Permanent: retrying the same input with the same configuration fails again.
    """


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into vectors.

    ``embed`` returns float32 of shape ``(len(texts), dim)`` whose rows are
    L2-normalised, in input order; an empty input gives shape ``(0, dim)``.
    Implementations are safe to call from several threads at once.
    """

    name: str
    model: str
    dim: int

    def embed(self, texts: Sequence[str]) -> Matrix: ...


def as_text_list(texts: Sequence[str]) -> list[str]:
    """The inputs as a list, rejecting a bare ``str``.

    A ``str`` is itself a ``Sequence[str]``; passing one by mistake would embed
    each character separately, so it is a caller bug and raises TypeError.
    """
    if isinstance(texts, str):
        raise TypeError("embed() takes a sequence of texts, not a single str")
    items = list(texts)
    for item in items:
        if not isinstance(item, str):
            raise TypeError(f"embed() takes texts, got {type(item).__name__}")
    return items


def l2_normalise(vectors: npt.ArrayLike) -> Matrix:
    """Rows scaled to unit length, as float32.

    A zero row stays zero rather than becoming NaN; providers that can produce
    one must decide what it means before calling this.
    """
    matrix = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return (matrix / np.maximum(norms, np.float32(1e-12))).astype(np.float32, copy=False)


def empty_matrix(dim: int) -> Matrix:
    """The ``(0, dim)`` result for an empty input."""
    return np.zeros((0, dim), dtype=np.float32)


def batched(items: Sequence[str], size: int) -> Iterator[Sequence[str]]:
    """Consecutive slices of at most ``size`` items (itertools.batched is 3.12+)."""
    for start in range(0, len(items), size):
        yield items[start : start + size]

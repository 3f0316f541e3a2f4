"""A deterministic, offline embedder for fast tests. Never the default.

Feature hashing (the "hashing trick") of lowercase word unigrams and
character trigrams into ``dim`` signed buckets. Texts that share words share
buckets, so their cosine is higher; that is all the semantics there is.
blake2b keys the buckets, not Python's ``hash()``, whose per-process salt
would make vectors differ between the test process and a worker.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator, Sequence

import numpy as np

from memories.embeddings.base import Matrix, as_text_list, empty_matrix, l2_normalise

MODEL_NAME = "hash-blake2b-w1c3-v1"
DEFAULT_DIM = 384

_WORD = re.compile(r"\w+")
# Whole words carry more meaning than their fragments.
_WORD_WEIGHT = 1.0
_TRIGRAM_WEIGHT = 0.5
# A text with no word characters still gets a unit vector, all such texts the same one.
_EMPTY_FEATURE = "\x00empty"


class HashEmbedder:
    """Signed feature hashing of unigrams and trigrams; deterministic across processes."""

    name = "hash"
    model = MODEL_NAME

    def __init__(self, *, dim: int = DEFAULT_DIM) -> None:
        if dim < 2:
            raise ValueError(f"hash embedder dim must be at least 2, got {dim}")
        self.dim = dim

    def embed(self, texts: Sequence[str]) -> Matrix:
        """Unit vectors of shape ``(len(texts), dim)`` in input order."""
        items = as_text_list(texts)
        if not items:
            return empty_matrix(self.dim)
        matrix = np.zeros((len(items), self.dim), dtype=np.float32)
        for row, text in enumerate(items):
            for feature, weight in _features(text):
                bucket, sign = self._slot(feature)
                matrix[row, bucket] += sign * weight
            if not matrix[row].any():
                # Colliding features cancelled exactly; fall back so the row is still unit length.
                bucket, sign = self._slot(_EMPTY_FEATURE)
                matrix[row, bucket] = sign
        return l2_normalise(matrix)

    def _slot(self, feature: str) -> tuple[int, float]:
        digest = hashlib.blake2b(feature.encode("utf-8"), digest_size=8).digest()
        value = int.from_bytes(digest, "big")
        # The low bit picks the sign, so colliding features tend to cancel
        # rather than pile up in one direction.
        return (value >> 1) % self.dim, (1.0 if value & 1 else -1.0)


def _features(text: str) -> Iterator[tuple[str, float]]:
    words = _WORD.findall(text.lower())
    if not words:
        yield _EMPTY_FEATURE, 1.0
        return
    for word in words:
        yield "w:" + word, _WORD_WEIGHT
        padded = f"#{word}#"
        for start in range(len(padded) - 2):
            yield "c:" + padded[start : start + 3], _TRIGRAM_WEIGHT

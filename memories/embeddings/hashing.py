"""A deterministic, offline embedder for fast tests. Never the default.

Feature hashing (the "hashing trick") of lowercase word unigrams and
character trigrams into ``dim`` signed buckets. Texts that share words share
buckets, so their cosine is higher; that is all the semantics there is.
blake2b keys the buckets, not Python's ``hash()``, whose per-process salt
would make vectors differ between the test process and a worker.
"""

from __future__ import annotations

import functools
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
            # Summed per bucket in Python first, then written once: every weight is ±1 or ±0.5, so
            # the sums are exact in float32 whatever the order — the same vector as adding feature
            # by feature into the float32 row, at a fraction of the per-element numpy cost.
            words = _WORD.findall(text.lower())
            sums: dict[int, float] = {}
            for word in words:
                for bucket, value in _word_slots(word, self.dim):
                    sums[bucket] = sums.get(bucket, 0.0) + value
            if not words:
                bucket, sign = _slot(_EMPTY_FEATURE, self.dim)
                sums[bucket] = sign
            matrix[row, list(sums)] = list(sums.values())
            if not matrix[row].any():
                # Colliding features cancelled exactly; fall back so the row is still unit length.
                bucket, sign = _slot(_EMPTY_FEATURE, self.dim)
                matrix[row, bucket] = sign
        return l2_normalise(matrix)


@functools.lru_cache(maxsize=1 << 16)
def _word_slots(word: str, dim: int) -> tuple[tuple[int, float], ...]:
    """What one word adds to a vector — its unigram and trigram features (_word_features), summed
    per bucket. Cached per word: a text's words mostly repeat earlier ones."""
    sums: dict[int, float] = {}
    for feature, weight in _word_features(word):
        bucket, sign = _slot(feature, dim)
        sums[bucket] = sums.get(bucket, 0.0) + sign * weight
    return tuple(sums.items())


@functools.lru_cache(maxsize=1 << 17)
def _slot(feature: str, dim: int) -> tuple[int, float]:
    """A feature's bucket and sign (cached: words and trigrams repeat across texts, and hashing
    each occurrence again was most of the embedder's time)."""
    digest = hashlib.blake2b(feature.encode("utf-8"), digest_size=8).digest()
    value = int.from_bytes(digest, "big")
    # The low bit picks the sign, so colliding features tend to cancel
    # rather than pile up in one direction.
    return (value >> 1) % dim, (1.0 if value & 1 else -1.0)


def _word_features(word: str) -> Iterator[tuple[str, float]]:
    yield "w:" + word, _WORD_WEIGHT
    padded = f"#{word}#"
    for start in range(len(padded) - 2):
        yield "c:" + padded[start : start + 3], _TRIGRAM_WEIGHT

"""The deterministic feature-hashing embedder used by fast tests."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from memories.embeddings.base import Embedder
from memories.embeddings.factory import build_embedder
from memories.embeddings.hashing import HashEmbedder

REPO_ROOT = Path(__file__).resolve().parents[3]


def test_hash_embedder_satisfies_the_embedder_protocol() -> None:
    embedder = build_embedder("hash")

    assert isinstance(embedder, Embedder)
    assert (embedder.name, embedder.dim) == ("hash", 384)


def test_hash_rows_are_unit_float32_even_for_texts_without_words() -> None:
    vectors = HashEmbedder(dim=64).embed(["The cat sits on the mat", "", "!!!", "x"])

    assert vectors.shape == (4, 64)
    assert vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-6)


def test_empty_input_gives_an_empty_matrix() -> None:
    assert HashEmbedder(dim=32).embed([]).shape == (0, 32)


def test_texts_sharing_words_are_closer() -> None:
    cat, cat_again, revenue = HashEmbedder().embed(
        ["The cat sits on the mat", "the cat sat on a mat", "Quarterly revenue grew 4%"]
    )

    assert float(cat @ cat_again) > float(cat @ revenue) + 0.3


def test_case_does_not_matter() -> None:
    upper, lower = HashEmbedder().embed(["Deploy On Tuesday", "deploy on tuesday"])

    np.testing.assert_array_equal(upper, lower)


def test_hash_vectors_are_identical_in_another_process() -> None:
    # Python's hash() is salted per process; the embedder must not depend on it.
    here = HashEmbedder(dim=16).embed(["postgres failover runbook"])[0]
    script = (
        "import json; from memories.embeddings.hashing import HashEmbedder;"
        "print(json.dumps(HashEmbedder(dim=16).embed(['postgres failover runbook'])[0].tolist()))"
    )
    output = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        check=True,
        cwd=REPO_ROOT,
        env={"PYTHONHASHSEED": "12345", "PYTHONPATH": str(REPO_ROOT)},
    ).stdout

    np.testing.assert_array_equal(np.array(json.loads(output), dtype=np.float32), here)


def test_hash_dim_is_configurable_and_bounded() -> None:
    assert build_embedder("hash", dim=32).dim == 32
    with pytest.raises(ValueError, match="at least 2"):
        HashEmbedder(dim=1)


def _reference(text: str, dim: int) -> np.ndarray:
    """The embedder's definition, feature by feature into a float32 row (as it was first written)."""
    import hashlib
    import re

    row = np.zeros(dim, dtype=np.float32)
    words = re.findall(r"\w+", text.lower())
    features = [("\x00empty", 1.0)] if not words else []
    for word in words:
        features.append(("w:" + word, 1.0))
        padded = f"#{word}#"
        features += [("c:" + padded[i : i + 3], 0.5) for i in range(len(padded) - 2)]
    for feature, weight in features:
        value = int.from_bytes(hashlib.blake2b(feature.encode("utf-8"), digest_size=8).digest(), "big")
        row[(value >> 1) % dim] += (1.0 if value & 1 else -1.0) * weight
    if not row.any():
        value = int.from_bytes(hashlib.blake2b(b"\x00empty", digest_size=8).digest(), "big")
        row[(value >> 1) % dim] = 1.0 if value & 1 else -1.0
    return row / np.maximum(np.linalg.norm(row), np.float32(1e-12))


@pytest.mark.parametrize("dim", [2, 16, 384])
def test_vectors_are_bit_for_bit_the_feature_by_feature_definition(dim: int) -> None:
    texts = [
        "The cat sits on the mat",
        "",
        "!!!",
        "x",
        "Überprüfung der Größe — naïve café",
        "PLAT-1423 E_DOCK_TIMEOUT v2.3.1 acme/fleet-console " * 3,
        "\n\n".join(f"Paragraph {i}: the dock controller retries the handshake before failing over." for i in range(20)),
        "aa aa aa aa bb bb",
    ]
    vectors = HashEmbedder(dim=dim).embed(texts)

    for text, vector in zip(texts, vectors, strict=True):
        assert vector.tobytes() == _reference(text, dim).astype(np.float32).tobytes(), text

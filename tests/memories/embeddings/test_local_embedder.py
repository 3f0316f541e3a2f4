"""The offline all-MiniLM-L6-v2 (int8 ONNX) embedder, run for real."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from memories.embeddings.base import Embedder
from memories.embeddings.factory import build_embedder
from memories.embeddings.local import (
    MODEL_SHA256,
    TOKENIZER_SHA256,
    LocalEmbedder,
    LocalModelError,
    default_model_path,
    default_tokenizer_path,
    embed_batch_size,
    embed_threads,
)

SENTENCES = [
    "The cat sits on the mat",
    "A kitten is sitting on a rug",
    "Quarterly revenue grew 4%",
    "",
    "Deploys to production happen on Tuesdays after the change-review meeting. " * 4,
    "ok",
]


@pytest.fixture(scope="module")
def embedder() -> LocalEmbedder:
    # Module-scoped: the session loads once for every test here.
    return LocalEmbedder()


def test_local_embedder_satisfies_the_embedder_protocol(embedder: LocalEmbedder) -> None:
    assert isinstance(embedder, Embedder)
    assert (embedder.name, embedder.model, embedder.dim) == ("local", "all-MiniLM-L6-v2-int8", 384)


def test_local_embedder_returns_unit_float32_rows(embedder: LocalEmbedder) -> None:
    vectors = embedder.embed(SENTENCES)

    assert vectors.shape == (len(SENTENCES), 384)
    assert vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


def test_empty_input_gives_an_empty_matrix_without_loading(tmp_path: Path) -> None:
    missing = tmp_path / "absent.onnx"
    vectors = LocalEmbedder(model_path=missing, tokenizer_path=missing).embed([])

    assert vectors.shape == (0, 384)
    assert vectors.dtype == np.float32


def test_local_embedder_is_deterministic(embedder: LocalEmbedder) -> None:
    np.testing.assert_array_equal(embedder.embed(SENTENCES), embedder.embed(SENTENCES))


def test_batched_vectors_match_one_by_one(embedder: LocalEmbedder) -> None:
    # 70 texts of mixed lengths: three batches of 32, each padded differently.
    texts = [f"{SENTENCES[i % 3]} #{i} " * (1 + i % 4) for i in range(70)]

    batched = LocalEmbedder(batch_size=32).embed(texts)
    single = np.stack([embedder.embed([text])[0] for text in texts])

    np.testing.assert_allclose(batched, single, atol=1e-5)


def test_input_order_is_restored_after_sorting_by_length(embedder: LocalEmbedder) -> None:
    forward = embedder.embed(SENTENCES)
    backward = embedder.embed(list(reversed(SENTENCES)))

    np.testing.assert_allclose(backward[::-1], forward, atol=1e-5)


def test_a_paraphrase_is_closer_than_an_unrelated_sentence(embedder: LocalEmbedder) -> None:
    cat, kitten, revenue = embedder.embed(SENTENCES[:3])

    assert float(cat @ kitten) > 0.5
    assert float(cat @ revenue) < 0.2
    assert float(cat @ kitten) - float(cat @ revenue) > 0.4


def test_similarities_match_the_published_fp32_model(embedder: LocalEmbedder) -> None:
    # sbert.net's quickstart prints these for the fp32 all-MiniLM-L6-v2; the
    # int8 weights may move them slightly, the pipeline (tokens, pooling,
    # normalisation) must not move them more.
    vectors = embedder.embed(["The weather is lovely today.", "It's so sunny outside!", "He drove to the stadium."])
    similarities = vectors @ vectors.T

    np.testing.assert_allclose([similarities[0, 1], similarities[0, 2], similarities[1, 2]], [0.6660, 0.1046, 0.1411], atol=0.01)


def test_texts_are_truncated_at_256_tokens_not_128(embedder: LocalEmbedder) -> None:
    # The shipped tokenizer.json truncates at 128; a difference past token 128
    # must still change the vector, one past token 256 must not.
    head = "alpha " * 150
    zebra, ledger = embedder.embed([head + "zebra giraffe", head + "invoice ledger"])
    assert not np.allclose(zebra, ledger, atol=1e-4)
    long_head = "alpha " * 300
    zebra, ledger = embedder.embed([long_head + "zebra", long_head + "ledger"])
    np.testing.assert_allclose(zebra, ledger, atol=1e-6)


def test_a_bare_string_is_rejected(embedder: LocalEmbedder) -> None:
    with pytest.raises(TypeError, match="not a single str"):
        embedder.embed("The cat sits on the mat")


def test_pinned_hashes_match_the_installed_files() -> None:
    import hashlib

    assert hashlib.sha256(default_model_path().read_bytes()).hexdigest() == MODEL_SHA256
    assert hashlib.sha256(default_tokenizer_path().read_bytes()).hexdigest() == TOKENIZER_SHA256


def test_tampered_tokenizer_is_refused_with_both_hashes(tmp_path: Path) -> None:
    tampered = tmp_path / "tokenizer.json"
    shutil.copyfile(default_tokenizer_path(), tampered)
    with tampered.open("ab") as handle:
        handle.write(b" ")

    with pytest.raises(LocalModelError) as raised:
        LocalEmbedder(tokenizer_path=tampered).embed(["hello"])

    message = str(raised.value)
    assert str(tampered) in message
    assert TOKENIZER_SHA256 in message
    import hashlib

    assert hashlib.sha256(tampered.read_bytes()).hexdigest() in message


def test_tampered_model_is_refused_before_onnxruntime_sees_it(tmp_path: Path) -> None:
    fake = tmp_path / "model.onnx"
    fake.write_bytes(b"not a model")

    with pytest.raises(LocalModelError, match=f"{re.escape(str(fake))}.*expected {MODEL_SHA256}"):
        LocalEmbedder(model_path=fake).embed(["hello"])


def test_missing_model_file_names_the_path(tmp_path: Path) -> None:
    missing = tmp_path / "gone.onnx"

    with pytest.raises(LocalModelError, match=r"gone\.onnx"):
        LocalEmbedder(model_path=missing).embed(["hello"])


def test_thread_count_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CORTEX_EMBED_THREADS", "3")
    assert embed_threads() == 3
    monkeypatch.setenv("CORTEX_EMBED_THREADS", "three")
    with pytest.raises(ValueError, match="CORTEX_EMBED_THREADS"):
        embed_threads()
    monkeypatch.setenv("CORTEX_EMBED_THREADS", "0")
    with pytest.raises(ValueError, match="positive"):
        embed_threads()


def test_batch_size_comes_from_the_environment_and_defaults_to_one_text_per_run(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CORTEX_EMBED_BATCH", raising=False)
    assert embed_batch_size() == 1
    monkeypatch.setenv("CORTEX_EMBED_BATCH", "16")
    assert embed_batch_size() == 16
    monkeypatch.setenv("CORTEX_EMBED_BATCH", "-2")
    with pytest.raises(ValueError, match="CORTEX_EMBED_BATCH must be a positive integer"):
        embed_batch_size()


def test_build_embedder_local_refuses_another_model_or_size() -> None:
    assert isinstance(build_embedder("local"), LocalEmbedder)
    with pytest.raises(ValueError, match="only runs"):
        build_embedder("local", model="all-mpnet-base-v2")
    with pytest.raises(ValueError, match="384"):
        build_embedder("local", dim=768)

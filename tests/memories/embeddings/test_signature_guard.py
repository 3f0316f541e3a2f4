"""The store's embedding signature (memories/embeddings/store.py): provider, model AND dimensions must all
match the configured embedder, or writes and recall stop naming both — a store filled by one model
never receives or compares vectors of another, even when only one of the three differs.

The OpenAI-compatible embedder runs the real openai SDK against the loopback stub, so a model can be
changed while the provider and the number of dimensions stay the same."""

from __future__ import annotations

import copy
import threading
from collections.abc import Callable
from typing import Any

import pytest
from support import assert_envelope
from support.stub_server import ANY_PATH, Received, StubResponse, StubServer

from cortex_site.errors import ServiceUnavailable
from memories.embeddings.factory import get_embedder
from memories.embeddings.hashing import DEFAULT_DIM
from memories.embeddings.hashing import MODEL_NAME as HASH_MODEL
from memories.embeddings.store import (
    BackgroundEmbedding,
    EmbeddingModelMismatch,
    check_signature,
    embed_for_store,
    signature_of,
)
from memories.models import EmbeddingSignature, Memory, MemoryChunk


def _serve_embeddings(stub_server: StubServer, payload: Callable[[str], Any]) -> None:
    stub_server.route("POST", ANY_PATH, lambda request: StubResponse(json=_answer(payload, request.json())))


def _answer(payload: Callable[[str], Any], body: dict[str, Any]) -> dict[str, Any]:
    """The recorded embeddings answer, one vector per input text (each row differs by its text's length)."""
    answer = copy.deepcopy(payload("openai_embeddings"))
    item = answer["data"][0]
    dim = int(body.get("dimensions") or DEFAULT_DIM)
    answer["data"] = [
        dict(item, index=i, embedding=[float(len(text) + 1)] + [float(j % 3) for j in range(1, dim)])
        for i, text in enumerate(body["input"])
    ]
    answer["model"] = body["model"]
    return answer


def _openai(use_embedder: Any, stub_server: StubServer, model: str) -> None:
    use_embedder(
        "openai",
        OPENAI_API_KEY="sk-test-not-a-real-key",
        OPENAI_BASE_URL=f"{stub_server.url}/v1",
        CORTEX_EMBED_MODEL=model,
        CORTEX_EMBED_DIM=DEFAULT_DIM,
    )


def _post(client: Any, content: str) -> Any:
    return client.post("/api/memories", {"content": content, "scope": "engineering"})


@pytest.mark.django_db
def test_the_first_write_records_provider_model_and_dimensions(acme: dict[str, Any], api: Any) -> None:
    assert not EmbeddingSignature.objects.exists()
    assert _post(api(acme["employee"]), "The first memory signs the store.").status_code == 201
    stored = EmbeddingSignature.objects.get()
    assert (stored.provider, stored.model, stored.dim) == ("hash", HASH_MODEL, DEFAULT_DIM)
    assert signature_of(get_embedder()) == ("hash", HASH_MODEL, DEFAULT_DIM)


@pytest.mark.django_db
def test_recall_on_an_empty_store_does_not_sign_it(acme: dict[str, Any], api: Any) -> None:
    assert api(acme["employee"]).post("/api/recall", {"query": "anything"}).status_code == 200
    assert not EmbeddingSignature.objects.exists()


@pytest.mark.django_db
def test_check_signature_on_an_empty_store_records_only_when_asked() -> None:
    embedder = get_embedder()
    assert check_signature(embedder, record_if_missing=False) is False
    assert not EmbeddingSignature.objects.exists()
    assert check_signature(embedder, record_if_missing=True) is True
    assert EmbeddingSignature.objects.count() == 1
    # Signed now: a second check finds it and records nothing more.
    assert check_signature(embedder, record_if_missing=True) is True
    assert check_signature(embedder, record_if_missing=False) is True
    assert EmbeddingSignature.objects.count() == 1


@pytest.mark.django_db
def test_embed_for_store_signs_an_empty_store_on_write_only() -> None:
    vectors = embed_for_store(["a text to compare"], for_write=False)
    assert vectors.shape == (1, DEFAULT_DIM)
    assert not EmbeddingSignature.objects.exists()
    embed_for_store(["a text to store"], for_write=True)
    assert EmbeddingSignature.objects.count() == 1


@pytest.mark.django_db
def test_same_provider_and_dimensions_but_another_model_is_refused(
    acme: dict[str, Any], api: Any, use_embedder: Any, stub_server: StubServer, payload: Any
) -> None:
    _serve_embeddings(stub_server, payload)
    client = api(acme["employee"])
    _openai(use_embedder, stub_server, "text-embedding-3-small")
    assert _post(client, "Stored with the small model.").status_code == 201
    _openai(use_embedder, stub_server, "text-embedding-3-large")
    body = assert_envelope(_post(client, "Another note."), 503, "EMBEDDING_MODEL_MISMATCH")
    assert "openai:text-embedding-3-small" in body["message"] and "openai:text-embedding-3-large" in body["message"]
    assert body["details"] == {
        "store": {"provider": "openai", "model": "text-embedding-3-small", "dim": DEFAULT_DIM},
        "configured": {"provider": "openai", "model": "text-embedding-3-large", "dim": DEFAULT_DIM},
    }
    assert_envelope(client.post("/api/recall", {"query": "small model"}), 503, "EMBEDDING_MODEL_MISMATCH")
    assert Memory.objects.count() == 1 and MemoryChunk.objects.count() == 1
    stored = EmbeddingSignature.objects.get()
    assert (stored.provider, stored.model) == ("openai", "text-embedding-3-small")


@pytest.mark.django_db
def test_same_model_name_and_dimensions_from_another_provider_is_refused(
    acme: dict[str, Any], api: Any, use_embedder: Any, stub_server: StubServer, payload: Any
) -> None:
    # An OpenAI-compatible server that happens to serve a model named like the hash embedder's.
    _serve_embeddings(stub_server, payload)
    client = api(acme["employee"])
    _openai(use_embedder, stub_server, HASH_MODEL)
    assert _post(client, "Stored through the OpenAI-compatible server.").status_code == 201
    use_embedder("hash", CORTEX_EMBED_MODEL="", CORTEX_EMBED_DIM=DEFAULT_DIM)
    assert signature_of(get_embedder())[1:] == (HASH_MODEL, DEFAULT_DIM)
    body = assert_envelope(_post(client, "Another note."), 503, "EMBEDDING_MODEL_MISMATCH")
    assert body["details"]["store"]["provider"] == "openai" and body["details"]["configured"]["provider"] == "hash"
    assert_envelope(client.post("/api/recall", {"query": "server"}), 503, "EMBEDDING_MODEL_MISMATCH")
    assert Memory.objects.count() == 1


@pytest.mark.django_db
def test_other_dimensions_of_the_same_model_are_refused(acme: dict[str, Any], api: Any, use_embedder: Any) -> None:
    client = api(acme["employee"])
    assert _post(client, "Stored at 384 dimensions.").status_code == 201
    use_embedder("hash", CORTEX_EMBED_DIM=256)
    with pytest.raises(EmbeddingModelMismatch) as caught:
        check_signature(get_embedder(), record_if_missing=True)
    assert caught.value.details["store"]["dim"] == DEFAULT_DIM and caught.value.details["configured"]["dim"] == 256
    assert EmbeddingSignature.objects.count() == 1


@pytest.mark.django_db
def test_a_model_sorting_after_the_stored_one_is_refused_too(
    acme: dict[str, Any], api: Any, use_embedder: Any, stub_server: StubServer, payload: Any
) -> None:
    # The other direction: the stored signature sorts before the configured one ("large" < "small").
    _serve_embeddings(stub_server, payload)
    client = api(acme["employee"])
    _openai(use_embedder, stub_server, "text-embedding-3-large")
    assert _post(client, "Stored with the large model.").status_code == 201
    _openai(use_embedder, stub_server, "text-embedding-3-small")
    assert_envelope(_post(client, "Another note."), 503, "EMBEDDING_MODEL_MISMATCH")
    assert Memory.objects.count() == 1


@pytest.mark.django_db
def test_the_same_signature_again_passes(acme: dict[str, Any], api: Any, use_embedder: Any) -> None:
    client = api(acme["employee"])
    assert _post(client, "First note.").status_code == 201
    use_embedder("hash", CORTEX_EMBED_DIM=DEFAULT_DIM)  # configured anew, the same model
    assert _post(client, "Second note.").status_code == 201
    assert client.post("/api/recall", {"query": "note"}).status_code == 200
    assert EmbeddingSignature.objects.count() == 1


# -- the provider's own failures (mapped to 503 envelopes; nothing is stored) ---------------------------
@pytest.mark.django_db
@pytest.mark.parametrize(
    ("status", "error", "error_code"),
    [
        # A rejected key: the provider cannot embed until someone fixes the configuration (EmbeddingUnavailable).
        (401, {"error": {"message": "Incorrect API key provided", "type": "invalid_request_error"}}, "EMBEDDING_UNAVAILABLE"),
        # A refused request (EmbeddingFailed): retrying the same one will not help.
        (400, {"error": {"message": "input is too long", "type": "invalid_request_error"}}, "EMBEDDING_FAILED"),
    ],
)
def test_a_provider_that_cannot_or_will_not_embed_answers_503_and_stores_nothing(
    status: int,
    error: dict[str, Any],
    error_code: str,
    acme: dict[str, Any],
    api: Any,
    use_embedder: Any,
    stub_server: StubServer,
) -> None:
    stub_server.route("POST", ANY_PATH, lambda request: StubResponse(status=status, json=error))
    _openai(use_embedder, stub_server, "text-embedding-3-small")

    body = assert_envelope(_post(api(acme["employee"]), "Never stored."), 503, error_code)

    assert "Nothing was stored" in body["message"]
    assert f"HTTP {status}" in body["message"]
    assert not Memory.objects.exists() and not EmbeddingSignature.objects.exists()
    assert len(stub_server.received) >= 1  # the SDK really asked the (stub) provider


# -- embedding while the writer writes (BackgroundEmbedding, what memory_create_many uses) -------------
@pytest.mark.django_db
def test_background_embedding_runs_while_the_caller_goes_on_and_signs_an_empty_store_when_its_vectors_arrive(
    use_embedder: Any, stub_server: StubServer, payload: Any
) -> None:
    # The provider answers only when the test says so: construction must return while it is still embedding.
    asked, release, answered = threading.Event(), threading.Event(), threading.Event()

    def respond(request: Received) -> StubResponse:
        asked.set()
        release.wait(timeout=5)  # a constructor that waited for the vectors would wait this out
        answered.set()
        return StubResponse(json=_answer(payload, request.json()))

    stub_server.route("POST", ANY_PATH, respond)
    _openai(use_embedder, stub_server, "text-embedding-3-small")
    embedding = BackgroundEmbedding(["a text to store", "and another"])
    assert asked.wait(timeout=10), "the provider was never asked"
    answered_during_construction = answered.is_set()
    # Not signed before the vectors exist: a provider that fails leaves the store free for another model.
    assert not EmbeddingSignature.objects.exists()
    release.set()
    assert not answered_during_construction
    assert embedding.in_process is False
    vectors = embedding.result()
    assert vectors.shape == (2, DEFAULT_DIM)
    stored = EmbeddingSignature.objects.get()
    assert (stored.provider, stored.model, stored.dim) == ("openai", "text-embedding-3-small", DEFAULT_DIM)


@pytest.mark.django_db
def test_background_embedding_that_fails_signs_nothing_and_raises_what_embed_for_store_would(
    use_embedder: Any, stub_server: StubServer
) -> None:
    error = {"error": {"message": "Incorrect API key provided", "type": "invalid_request_error"}}
    stub_server.route("POST", ANY_PATH, StubResponse(status=401, json=error))
    _openai(use_embedder, stub_server, "text-embedding-3-small")
    embedding = BackgroundEmbedding(["never stored"])
    with pytest.raises(ServiceUnavailable) as failed:
        embedding.result()
    assert failed.value.error_code == "EMBEDDING_UNAVAILABLE"
    assert not EmbeddingSignature.objects.exists()


@pytest.mark.django_db
def test_background_embedding_on_a_signed_store_checks_once_and_asks_nothing_more(
    acme: dict[str, Any], api: Any, django_assert_num_queries: Any
) -> None:
    assert _post(api(acme["employee"]), "The first memory signs the store.").status_code == 201
    embedding = BackgroundEmbedding(["a text to store"])
    assert embedding.in_process is True  # the hash model runs in this process
    with django_assert_num_queries(0):
        # The writer asks for the vectors inside its transaction (and, for a hosted provider, once before):
        # a signed store costs no further round trip.
        assert embedding.result().shape == (1, DEFAULT_DIM)
        assert embedding.result().shape == (1, DEFAULT_DIM)
    assert EmbeddingSignature.objects.count() == 1


@pytest.mark.django_db
def test_background_embedding_that_signed_the_store_reads_nothing_when_asked_again(
    use_embedder: Any, stub_server: StubServer, payload: Any, django_assert_num_queries: Any
) -> None:
    # A hosted provider's vectors are asked for twice by the writer (before its transaction and inside it).
    _serve_embeddings(stub_server, payload)
    _openai(use_embedder, stub_server, "text-embedding-3-small")
    embedding = BackgroundEmbedding(["a text to store"])
    embedding.result()
    assert EmbeddingSignature.objects.count() == 1
    with django_assert_num_queries(0):
        assert embedding.result().shape == (1, DEFAULT_DIM)

"""The OpenAI-compatible embedder, driving the real openai SDK against a loopback stub."""

from __future__ import annotations

import copy
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from support.stub_server import ANY_PATH, Received, StubResponse, StubServer

from memories.embeddings.base import EmbeddingFailed, EmbeddingUnavailable
from memories.embeddings.factory import build_embedder
from memories.embeddings.openai_compat import OpenAIEmbedder

KEY = "sk-test-not-a-real-key"
DIM = 8
# api.openai.com sends retry-after-ms on 429 and 5xx; a short one keeps the SDK's own retry fast.
RETRY_SOON = {"retry-after-ms": "20"}


def _vector(text: str, dim: int = DIM) -> list[float]:
    # Not unit length, and different per text, so the tests see both the
    # normalisation and the order.
    return [float(len(text) + 1)] + [float(i % 3) for i in range(1, dim)]


def _responder(payload: Callable[[str], Any], dim: int = DIM) -> Callable[[Received], StubResponse]:
    """Answers like the recorded response, one embedding per input in index order."""
    template = payload("openai_embeddings")

    def respond(request: Received) -> StubResponse:
        body = request.json()
        answer = copy.deepcopy(template)
        item = answer["data"][0]
        answer["data"] = [dict(item, index=i, embedding=_vector(text, dim)) for i, text in enumerate(body["input"])]
        answer["model"] = body["model"]
        return StubResponse(json=answer)

    return respond


def _embedder(stub_server: StubServer, **options: Any) -> OpenAIEmbedder:
    options = {"api_key": KEY, "base_url": f"{stub_server.url}/v1", "dim": DIM, **options}
    embedder = build_embedder("openai", **options)
    assert isinstance(embedder, OpenAIEmbedder)
    return embedder


def _normalised(rows: list[list[float]]) -> np.ndarray:
    matrix = np.array(rows, dtype=np.float32)
    return matrix / np.linalg.norm(matrix, axis=1, keepdims=True)


def test_openai_request_carries_model_inputs_dimensions_and_key(stub_server: StubServer, payload: Any) -> None:
    stub_server.route(
        "POST",
        ANY_PATH,
        _responder(payload),
    )

    _embedder(stub_server).embed(["first memory", "second"])

    [request] = stub_server.received
    assert request.path == "/v1/embeddings"
    assert request.headers["authorization"] == f"Bearer {KEY}"
    assert request.json()["model"] == "text-embedding-3-small"
    assert request.json()["input"] == ["first memory", "second"]
    assert request.json()["dimensions"] == DIM
    assert request.json()["encoding_format"] == "float"


def test_openai_rows_are_normalised_and_in_input_order(stub_server: StubServer, payload: Any) -> None:
    stub_server.route(
        "POST",
        ANY_PATH,
        _responder(payload),
    )
    texts = ["a", "bbbb", "cc"]

    vectors = _embedder(stub_server).embed(texts)

    assert vectors.shape == (3, DIM)
    assert vectors.dtype == np.float32
    np.testing.assert_allclose(vectors, _normalised([_vector(text) for text in texts]), atol=1e-6)


def test_openai_answer_out_of_index_order_is_put_back_in_order(stub_server: StubServer, payload: Any) -> None:
    respond = _responder(payload)

    def reversed_answer(request: Received) -> StubResponse:
        answer = respond(request).json
        answer["data"].reverse()
        return StubResponse(json=answer)

    stub_server.route(
        "POST",
        ANY_PATH,
        reversed_answer,
    )

    vectors = _embedder(stub_server).embed(["a", "bbbb"])

    np.testing.assert_allclose(vectors, _normalised([_vector("a"), _vector("bbbb")]), atol=1e-6)


def test_openai_inputs_go_in_batches_of_256(stub_server: StubServer, payload: Any) -> None:
    stub_server.route(
        "POST",
        ANY_PATH,
        _responder(payload),
    )
    texts = [f"memory {i} " + "x" * (i % 7) for i in range(300)]

    vectors = _embedder(stub_server).embed(texts)

    assert [request.json()["input"] for request in stub_server.received] == [texts[:256], texts[256:]]
    np.testing.assert_allclose(vectors, _normalised([_vector(text) for text in texts]), atol=1e-6)


def test_openai_native_size_is_not_sent_as_dimensions(stub_server: StubServer, payload: Any) -> None:
    stub_server.route(
        "POST",
        ANY_PATH,
        _responder(payload, dim=1536),
    )

    embedder = _embedder(stub_server, dim=None)
    vectors = embedder.embed(["hello"])

    assert embedder.dim == 1536
    assert vectors.shape == (1, 1536)
    assert "dimensions" not in stub_server.received[0].json()


def test_openai_unknown_model_needs_an_explicit_dim() -> None:
    with pytest.raises(ValueError, match="CORTEX_EMBED_DIM"):
        build_embedder("openai", model="nomic-embed-text", api_key=KEY)


def test_openai_compatible_server_model_with_dim_is_used_as_given(stub_server: StubServer, payload: Any) -> None:
    stub_server.route(
        "POST",
        ANY_PATH,
        _responder(payload),
    )

    embedder = _embedder(stub_server, model="nomic-embed-text")
    embedder.embed(["hello"])

    assert (embedder.name, embedder.model, embedder.dim) == ("openai", "nomic-embed-text", DIM)
    assert stub_server.received[0].json()["model"] == "nomic-embed-text"


def test_openai_empty_input_makes_no_request(stub_server: StubServer) -> None:
    assert _embedder(stub_server).embed([]).shape == (0, DIM)
    assert stub_server.received == []


def test_openai_missing_key_is_unavailable_without_a_request(stub_server: StubServer) -> None:
    embedder = _embedder(stub_server, api_key=None)

    with pytest.raises(EmbeddingUnavailable, match="OPENAI_API_KEY is not set"):
        embedder.embed(["hello"])
    assert stub_server.received == []


@pytest.mark.parametrize(("status", "fixture"), [(500, "openai_error_500"), (429, "openai_error_429")])
def test_openai_transient_error_is_retried_once_then_unavailable(
    stub_server: StubServer, payload: Any, status: int, fixture: str
) -> None:
    stub_server.route(
        "POST",
        ANY_PATH,
        StubResponse(status=status, json=payload(fixture), headers=RETRY_SOON),
        StubResponse(status=status, json=payload(fixture), headers=RETRY_SOON),
    )

    with pytest.raises(EmbeddingUnavailable, match=f"HTTP {status}"):
        _embedder(stub_server).embed(["hello"])
    # The SDK's one retry, then us: no third attempt.
    assert len(stub_server.received) == 2


def test_openai_one_transient_error_is_absorbed_by_the_sdk_retry(stub_server: StubServer, payload: Any) -> None:
    stub_server.route(
        "POST",
        ANY_PATH,
        StubResponse(status=500, json=payload("openai_error_500"), headers=RETRY_SOON),
        _responder(payload),
    )

    vectors = _embedder(stub_server).embed(["hello"])

    assert vectors.shape == (1, DIM)
    assert len(stub_server.received) == 2


def test_openai_timeout_is_retried_once_then_unavailable(stub_server: StubServer, payload: Any) -> None:
    stub_server.route(
        "POST",
        ANY_PATH,
        StubResponse(json=payload("openai_embeddings"), delay=5.0),
        StubResponse(json=payload("openai_embeddings"), delay=5.0),
    )
    started = time.monotonic()

    with pytest.raises(EmbeddingUnavailable, match="unreachable"):
        _embedder(stub_server, timeout=0.3).embed(["hello"])

    assert len(stub_server.received) == 2
    assert time.monotonic() - started < 3.0


def test_openai_rejected_key_is_unavailable_not_retried_and_not_echoed(stub_server: StubServer, payload: Any) -> None:
    stub_server.route(
        "POST",
        ANY_PATH,
        StubResponse(status=401, json=payload("openai_error_401")),
    )

    with pytest.raises(EmbeddingUnavailable, match="rejected the API key") as raised:
        _embedder(stub_server).embed(["hello"])

    assert len(stub_server.received) == 1
    assert KEY not in str(raised.value)


def test_openai_refused_request_is_a_permanent_failure(stub_server: StubServer, payload: Any) -> None:
    stub_server.route(
        "POST",
        ANY_PATH,
        StubResponse(status=400, json=payload("openai_error_400")),
    )

    with pytest.raises(EmbeddingFailed, match="HTTP 400"):
        _embedder(stub_server).embed(["hello"])
    assert len(stub_server.received) == 1


def test_openai_answer_of_the_wrong_dimension_is_a_permanent_failure(stub_server: StubServer, payload: Any) -> None:
    stub_server.route(
        "POST",
        ANY_PATH,
        _responder(payload, dim=4),
    )

    with pytest.raises(EmbeddingFailed, match=f"dimension {DIM}"):
        _embedder(stub_server).embed(["hello"])


def test_openai_answer_missing_an_embedding_is_a_permanent_failure(stub_server: StubServer, payload: Any) -> None:
    stub_server.route(
        "POST",
        ANY_PATH,
        StubResponse(json=payload("openai_embeddings")),
    )

    with pytest.raises(EmbeddingFailed, match="expected 2 embeddings"):
        _embedder(stub_server).embed(["one", "two"])


def test_openai_embedder_repr_hides_the_key(stub_server: StubServer) -> None:
    assert KEY not in repr(_embedder(stub_server))

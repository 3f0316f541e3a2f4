"""The Gemini embedder, driving the real google-genai SDK against a loopback stub.

google-genai 3.6 sends a list of contents to the Developer API as one
``POST /v1/models/{model}:batchEmbedContents`` and reads ``embeddings[].values``.
"""

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
from memories.embeddings.gemini import GeminiEmbedder

KEY = "gemini-test-not-a-real-key"
DIM = 8
BATCH_PATH = "/v1/models/gemini-embedding-001:batchEmbedContents"


def _vector(text: str, dim: int = DIM) -> list[float]:
    # Not unit length (Gemini's reduced-dimension vectors are not), different per text.
    return [float(len(text) + 1)] + [float(i % 3) for i in range(1, dim)]


def _responder(payload: Callable[[str], Any], dim: int = DIM) -> Callable[[Received], StubResponse]:
    """Answers like the recorded response, one embedding per request in order."""
    template = payload("gemini_batch_embed_contents")

    def respond(request: Received) -> StubResponse:
        body = request.json()
        answer = copy.deepcopy(template)
        texts = [request["content"]["parts"][0]["text"] for request in body["requests"]]
        answer["embeddings"] = [{"values": _vector(text, dim)} for text in texts]
        return StubResponse(json=answer)

    return respond


def _embedder(stub_server: StubServer, **options: Any) -> GeminiEmbedder:
    options = {"api_key": KEY, "base_url": stub_server.url, "dim": DIM, **options}
    embedder = build_embedder("gemini", **options)
    assert isinstance(embedder, GeminiEmbedder)
    return embedder


def _normalised(rows: list[list[float]]) -> np.ndarray:
    matrix = np.array(rows, dtype=np.float32)
    return matrix / np.linalg.norm(matrix, axis=1, keepdims=True)


def test_gemini_request_carries_model_contents_dimensionality_and_key(stub_server: StubServer, payload: Any) -> None:
    stub_server.route(
        "POST",
        ANY_PATH,
        _responder(payload),
    )

    _embedder(stub_server).embed(["first memory", "second"])

    [request] = stub_server.received
    assert request.path == BATCH_PATH
    assert request.headers["x-goog-api-key"] == KEY
    assert [item["content"]["parts"] for item in request.json()["requests"]] == [
        [{"text": "first memory"}],
        [{"text": "second"}],
    ]
    assert {item["model"] for item in request.json()["requests"]} == {"models/gemini-embedding-001"}
    assert {item["outputDimensionality"] for item in request.json()["requests"]} == {DIM}


def test_gemini_defaults_are_gemini_embedding_001_at_768() -> None:
    embedder = build_embedder("gemini", api_key=KEY)

    assert (embedder.name, embedder.model, embedder.dim) == ("gemini", "gemini-embedding-001", 768)


def test_gemini_rows_are_normalised_and_in_input_order(stub_server: StubServer, payload: Any) -> None:
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


def test_gemini_inputs_go_in_batches_of_100(stub_server: StubServer, payload: Any) -> None:
    stub_server.route(
        "POST",
        ANY_PATH,
        _responder(payload),
    )
    texts = [f"memory {i} " + "x" * (i % 7) for i in range(150)]

    vectors = _embedder(stub_server).embed(texts)

    assert [len(request.json()["requests"]) for request in stub_server.received] == [100, 50]
    np.testing.assert_allclose(vectors, _normalised([_vector(text) for text in texts]), atol=1e-6)


def test_gemini_empty_input_makes_no_request(stub_server: StubServer) -> None:
    assert _embedder(stub_server).embed([]).shape == (0, DIM)
    assert stub_server.received == []


def test_gemini_missing_key_is_unavailable_without_a_request(stub_server: StubServer) -> None:
    with pytest.raises(EmbeddingUnavailable, match="GEMINI_API_KEY is not set"):
        _embedder(stub_server, api_key=None).embed(["hello"])
    assert stub_server.received == []


@pytest.mark.parametrize(("status", "fixture"), [(500, "gemini_error_500"), (429, "gemini_error_429")])
def test_gemini_transient_error_is_retried_once_then_unavailable(
    stub_server: StubServer, payload: Any, status: int, fixture: str
) -> None:
    stub_server.route(
        "POST",
        ANY_PATH,
        StubResponse(status=status, json=payload(fixture)),
        StubResponse(status=status, json=payload(fixture)),
    )

    with pytest.raises(EmbeddingUnavailable, match=f"HTTP {status}"):
        _embedder(stub_server).embed(["hello"])
    assert len(stub_server.received) == 2


def test_gemini_one_transient_error_is_absorbed_by_the_sdk_retry(stub_server: StubServer, payload: Any) -> None:
    stub_server.route(
        "POST",
        ANY_PATH,
        StubResponse(status=500, json=payload("gemini_error_500")),
        _responder(payload),
    )

    vectors = _embedder(stub_server).embed(["hello"])

    assert vectors.shape == (1, DIM)
    assert len(stub_server.received) == 2


def test_gemini_timeout_is_retried_once_then_unavailable(stub_server: StubServer, payload: Any) -> None:
    stub_server.route(
        "POST",
        ANY_PATH,
        StubResponse(json=payload("gemini_batch_embed_contents"), delay=5.0),
        StubResponse(json=payload("gemini_batch_embed_contents"), delay=5.0),
    )
    started = time.monotonic()

    with pytest.raises(EmbeddingUnavailable, match="unreachable"):
        _embedder(stub_server, timeout=0.3).embed(["hello"])

    assert len(stub_server.received) == 2
    assert time.monotonic() - started < 3.0


def test_gemini_invalid_key_is_unavailable_not_retried_and_not_echoed(stub_server: StubServer, payload: Any) -> None:
    stub_server.route(
        "POST",
        ANY_PATH,
        StubResponse(status=400, json=payload("gemini_error_400_api_key_invalid")),
    )

    with pytest.raises(EmbeddingUnavailable, match="rejected the API key") as raised:
        _embedder(stub_server).embed(["hello"])

    assert len(stub_server.received) == 1
    assert KEY not in str(raised.value)


def test_gemini_refused_request_is_a_permanent_failure(stub_server: StubServer, payload: Any) -> None:
    stub_server.route(
        "POST",
        ANY_PATH,
        StubResponse(status=400, json=payload("gemini_error_400_too_long")),
    )

    with pytest.raises(EmbeddingFailed, match="HTTP 400 INVALID_ARGUMENT"):
        _embedder(stub_server).embed(["hello"])
    assert len(stub_server.received) == 1


def test_gemini_answer_of_the_wrong_dimension_is_a_permanent_failure(stub_server: StubServer, payload: Any) -> None:
    stub_server.route(
        "POST",
        ANY_PATH,
        _responder(payload, dim=4),
    )

    with pytest.raises(EmbeddingFailed, match=f"dimension {DIM}"):
        _embedder(stub_server).embed(["hello"])


def test_gemini_embedder_repr_hides_the_key(stub_server: StubServer) -> None:
    assert KEY not in repr(_embedder(stub_server))

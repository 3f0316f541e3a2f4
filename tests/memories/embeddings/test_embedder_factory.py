"""Choosing an embedder: explicit ``build_embedder`` and settings-driven ``get_embedder``."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from support.stub_server import ANY_PATH, Received, StubResponse, StubServer

from memories.embeddings.factory import build_embedder, get_embedder
from memories.embeddings.hashing import HashEmbedder


@pytest.fixture
def fresh_embedder_cache() -> Iterator[None]:
    # These tests run with or without the project's Django settings; bare
    # settings are enough for the few names get_embedder reads.
    from django.conf import settings

    if not settings.configured and "DJANGO_SETTINGS_MODULE" not in os.environ:
        settings.configure()
    get_embedder.cache_clear()
    yield
    get_embedder.cache_clear()


def test_unknown_provider_is_refused_with_the_choices() -> None:
    with pytest.raises(ValueError, match="local, openai, gemini, hash"):
        build_embedder("word2vec")


def test_building_a_provider_needs_no_key_and_makes_no_request() -> None:
    # Keys are checked on the first embed, so the app starts without one.
    assert build_embedder("openai").dim == 1536
    assert build_embedder("gemini").dim == 768


@pytest.mark.usefixtures("fresh_embedder_cache")
def test_get_embedder_follows_settings_and_is_built_once() -> None:
    from django.test import override_settings

    with override_settings(CORTEX_EMBEDDER="hash", CORTEX_EMBED_DIM=32, CORTEX_EMBED_MODEL=None):
        embedder = get_embedder()
        assert isinstance(embedder, HashEmbedder)
        assert embedder.dim == 32
        assert get_embedder() is embedder


@pytest.mark.usefixtures("fresh_embedder_cache")
def test_get_embedder_passes_the_openai_key_and_base_url_from_settings(stub_server: StubServer) -> None:
    from django.test import override_settings

    def respond(request: Received) -> StubResponse:
        body = request.json()
        data = [{"object": "embedding", "index": i, "embedding": [1.0] * 8} for i, _ in enumerate(body["input"])]
        return StubResponse(
            json={"object": "list", "data": data, "model": body["model"], "usage": {"prompt_tokens": 1, "total_tokens": 1}}
        )

    stub_server.route(
        "POST",
        ANY_PATH,
        respond,
    )
    with override_settings(
        CORTEX_EMBEDDER="openai",
        CORTEX_EMBED_MODEL="text-embedding-3-large",
        CORTEX_EMBED_DIM=8,
        OPENAI_API_KEY="sk-from-settings",
        OPENAI_BASE_URL=f"{stub_server.url}/v1",
    ):
        vectors = get_embedder().embed(["hello"])

    assert vectors.shape == (1, 8)
    [request] = stub_server.received
    assert request.headers["authorization"] == "Bearer sk-from-settings"
    assert request.json()["model"] == "text-embedding-3-large"

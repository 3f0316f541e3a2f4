"""Ask with a language model: the real OpenAI SDK against the loopback stub. Every citation the
model writes is checked against the sources it was given; a failing model falls back to quotes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from support import remember, signed_in
from support.stub_server import StubResponse

pytestmark = pytest.mark.django_db


CHAT_PATH = "/v1/chat/completions"


@pytest.fixture
def with_openai(settings: Any, stub_server: Any) -> Any:
    settings.CORTEX_LLM = "openai"
    settings.CORTEX_LLM_MODEL = "gpt-test"
    settings.OPENAI_API_KEY = "sk-test-secret"
    settings.OPENAI_BASE_URL = f"{stub_server.url}/v1"
    return stub_server


def _completion(payload: Callable[[str], Any], content: str) -> dict[str, Any]:
    completion = payload("openai_chat_completion")
    completion["choices"][0]["message"]["content"] = content
    return completion


def test_the_models_answer_keeps_only_valid_citations(acme: dict[str, Any], with_openai: Any, payload: Any) -> None:
    remember(acme["employee"], "The public API allows 100 requests per minute per key.", title="API limits", scope="engineering")
    with_openai.route(
        "POST",
        CHAT_PATH,
        StubResponse(
            json=_completion(payload, "The public API allows 100 requests per minute [1]. It was decided by aliens [7].")
        ),
    )
    body = (
        signed_in(acme["employee"])
        .post("/api/ask", {"question": "How many requests per minute does the API allow?"}, content_type="application/json")
        .json()
    )
    assert body["confident"] and body["composer"].startswith("openai:")
    assert [s["text"] for s in body["sentences"]] == ["The public API allows 100 requests per minute."]
    assert body["sentences"][0]["citations"] == [1]
    assert "aliens" not in body["answer"] and body["notes"]
    prompt = with_openai.requests_to(CHAT_PATH)[0].body.decode()
    assert "100 requests per minute" in prompt  # the visible source was the context


def test_a_failing_model_falls_back_to_quoting_the_sources(acme: dict[str, Any], with_openai: Any, payload: Any) -> None:
    remember(acme["employee"], "The public API allows 100 requests per minute per key.", title="API limits", scope="engineering")
    with_openai.route("POST", CHAT_PATH, StubResponse(status=500, json=payload("openai_error_500")))
    body = (
        signed_in(acme["employee"])
        .post("/api/ask", {"question": "How many requests per minute does the API allow?"}, content_type="application/json")
        .json()
    )
    assert body["confident"] and body["composer"] == "extractive"
    assert "100 requests per minute" in body["answer"] and "unavailable" in body["notes"][0]


def test_the_model_never_sees_memories_the_asker_cannot_read(acme: dict[str, Any], with_openai: Any, payload: Any) -> None:
    remember(
        acme["exec"], "The offsite budget is 50,000 dollars.", title="Offsite budget", scope="sales", clearance_min="Executive"
    )
    remember(acme["employee"], "The offsite is in Lisbon this year; budget details are with leadership.", title="Offsite venue")
    with_openai.route("POST", CHAT_PATH, StubResponse(json=_completion(payload, "The offsite is in Lisbon [1].")))
    signed_in(acme["contractor"]).post("/api/ask", {"question": "What is the offsite budget?"}, content_type="application/json")
    for request in with_openai.requests_to(CHAT_PATH):
        assert b"50,000" not in request.body

"""The Gemini provider, driving the real ``google-genai`` SDK against the stub."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from support.stub_server import ANY_PATH, StubResponse, StubServer

from memories.llm.base import LLMInvalidOutput, LLMUnavailable
from memories.llm.gemini_provider import GeminiProvider

CONFLICT_SCHEMA = {
    "type": "object",
    "properties": {"conflict": {"type": "boolean"}, "reason": {"type": "string"}},
    "required": ["conflict", "reason"],
    "additionalProperties": False,
}


def _provider(stub_url: str, **overrides: Any) -> GeminiProvider:
    options: dict[str, Any] = {"api_key": "gm-test-secret", "base_url": stub_url, "retry_backoff": 0.01}
    options.update(overrides)
    return GeminiProvider(**options)


def _with_text(response: dict[str, Any], text: str) -> dict[str, Any]:
    response["candidates"][0]["content"]["parts"] = [{"text": text}]
    return response


def test_structured_answer_is_requested_as_json_with_the_schema(stub_server: StubServer, payload: Callable[[str], Any]) -> None:
    stub_server.route(
        "POST",
        ANY_PATH,
        StubResponse(json=payload("gemini_generate_content")),
    )
    llm = _provider(stub_server.url)

    answer = llm.generate(
        "Do these two memories conflict?",
        json_schema=CONFLICT_SCHEMA,
        system="You compare team memories.",
        max_output_tokens=300,
    )

    assert answer.data == {"conflict": True, "reason": "The launch date moved from May to June."}
    # Output includes the thinking tokens, which are billed and capped as output.
    assert (answer.input_tokens, answer.output_tokens) == (164, 19 + 58)
    assert (answer.provider, answer.model) == ("gemini", "gemini-2.5-flash")
    assert llm.label == "gemini:gemini-2.5-flash"

    [request] = stub_server.received
    assert request.path.endswith("/models/gemini-2.5-flash:generateContent")
    assert request.headers["x-goog-api-key"] == "gm-test-secret"
    assert request.json()["contents"] == [{"role": "user", "parts": [{"text": "Do these two memories conflict?"}]}]
    assert request.json()["systemInstruction"]["parts"] == [{"text": "You compare team memories."}]
    generation_config = request.json()["generationConfig"]
    assert generation_config["responseMimeType"] == "application/json"
    assert generation_config["responseJsonSchema"] == CONFLICT_SCHEMA
    assert generation_config["maxOutputTokens"] == 300
    assert generation_config["temperature"] == 0.0


def test_plain_answer_has_text_and_no_data(stub_server: StubServer, payload: Callable[[str], Any]) -> None:
    stub_server.route(
        "POST",
        ANY_PATH,
        StubResponse(json=_with_text(payload("gemini_generate_content"), "Ship it in June.")),
    )

    answer = _provider(stub_server.url, model="gemini-2.5-pro").generate("When do we ship?")

    assert (answer.text, answer.data, answer.model) == ("Ship it in June.", None, "gemini-2.5-pro")
    [request] = stub_server.received
    assert request.path.endswith("/models/gemini-2.5-pro:generateContent")
    assert "responseMimeType" not in request.json().get("generationConfig", {})
    assert "systemInstruction" not in request.json()


def test_json_in_a_fenced_block_is_accepted(stub_server: StubServer, payload: Callable[[str], Any]) -> None:
    fenced = '```json\n{"conflict": false, "reason": "Same date."}\n```'
    stub_server.route(
        "POST",
        ANY_PATH,
        StubResponse(json=_with_text(payload("gemini_generate_content"), fenced)),
    )

    answer = _provider(stub_server.url).generate("Compare.", json_schema=CONFLICT_SCHEMA)

    assert answer.data == {"conflict": False, "reason": "Same date."}


def test_answer_that_breaks_the_schema_is_invalid_output(stub_server: StubServer, payload: Callable[[str], Any]) -> None:
    stub_server.route(
        "POST",
        ANY_PATH,
        StubResponse(json=_with_text(payload("gemini_generate_content"), '{"conflict": true}')),
    )

    with pytest.raises(LLMInvalidOutput, match="reason"):
        _provider(stub_server.url).generate("Compare.", json_schema=CONFLICT_SCHEMA)


def test_a_blocked_prompt_without_candidates_is_invalid_output(stub_server: StubServer, payload: Callable[[str], Any]) -> None:
    blocked = payload("gemini_generate_content")
    blocked["candidates"] = []
    blocked["promptFeedback"] = {"blockReason": "SAFETY"}
    stub_server.route(
        "POST",
        ANY_PATH,
        StubResponse(json=blocked),
    )

    with pytest.raises(LLMInvalidOutput, match="no candidates"):
        _provider(stub_server.url).generate("Compare.", json_schema=CONFLICT_SCHEMA)


def test_an_invalid_key_reported_as_400_reads_as_a_rejected_key_and_is_not_retried(
    stub_server: StubServer, payload: Callable[[str], Any]
) -> None:
    stub_server.route(
        "POST",
        ANY_PATH,
        StubResponse(status=400, json=payload("gemini_error_400_api_key_invalid")),
    )

    with pytest.raises(LLMUnavailable, match="rejected the API key") as caught:
        _provider(stub_server.url).generate("Compare.")

    assert not caught.value.retryable
    assert len(stub_server.received) == 1

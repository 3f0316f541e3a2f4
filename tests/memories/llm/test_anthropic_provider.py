"""The Anthropic provider, driving the real ``anthropic`` SDK against the stub."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from support.stub_server import ANY_PATH, StubResponse, StubServer

from memories.llm.anthropic_provider import AnthropicProvider
from memories.llm.base import LLMInvalidOutput

CONFLICT_SCHEMA = {
    "type": "object",
    "properties": {"conflict": {"type": "boolean"}, "reason": {"type": "string"}},
    "required": ["conflict", "reason"],
    "additionalProperties": False,
}


def _provider(stub_url: str, **overrides: Any) -> AnthropicProvider:
    options: dict[str, Any] = {"api_key": "sk-ant-test-secret", "base_url": stub_url, "retry_backoff": 0.01}
    options.update(overrides)
    return AnthropicProvider(**options)


def test_structured_answer_is_forced_through_the_answer_tool(stub_server: StubServer, payload: Callable[[str], Any]) -> None:
    stub_server.route(
        "POST",
        ANY_PATH,
        StubResponse(json=payload("anthropic_message_tool_use")),
    )
    llm = _provider(stub_server.url)

    answer = llm.generate(
        "Do these two memories conflict?",
        json_schema=CONFLICT_SCHEMA,
        system="You compare team memories.",
        max_output_tokens=300,
    )

    assert answer.data == {"conflict": True, "reason": "The launch date moved from May to June."}
    assert answer.text == '{"conflict": true, "reason": "The launch date moved from May to June."}'
    assert (answer.input_tokens, answer.output_tokens) == (472, 61)
    assert (answer.provider, answer.model) == ("anthropic", "claude-sonnet-5-5")
    assert llm.label == "anthropic:claude-sonnet-5-5"

    [request] = stub_server.received
    assert request.path == "/v1/messages"
    assert request.headers["authorization"] == "Bearer sk-ant-test-secret"
    assert "anthropic-version" in request.headers
    assert request.json()["model"] == "claude-sonnet-5-5"
    assert request.json()["max_tokens"] == 300
    assert request.json()["system"] == "You compare team memories."
    assert request.json()["messages"] == [{"role": "user", "content": "Do these two memories conflict?"}]
    [tool] = request.json()["tools"]
    assert (tool["name"], tool["input_schema"]) == ("answer", CONFLICT_SCHEMA)
    assert request.json()["tool_choice"] == {"type": "tool", "name": "answer"}
    # The API version the SDK speaks rejects sampling parameters.
    assert "temperature" not in request.json()


def test_plain_answer_joins_the_text_blocks(stub_server: StubServer, payload: Callable[[str], Any]) -> None:
    stub_server.route(
        "POST",
        ANY_PATH,
        StubResponse(json=payload("anthropic_message_text")),
    )

    answer = _provider(stub_server.url, model="claude-haiku-4-5").generate("What did we decide?")

    assert answer.text == "The team agreed to ship the importer in June."
    assert answer.data is None
    assert (answer.input_tokens, answer.output_tokens) == (25, 13)
    [request] = stub_server.received
    assert request.json()["model"] == "claude-haiku-4-5"
    assert "tools" not in request.json()
    assert "system" not in request.json()


def test_tool_input_that_breaks_the_schema_is_invalid_output(stub_server: StubServer, payload: Callable[[str], Any]) -> None:
    message = payload("anthropic_message_tool_use")
    message["content"][0]["input"] = {"conflict": "yes"}
    stub_server.route(
        "POST",
        ANY_PATH,
        StubResponse(json=message),
    )

    with pytest.raises(LLMInvalidOutput, match="schema"):
        _provider(stub_server.url).generate("Compare.", json_schema=CONFLICT_SCHEMA)


def test_an_answer_without_the_tool_call_is_invalid_output(stub_server: StubServer, payload: Callable[[str], Any]) -> None:
    stub_server.route(
        "POST",
        ANY_PATH,
        StubResponse(json=payload("anthropic_message_text")),
    )

    with pytest.raises(LLMInvalidOutput, match="did not call"):
        _provider(stub_server.url).generate("Compare.", json_schema=CONFLICT_SCHEMA)

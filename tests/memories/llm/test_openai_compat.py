"""The OpenAI-compatible provider, driving the real ``openai`` SDK against the stub."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jsonschema
import pytest
from support.stub_server import ANY_PATH, StubResponse, StubServer

from memories.llm.base import JSON_ONLY_INSTRUCTION, LLMInvalidOutput
from memories.llm.factory import build_llm
from memories.llm.openai_compat import OpenAICompatProvider, token_limit_field

CONFLICT_SCHEMA = {
    "type": "object",
    "properties": {"conflict": {"type": "boolean"}, "reason": {"type": "string"}},
    "required": ["conflict", "reason"],
    "additionalProperties": False,
}
CHAT_PATH = "/v1/chat/completions"


def _provider(stub_url: str, **overrides: Any) -> OpenAICompatProvider:
    options: dict[str, Any] = {
        "api_key": "sk-test-secret",
        "base_url": f"{stub_url}/v1",
        "retry_backoff": 0.01,
    }
    options.update(overrides)
    return OpenAICompatProvider(**options)


def _with_content(completion: dict[str, Any], content: str) -> dict[str, Any]:
    completion["choices"][0]["message"]["content"] = content
    return completion


def test_structured_answer_is_requested_with_strict_schema_and_parsed(
    stub_server: StubServer, payload: Callable[[str], Any]
) -> None:
    stub_server.route(
        "POST",
        ANY_PATH,
        StubResponse(json=payload("openai_chat_completion")),
    )
    llm = _provider(stub_server.url)

    answer = llm.generate(
        "Do these two memories conflict?",
        json_schema=CONFLICT_SCHEMA,
        system="You compare team memories.",
        max_output_tokens=300,
    )

    assert answer.data == {"conflict": True, "reason": "The launch date moved from May to June."}
    assert (answer.input_tokens, answer.output_tokens) == (182, 21)
    assert (answer.provider, answer.model) == ("openai", "gpt-4o-mini")
    assert llm.label == "openai:gpt-4o-mini"

    [request] = stub_server.received
    assert request.path == CHAT_PATH
    assert request.headers["authorization"] == "Bearer sk-test-secret"
    assert request.json()["model"] == "gpt-4o-mini"
    assert request.json()["temperature"] == 0.0
    # A compatible server (not api.openai.com) gets the widely supported field.
    assert request.json()["max_tokens"] == 300
    assert "max_completion_tokens" not in request.json()
    assert request.json()["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "answer", "schema": CONFLICT_SCHEMA, "strict": True},
    }
    system_message, user_message = request.json()["messages"]
    assert system_message == {"role": "system", "content": "You compare team memories."}
    assert user_message["role"] == "user"
    # Servers that ignore response_format still see the instruction in the prompt.
    assert user_message["content"].startswith("Do these two memories conflict?")
    assert JSON_ONLY_INSTRUCTION in user_message["content"]


def test_plain_answer_has_text_and_no_data(stub_server: StubServer, payload: Callable[[str], Any]) -> None:
    stub_server.route(
        "POST",
        ANY_PATH,
        StubResponse(json=_with_content(payload("openai_chat_completion"), "Ship it in June.")),
    )

    answer = _provider(stub_server.url, model="llama3.1:8b").generate("When do we ship?")

    assert (answer.text, answer.data, answer.model) == ("Ship it in June.", None, "llama3.1:8b")
    [request] = stub_server.received
    assert request.json()["model"] == "llama3.1:8b"
    assert request.json()["messages"] == [{"role": "user", "content": "When do we ship?"}]
    assert "response_format" not in request.json()


def test_json_in_a_fenced_block_is_accepted(stub_server: StubServer, payload: Callable[[str], Any]) -> None:
    fenced = 'Here you go:\n```json\n{"conflict": false, "reason": "Same date."}\n```'
    stub_server.route(
        "POST",
        ANY_PATH,
        StubResponse(json=_with_content(payload("openai_chat_completion"), fenced)),
    )

    answer = _provider(stub_server.url).generate("Compare.", json_schema=CONFLICT_SCHEMA)

    assert answer.data == {"conflict": False, "reason": "Same date."}
    assert answer.text == fenced


def test_answer_that_breaks_the_schema_is_invalid_output(stub_server: StubServer, payload: Callable[[str], Any]) -> None:
    stub_server.route(
        "POST",
        ANY_PATH,
        StubResponse(json=_with_content(payload("openai_chat_completion"), '{"conflict": "maybe"}')),
    )

    with pytest.raises(LLMInvalidOutput, match="schema"):
        _provider(stub_server.url).generate("Compare.", json_schema=CONFLICT_SCHEMA)


def test_answer_that_is_not_json_is_invalid_output(stub_server: StubServer, payload: Callable[[str], Any]) -> None:
    stub_server.route(
        "POST",
        ANY_PATH,
        StubResponse(json=_with_content(payload("openai_chat_completion"), "I think they conflict.")),
    )

    with pytest.raises(LLMInvalidOutput, match="not JSON"):
        _provider(stub_server.url).generate("Compare.", json_schema=CONFLICT_SCHEMA)


def test_refusal_is_invalid_output(stub_server: StubServer, payload: Callable[[str], Any]) -> None:
    completion = _with_content(payload("openai_chat_completion"), "")
    completion["choices"][0]["message"].update(content=None, refusal="I can't help with that.")
    stub_server.route(
        "POST",
        ANY_PATH,
        StubResponse(json=completion),
    )

    with pytest.raises(LLMInvalidOutput, match="refused"):
        _provider(stub_server.url).generate("Compare.", json_schema=CONFLICT_SCHEMA)


def test_invalid_schema_fails_before_any_request(stub_server: StubServer) -> None:
    with pytest.raises(jsonschema.SchemaError):
        _provider(stub_server.url).generate("Compare.", json_schema={"type": "no-such-type"})

    assert stub_server.received == []


def test_missing_usage_from_a_compatible_server_counts_zero_tokens(
    stub_server: StubServer, payload: Callable[[str], Any]
) -> None:
    completion = _with_content(payload("openai_chat_completion"), "ok")
    del completion["usage"]
    stub_server.route(
        "POST",
        ANY_PATH,
        StubResponse(json=completion),
    )

    answer = _provider(stub_server.url).generate("Ping.")

    assert (answer.input_tokens, answer.output_tokens) == (0, 0)


def test_build_llm_wires_model_key_and_base_url(stub_server: StubServer, payload: Callable[[str], Any]) -> None:
    stub_server.route(
        "POST",
        ANY_PATH,
        StubResponse(json=_with_content(payload("openai_chat_completion"), "ok")),
    )
    llm = build_llm("openai", model="qwen2.5", api_key="ollama", base_url=f"{stub_server.url}/v1", retry_backoff=0)

    assert llm is not None
    llm.generate("Ping.")

    [request] = stub_server.received
    assert request.json()["model"] == "qwen2.5"
    assert request.headers["authorization"] == "Bearer ollama"


def test_api_openai_com_gets_max_completion_tokens() -> None:
    assert token_limit_field("api.openai.com") == "max_completion_tokens"
    assert token_limit_field("localhost") == "max_tokens"

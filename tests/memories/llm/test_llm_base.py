"""The shared output contract: lenient JSON reading, strict schema validation,
error mapping and the single retry."""

from __future__ import annotations

import jsonschema
import pytest

from memories.llm.base import (
    LLMInvalidOutput,
    LLMUnavailable,
    call_with_one_retry,
    check_schema,
    parse_and_validate,
    parse_json_text,
    status_failure,
)

SCHEMA = {
    "type": "object",
    "properties": {"items": {"type": "array", "items": {"type": "integer"}}},
    "required": ["items"],
}


@pytest.mark.parametrize(
    "text",
    [
        '{"items": [1, 2]}',
        '  \n{"items": [1, 2]}\n',
        '```json\n{"items": [1, 2]}\n```',
        '```\n{"items": [1, 2]}\n```',
        'Sure! Here is the JSON:\n\n```json\n{"items": [1, 2]}\n```\nLet me know.',
    ],
    ids=["bare", "padded", "json-fence", "plain-fence", "fence-in-prose"],
)
def test_json_is_read_bare_or_fenced(text: str) -> None:
    assert parse_and_validate(text, SCHEMA) == {"items": [1, 2]}


def test_unreadable_json_is_invalid_output() -> None:
    with pytest.raises(LLMInvalidOutput, match="not JSON"):
        parse_json_text('{"items": [1, 2]')


def test_a_scalar_answer_is_invalid_output_even_if_the_schema_allows_it() -> None:
    with pytest.raises(LLMInvalidOutput, match="object or array"):
        parse_and_validate("42", {"type": "integer"})


def test_a_schema_violation_names_where_it_happened() -> None:
    with pytest.raises(LLMInvalidOutput, match=r"at items/1: 'two' is not of type 'integer'"):
        parse_and_validate('{"items": [1, "two"]}', SCHEMA)


def test_an_invalid_schema_is_a_programming_error_not_invalid_output() -> None:
    with pytest.raises(jsonschema.SchemaError):
        check_schema({"type": "object", "required": "items"})


def test_a_rejected_key_message_leaves_out_the_servers_body() -> None:
    failure = status_failure("openai", 401, {"error": {"message": "Incorrect API key provided: sk-abc***xyz"}})

    assert str(failure) == "openai rejected the API key (HTTP 401); check the configured key"
    assert not failure.retryable


@pytest.mark.parametrize(("status", "retryable"), [(400, False), (404, False), (429, True), (500, True), (529, True)])
def test_only_rate_limits_and_server_errors_are_retryable(status: int, retryable: bool) -> None:
    assert status_failure("gemini", status, {"error": {"message": "boom"}}).retryable is retryable


def test_a_retryable_failure_is_tried_exactly_twice() -> None:
    attempts: list[int] = []

    def always_overloaded() -> str:
        attempts.append(1)
        raise LLMUnavailable("overloaded", retryable=True)

    with pytest.raises(LLMUnavailable, match="overloaded"):
        call_with_one_retry(always_overloaded, label="test:model", backoff_seconds=0)

    assert len(attempts) == 2


def test_a_permanent_failure_is_not_retried() -> None:
    attempts: list[int] = []

    def rejected() -> str:
        attempts.append(1)
        raise LLMUnavailable("bad key")

    with pytest.raises(LLMUnavailable, match="bad key"):
        call_with_one_retry(rejected, label="test:model", backoff_seconds=0)

    assert len(attempts) == 1

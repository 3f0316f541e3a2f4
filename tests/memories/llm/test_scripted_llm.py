"""ScriptedLLM, the fake other tests use in place of a real provider."""

from __future__ import annotations

import pytest

from memories.llm.base import LLMInvalidOutput, LLMProvider, LLMUnavailable
from memories.llm.fake import ScriptedLLM

DECISIONS_SCHEMA = {
    "type": "object",
    "properties": {"decisions": {"type": "array", "items": {"type": "string"}}},
    "required": ["decisions"],
}


def test_answers_come_back_in_script_order_and_calls_are_recorded() -> None:
    llm: LLMProvider = ScriptedLLM(["first", "second"])

    first = llm.generate("one", system="be brief")
    second = llm.generate("two", max_output_tokens=50, temperature=0.5)

    assert (first.text, second.text) == ("first", "second")
    assert isinstance(llm, ScriptedLLM)
    assert llm.calls == ["one", "two"]
    assert llm.calls[0].system == "be brief"
    assert (llm.calls[1].prompt, llm.calls[1].max_output_tokens, llm.calls[1].temperature) == ("two", 50, 0.5)
    assert llm.remaining == 0


def test_a_dict_answer_is_json_text_and_validated_data() -> None:
    llm = ScriptedLLM([{"decisions": ["Ship in June"]}])

    answer = llm.generate("Extract decisions.", json_schema=DECISIONS_SCHEMA)

    assert answer.data == {"decisions": ["Ship in June"]}
    assert answer.text == '{"decisions": ["Ship in June"]}'
    assert llm.calls[0].json_schema == DECISIONS_SCHEMA
    assert (answer.provider, answer.model) == ("fake", "scripted")


def test_a_dict_answer_that_breaks_the_schema_is_invalid_output() -> None:
    llm = ScriptedLLM([{"decisions": "Ship in June"}])

    with pytest.raises(LLMInvalidOutput):
        llm.generate("Extract decisions.", json_schema=DECISIONS_SCHEMA)


def test_a_text_answer_is_parsed_like_a_real_provider_would() -> None:
    llm = ScriptedLLM(['```json\n{"decisions": []}\n```', "not json at all"])

    assert llm.generate("a", json_schema=DECISIONS_SCHEMA).data == {"decisions": []}
    with pytest.raises(LLMInvalidOutput):
        llm.generate("b", json_schema=DECISIONS_SCHEMA)


def test_without_a_schema_there_is_no_data() -> None:
    answer = ScriptedLLM([{"decisions": []}]).generate("a")

    assert answer.data is None
    assert answer.text == '{"decisions": []}'


def test_a_scripted_exception_is_raised_in_its_turn() -> None:
    llm = ScriptedLLM([LLMUnavailable("down", retryable=True), "back"])

    with pytest.raises(LLMUnavailable, match="down"):
        llm.generate("a")
    assert llm.generate("b").text == "back"
    assert llm.calls == ["a", "b"]


def test_calling_more_often_than_scripted_fails_the_test() -> None:
    llm = ScriptedLLM([])

    with pytest.raises(AssertionError, match="only had 0 responses"):
        llm.generate("a")


def test_label_and_token_counts_are_deterministic() -> None:
    llm = ScriptedLLM(["three word answer"], name="openai", model="gpt-test")

    answer = llm.generate("a four word prompt", system="sys")

    assert llm.label == "openai:gpt-test"
    assert (answer.input_tokens, answer.output_tokens) == (5, 3)

"""Anthropic's Messages API through the official ``anthropic`` SDK.

Structured answers use one forced tool whose ``input_schema`` is the caller's
schema: the tool-use input arrives already parsed, which is the most reliable
way to get JSON out of Claude models across versions.
"""

from __future__ import annotations

import json
from typing import Any

import anthropic
from anthropic.types import Message, MessageParam

from memories.llm.base import (
    Generation,
    LLMInvalidOutput,
    LLMUnavailable,
    call_with_one_retry,
    check_schema,
    status_failure,
    validate_data,
)

DEFAULT_MODEL = "claude-sonnet-5-5"

_TOOL_NAME = "answer"


class AnthropicProvider:
    """Claude through the Messages API; ``base_url`` lets a gateway or proxy stand in."""

    name = "anthropic"

    def __init__(
        self,
        *,
        api_key: str | None,
        model: str | None = None,
        base_url: str | None = None,
        timeout: float = 30.0,
        retry_backoff: float = 1.0,
    ) -> None:
        self.model = model or DEFAULT_MODEL
        self._retry_backoff = retry_backoff
        self._client: anthropic.Anthropic | None = None
        if api_key:
            # An explicit key stops the SDK from consulting environment variables
            # or profile files; max_retries=0 leaves the single retry to us.
            self._client = anthropic.Anthropic(api_key=api_key, base_url=base_url, timeout=timeout, max_retries=0)

    @property
    def label(self) -> str:
        return f"{self.name}:{self.model}"

    def generate(
        self,
        prompt: str,
        *,
        json_schema: dict[str, Any] | None = None,
        system: str | None = None,
        max_output_tokens: int = 1024,
        temperature: float = 0.0,
    ) -> Generation:
        """See ``LLMProvider.generate``. With ``json_schema`` the schema's top level
        must be an object (a tool's input is always an object).

        ``temperature`` is accepted for interface compatibility and ignored: the
        API version this SDK speaks (anthropic-version 2026-10-21) rejects every
        sampling parameter, and the SDK no longer offers them.
        """
        check_schema(json_schema)
        client = self._client
        if client is None:
            raise LLMUnavailable("ANTHROPIC_API_KEY is not set")

        messages: list[MessageParam] = [{"role": "user", "content": prompt}]
        kwargs: dict[str, Any] = {
            "model": self.model,
            "max_tokens": max_output_tokens,
            "messages": messages,
        }
        if system:
            kwargs["system"] = system
        if json_schema is not None:
            kwargs["tools"] = [
                {
                    "name": _TOOL_NAME,
                    "description": "Record the answer in the required structure.",
                    "input_schema": json_schema,
                }
            ]
            kwargs["tool_choice"] = {"type": "tool", "name": _TOOL_NAME}

        def attempt() -> Message:
            try:
                return client.messages.create(**kwargs)
            except anthropic.APIStatusError as exc:
                raise status_failure(self.name, exc.status_code, exc.body) from exc
            except anthropic.APITimeoutError as exc:
                raise LLMUnavailable(f"{self.name} timed out", retryable=True) from exc
            except anthropic.APIConnectionError as exc:
                raise LLMUnavailable(f"{self.name} could not be reached: {exc}", retryable=True) from exc

        message = call_with_one_retry(attempt, label=self.label, backoff_seconds=self._retry_backoff)
        return self._to_generation(message, json_schema)

    def _to_generation(self, message: Message, json_schema: dict[str, Any] | None) -> Generation:
        # The SDK does not validate response bodies, so a wrong base URL that
        # answers 200 with something else (a web page, another API) lands here.
        if not isinstance(message, Message) or not isinstance(message.content, list) or message.usage is None:
            raise LLMUnavailable(f"{self.name} did not answer in the Messages format; check the base URL")
        data: dict[str, Any] | list[Any] | None = None
        if json_schema is not None:
            tool_input = next(
                (block.input for block in message.content if block.type == "tool_use" and block.name == _TOOL_NAME),
                None,
            )
            if tool_input is None:
                raise LLMInvalidOutput(f"{self.name} did not call the {_TOOL_NAME!r} tool")
            data = validate_data(tool_input, json_schema)
            text = json.dumps(data)
        else:
            text = "".join(block.text for block in message.content if block.type == "text")
        return Generation(
            text=text,
            data=data,
            input_tokens=message.usage.input_tokens,
            output_tokens=message.usage.output_tokens,
            provider=self.name,
            model=self.model,
        )

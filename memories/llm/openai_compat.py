"""OpenAI and OpenAI-compatible servers (Ollama, vLLM, LM Studio, ...) through the
official ``openai`` SDK and the Chat Completions API, which every compatible
server implements (the Responses API is OpenAI-only)."""

from __future__ import annotations

from typing import Any

import openai
from openai.types.chat import ChatCompletion, ChatCompletionMessageParam

from memories.llm.base import (
    Generation,
    LLMInvalidOutput,
    LLMUnavailable,
    call_with_one_retry,
    check_schema,
    json_prompt,
    parse_and_validate,
    status_failure,
)

DEFAULT_MODEL = "gpt-4o-mini"

_OPENAI_HOST = "api.openai.com"


def token_limit_field(host: str) -> str:
    """The request field that caps the answer length on the server at ``host``.

    api.openai.com deprecated ``max_tokens`` (its reasoning models reject it),
    while many compatible servers (Ollama, LM Studio) only understand
    ``max_tokens``.
    """
    return "max_completion_tokens" if host == _OPENAI_HOST else "max_tokens"


class OpenAICompatProvider:
    """Chat Completions against OpenAI or any server at ``base_url`` that speaks its API.

    A key is required even for local servers that ignore it (Ollama documents
    setting any value), so a missing key is always a configuration error rather
    than a silent unauthenticated call to api.openai.com.
    """

    name = "openai"

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
        self._client: openai.OpenAI | None = None
        if api_key:
            # max_retries=0: call_with_one_retry owns the single retry.
            self._client = openai.OpenAI(api_key=api_key, base_url=base_url, timeout=timeout, max_retries=0)

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
        """See ``LLMProvider.generate``."""
        check_schema(json_schema)
        client = self._client
        if client is None:
            raise LLMUnavailable("OPENAI_API_KEY is not set")

        messages: list[ChatCompletionMessageParam] = []
        if system:
            messages.append({"role": "system", "content": system})
        # Some compatible servers ignore response_format, so the prompt asks for
        # JSON too and the answer is parsed leniently and validated below.
        user_content = json_prompt(prompt, json_schema) if json_schema is not None else prompt
        messages.append({"role": "user", "content": user_content})

        kwargs: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            "temperature": temperature,
        }
        kwargs[token_limit_field(client.base_url.host)] = max_output_tokens
        if json_schema is not None:
            kwargs["response_format"] = {
                "type": "json_schema",
                "json_schema": {
                    "name": "answer",
                    "schema": json_schema,
                    "strict": True,
                },
            }

        def attempt() -> ChatCompletion:
            try:
                return client.chat.completions.create(**kwargs)
            except openai.APIStatusError as exc:
                raise status_failure(self.name, exc.status_code, exc.body) from exc
            except openai.APITimeoutError as exc:
                raise LLMUnavailable(f"{self.name} timed out", retryable=True) from exc
            except openai.APIConnectionError as exc:
                raise LLMUnavailable(f"{self.name} could not be reached: {exc}", retryable=True) from exc

        completion = call_with_one_retry(attempt, label=self.label, backoff_seconds=self._retry_backoff)
        return self._to_generation(completion, json_schema)

    def _to_generation(self, completion: ChatCompletion, json_schema: dict[str, Any] | None) -> Generation:
        # The SDK does not validate response bodies, so a wrong base URL that
        # answers 200 with something else (a web page, another API) lands here.
        if not isinstance(completion, ChatCompletion) or not isinstance(completion.choices, list):
            raise LLMUnavailable(f"{self.name} did not answer in the Chat Completions format; check the base URL")
        if not completion.choices:
            raise LLMInvalidOutput(f"{self.name} returned no choices")
        message = completion.choices[0].message
        if message.refusal:
            raise LLMInvalidOutput(f"{self.name} refused to answer: {message.refusal}")
        text = message.content or ""
        data = parse_and_validate(text, json_schema) if json_schema is not None else None
        usage = completion.usage
        return Generation(
            text=text,
            data=data,
            input_tokens=usage.prompt_tokens if usage else 0,
            output_tokens=usage.completion_tokens if usage else 0,
            provider=self.name,
            model=self.model,
        )

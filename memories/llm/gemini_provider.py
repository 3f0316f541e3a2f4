"""Google's Gemini API (not Vertex AI) through the official ``google-genai`` SDK."""

from __future__ import annotations

import json
from typing import Any

import httpx
import httpx2
from google import genai
from google.genai import errors as genai_errors
from google.genai import types as genai_types

from memories.llm.base import (
    Generation,
    LLMInvalidOutput,
    LLMUnavailable,
    call_with_one_retry,
    check_schema,
    parse_and_validate,
    status_failure,
)

DEFAULT_MODEL = "gemini-2.5-flash"

# google-genai does not wrap transport failures in its own exception types; it
# lets the underlying client's errors through. Which client it uses (httpx or
# httpx2) depends on what is installed and GOOGLE_GENAI_HTTP_CLIENT, so both.
_TRANSPORT_ERRORS: tuple[type[Exception], ...] = (
    httpx.TransportError,
    httpx2.TransportError,
)
_TIMEOUT_ERRORS: tuple[type[Exception], ...] = (
    httpx.TimeoutException,
    httpx2.TimeoutException,
)


def _http_status(exc: genai_errors.APIError) -> int:
    """The HTTP status, except that a rejected key counts as 401.

    The Gemini API reports an invalid key as 400 INVALID_ARGUMENT with reason
    API_KEY_INVALID; treating it as 401 gives people the same "key rejected"
    message as the other providers.
    """
    if exc.code == 400 and "API_KEY_INVALID" in json.dumps(exc.details, default=str):
        return 401
    return exc.code


class GeminiProvider:
    """Gemini ``generate_content``; JSON answers use ``response_json_schema``.

    ``response_json_schema`` (plain JSON Schema) is used rather than
    ``response_schema`` (an OpenAPI subset) so callers write one schema for
    every provider. Gemini supports only part of JSON Schema, so the answer is
    validated against the full schema regardless.
    """

    name = "gemini"

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
        self._client: genai.Client | None = None
        if api_key:
            http_options = genai_types.HttpOptions(
                base_url=base_url,
                # The SDK takes milliseconds.
                timeout=max(1, round(timeout * 1000)),
                # attempts=1 is "no retries": call_with_one_retry owns the single retry.
                retry_options=genai_types.HttpRetryOptions(attempts=1),
            )
            # vertexai=False pins the Gemini API even if GOOGLE_GENAI_USE_VERTEXAI
            # is set in the environment for some other tool.
            self._client = genai.Client(vertexai=False, api_key=api_key, http_options=http_options)

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
            raise LLMUnavailable("GEMINI_API_KEY is not set")

        config = genai_types.GenerateContentConfig(
            system_instruction=system or None,
            max_output_tokens=max_output_tokens,
            temperature=temperature,
        )
        if json_schema is not None:
            config.response_mime_type = "application/json"
            config.response_json_schema = json_schema

        def attempt() -> genai_types.GenerateContentResponse:
            try:
                return client.models.generate_content(model=self.model, contents=prompt, config=config)
            except genai_errors.APIError as exc:
                raise status_failure(self.name, _http_status(exc), exc.details) from exc
            except _TIMEOUT_ERRORS as exc:
                raise LLMUnavailable(f"{self.name} timed out", retryable=True) from exc
            except _TRANSPORT_ERRORS as exc:
                raise LLMUnavailable(f"{self.name} could not be reached: {exc}", retryable=True) from exc

        response = call_with_one_retry(attempt, label=self.label, backoff_seconds=self._retry_backoff)
        return self._to_generation(response, json_schema)

    def _to_generation(
        self,
        response: genai_types.GenerateContentResponse,
        json_schema: dict[str, Any] | None,
    ) -> Generation:
        if not response.candidates:
            # A prompt blocked by safety filters comes back with no candidates.
            raise LLMInvalidOutput(f"{self.name} returned no candidates")
        text = response.text or ""
        data = parse_and_validate(text, json_schema) if json_schema is not None else None
        usage = response.usage_metadata
        return Generation(
            text=text,
            data=data,
            input_tokens=(usage.prompt_token_count or 0) if usage else 0,
            # Thinking models bill their thoughts as output tokens, and they count
            # against max_output_tokens, so they belong in the output figure.
            output_tokens=((usage.candidates_token_count or 0) + (usage.thoughts_token_count or 0)) if usage else 0,
            provider=self.name,
            model=self.model,
        )

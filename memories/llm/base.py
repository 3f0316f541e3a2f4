"""The provider-neutral LLM contract and the helpers every provider shares.

Callers (conflict detection, decision extraction, entity extraction) depend on
this module only: they get a ``Generation`` or one of two exceptions, never an
SDK type. ``LLMUnavailable`` means "ask again later or go without";
``LLMInvalidOutput`` means "the model answered, but not usefully" and is treated
as no answer.
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from jsonschema.exceptions import best_match
from jsonschema.validators import validator_for

logger = logging.getLogger(__name__)

T = TypeVar("T")

# The instruction appended to prompts whose answer must be JSON. Providers whose
# API cannot enforce the schema (or whose compatible servers may ignore it) rely
# on this text; the answer is validated either way.
JSON_ONLY_INSTRUCTION = "Answer with JSON only, no prose, matching this JSON schema:"

# Server-supplied error text is echoed into exception messages for diagnosis;
# bounded so a verbose HTML error page cannot flood logs or the UI.
_MAX_SERVER_MESSAGE = 200

_FENCED_BLOCK = re.compile(r"```[ \t]*(?:json|JSON)?[ \t]*\n?(.*?)```", re.DOTALL)


@dataclass(frozen=True)
class Generation:
    """One model answer.

    ``data`` is set exactly when the request carried a ``json_schema``; it is
    then guaranteed to be a dict or list that validates against that schema.
    Token counts come from the provider's usage fields (0 when a compatible
    server does not report them).
    """

    text: str
    data: dict[str, Any] | list[Any] | None
    input_tokens: int
    output_tokens: int
    provider: str
    model: str


class LLMUnavailable(Exception):
    """No answer could be obtained: timeout, transport error, 5xx/429 after the one
    retry, a rejected request (4xx) or a missing key.

    ``retryable`` is True for transient causes (timeouts, connection errors,
    5xx, 429), so a task can decide to try again later; False for permanent
    ones (missing or rejected key, bad model name, malformed request) that
    need a person to fix configuration.
    """

    def __init__(self, message: str, *, retryable: bool = False) -> None:
        super().__init__(message)
        self.retryable = retryable


class LLMInvalidOutput(Exception):
    """The answer did not parse as JSON or did not validate against the json_schema.
    Callers treat it as no answer."""


class LLMProvider(Protocol):
    """A configured model behind one provider's API.

    Implementations are safe to share between threads and hold the API key in
    memory only; keys are never logged or put into exception messages.
    """

    name: str
    model: str

    def generate(
        self,
        prompt: str,
        *,
        json_schema: dict[str, Any] | None = None,
        system: str | None = None,
        max_output_tokens: int = 1024,
        temperature: float = 0.0,
    ) -> Generation:
        """Ask the model once (plus at most one retry on a transient failure).

        With ``json_schema`` (a JSON Schema whose top level is an object; for
        OpenAI strict mode every property must be listed in ``required`` and
        ``additionalProperties`` must be false) the returned ``data`` validates
        against it, or ``LLMInvalidOutput`` is raised. An invalid schema is a
        programming error and raises ``jsonschema.SchemaError`` before any
        request is sent.

        Raises ``LLMUnavailable`` when no answer could be obtained.
        """
        ...

    @property
    def label(self) -> str:
        """``"<provider>:<model>"``, shown to users as which extractor decided."""
        ...


def check_schema(json_schema: Mapping[str, Any] | None) -> None:
    """Raise ``jsonschema.SchemaError`` if ``json_schema`` is not a valid schema.

    Called before the request so a caller's bug costs no tokens and is not
    mistaken for a bad model answer.
    """
    if json_schema is not None:
        validator_for(json_schema).check_schema(json_schema)


def json_prompt(prompt: str, json_schema: Mapping[str, Any]) -> str:
    """The prompt with the JSON-only instruction and the schema appended."""
    return f"{prompt}\n\n{JSON_ONLY_INSTRUCTION}\n{json.dumps(json_schema)}"


def parse_json_text(text: str) -> Any:
    """Parse a model's JSON answer, tolerating a Markdown code fence around it.

    Raises ``LLMInvalidOutput`` if no JSON can be read.
    """
    candidate = text.strip()
    if not candidate.startswith(("{", "[")):
        # Models (and compatible servers that ignore response_format) often wrap
        # the JSON in ```json ... ``` and sometimes add a sentence around it.
        fenced = _FENCED_BLOCK.search(candidate)
        if fenced is not None:
            candidate = fenced.group(1).strip()
    try:
        return json.loads(candidate)
    except ValueError as exc:
        raise LLMInvalidOutput(f"the answer is not JSON: {exc}") from exc


def validate_data(data: Any, json_schema: Mapping[str, Any]) -> dict[str, Any] | list[Any]:
    """Return ``data`` if it is a dict or list valid against ``json_schema``.

    Raises ``LLMInvalidOutput`` otherwise. The schema itself must already have
    passed ``check_schema``.
    """
    if not isinstance(data, dict | list):
        raise LLMInvalidOutput(f"expected a JSON object or array, got {type(data).__name__}")
    error = best_match(validator_for(json_schema)(json_schema).iter_errors(data))
    if error is not None:
        where = "/".join(str(part) for part in error.absolute_path) or "(root)"
        raise LLMInvalidOutput(f"the answer does not match the schema at {where}: {error.message}")
    return data


def parse_and_validate(text: str, json_schema: Mapping[str, Any]) -> dict[str, Any] | list[Any]:
    """``parse_json_text`` then ``validate_data``; raises ``LLMInvalidOutput``."""
    return validate_data(parse_json_text(text), json_schema)


def server_message(body: object) -> str:
    """A short human-readable error message out of an API error body, or ""."""
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict):
            message = inner.get("message")
            if isinstance(message, str):
                return message[:_MAX_SERVER_MESSAGE]
        if isinstance(inner, str):
            return inner[:_MAX_SERVER_MESSAGE]
    return ""


def status_failure(provider: str, status: int, body: object) -> LLMUnavailable:
    """Map an HTTP error status to ``LLMUnavailable`` with a message a person can act on.

    429 and 5xx are retryable; every other status is permanent. The server's
    own text is included except for 401/403, whose bodies can echo a masked key.
    """
    if status == 401:
        return LLMUnavailable(f"{provider} rejected the API key (HTTP 401); check the configured key")
    if status == 403:
        return LLMUnavailable(f"{provider} refused access (HTTP 403); check the key's permissions")
    retryable = status == 429 or status >= 500
    detail = server_message(body)
    suffix = f": {detail}" if detail else ""
    return LLMUnavailable(f"{provider} answered HTTP {status}{suffix}", retryable=retryable)


def call_with_one_retry(attempt: Callable[[], T], *, label: str, backoff_seconds: float) -> T:
    """Run ``attempt``; if it raises a retryable ``LLMUnavailable``, wait
    ``backoff_seconds`` and run it exactly once more.

    ``attempt`` must translate every SDK failure into ``LLMUnavailable``. The
    SDKs' own retries are switched off by the providers, so this is the only
    retry and a call costs at most two requests.
    """
    try:
        return attempt()
    except LLMUnavailable as exc:
        if not exc.retryable:
            raise
        logger.info("LLM call to %s failed transiently (%s); retrying once", label, exc)
    time.sleep(backoff_seconds)
    return attempt()

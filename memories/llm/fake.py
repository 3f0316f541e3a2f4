"""A scripted stand-in for a real provider, for tests of the code that calls LLMs.

It applies the same output contract as the real providers (fenced-JSON
tolerance, schema validation, ``LLMInvalidOutput``), so a test that scripts a
bad answer exercises the caller's real failure path.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Iterable
from typing import Any, Self

from memories.llm.base import (
    Generation,
    check_schema,
    parse_and_validate,
    validate_data,
)


class ScriptedCall(str):
    """One recorded ``generate`` call.

    It is the prompt itself (a ``str``), so ``llm.calls == ["..."]`` and
    ``"needle" in llm.calls[0]`` read naturally, with the other arguments
    available as attributes.
    """

    system: str | None
    json_schema: dict[str, Any] | None
    max_output_tokens: int
    temperature: float

    def __new__(
        cls,
        prompt: str,
        *,
        system: str | None,
        json_schema: dict[str, Any] | None,
        max_output_tokens: int,
        temperature: float,
    ) -> Self:
        call = super().__new__(cls, prompt)
        call.system = system
        call.json_schema = json_schema
        call.max_output_tokens = max_output_tokens
        call.temperature = temperature
        return call

    @property
    def prompt(self) -> str:
        return str(self)


class ScriptedLLM:
    """Answers ``generate`` calls with scripted responses, in order.

    Each response is consumed by one call:

    - ``str``: the raw answer text. With a ``json_schema`` it is parsed and
      validated like a real provider's answer (so invalid JSON raises
      ``LLMInvalidOutput``).
    - ``dict``: serialised to JSON as the text; with a ``json_schema`` it is
      validated and returned as ``data``.
    - an exception instance (e.g. ``LLMUnavailable("down")``): raised.

    Calling more often than scripted fails the test with ``AssertionError``.
    Token counts are whitespace word counts, so they are deterministic and
    non-zero. Not thread-safe; meant for single-threaded tests.
    """

    def __init__(
        self,
        responses: Iterable[str | dict[str, Any] | Exception],
        name: str = "fake",
        model: str = "scripted",
    ) -> None:
        self.name = name
        self.model = model
        self._responses: deque[str | dict[str, Any] | Exception] = deque(responses)
        self.calls: list[ScriptedCall] = []

    @property
    def label(self) -> str:
        return f"{self.name}:{self.model}"

    @property
    def remaining(self) -> int:
        """How many scripted responses have not been used yet."""
        return len(self._responses)

    def generate(
        self,
        prompt: str,
        *,
        json_schema: dict[str, Any] | None = None,
        system: str | None = None,
        max_output_tokens: int = 1024,
        temperature: float = 0.0,
    ) -> Generation:
        """See ``LLMProvider.generate``; answers come from the script."""
        check_schema(json_schema)
        self.calls.append(
            ScriptedCall(
                prompt,
                system=system,
                json_schema=json_schema,
                max_output_tokens=max_output_tokens,
                temperature=temperature,
            )
        )
        if not self._responses:
            raise AssertionError(f"ScriptedLLM got call {len(self.calls)} but only had {len(self.calls) - 1} responses")
        response = self._responses.popleft()
        if isinstance(response, Exception):
            raise response

        data: dict[str, Any] | list[Any] | None = None
        if isinstance(response, dict):
            text = json.dumps(response)
            if json_schema is not None:
                data = validate_data(response, json_schema)
        else:
            text = response
            if json_schema is not None:
                data = parse_and_validate(text, json_schema)
        return Generation(
            text=text,
            data=data,
            input_tokens=len(f"{system or ''} {prompt}".split()),
            output_tokens=len(text.split()),
            provider=self.name,
            model=self.model,
        )

"""The OpenAI, Anthropic and Gemini SDKs run against the shared loopback stub (fixture ``stub_server``).

Tests route answers in each API's documented shape (``fixtures/*.json``) and assert on what the
stub received.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture(autouse=True)
def _sdk_environment_out_of_the_way(monkeypatch: pytest.MonkeyPatch) -> None:
    """SDK environment defaults must not redirect the clients away from the stub."""
    for name in ("GOOGLE_GENAI_USE_VERTEXAI", "GOOGLE_GENAI_USE_ENTERPRISE", "OPENAI_CUSTOM_HEADERS"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def payload() -> Callable[[str], Any]:
    """Load ``fixtures/<name>.json``, a response in the provider's documented shape."""

    def load(name: str) -> Any:
        return json.loads((FIXTURES / f"{name}.json").read_text())

    return load

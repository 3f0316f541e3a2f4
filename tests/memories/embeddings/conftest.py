"""The provider SDKs run against the shared loopback stub (fixture ``stub_server``).

Tests route answers in each provider's documented shape (``fixtures/*.json``) and then assert on
the requests the stub received.
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
    for name in (
        "OPENAI_BASE_URL",
        "GOOGLE_GENAI_USE_VERTEXAI",
        "GOOGLE_GENAI_USE_ENTERPRISE",
        "GOOGLE_GENAI_API_VERSION",
        "GOOGLE_GENAI_HTTP_CLIENT",
    ):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def payload() -> Callable[[str], Any]:
    """``fixtures/<name>.json``: a response body in the provider's documented shape."""

    def load(name: str) -> Any:
        return json.loads((FIXTURES / f"{name}.json").read_text())

    return load

"""build_llm and get_llm: provider selection from names and Django settings."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from support.stub_server import ANY_PATH, StubResponse, StubServer

from memories.llm.factory import build_llm, get_llm


def test_none_means_no_llm() -> None:
    assert build_llm("none") is None
    assert build_llm(" None ") is None


@pytest.mark.parametrize(
    ("name", "label"),
    [("openai", "openai:gpt-4o-mini"), ("Anthropic", "anthropic:claude-sonnet-5-5"), ("gemini", "gemini:gemini-2.5-flash")],
)
def test_each_provider_has_a_default_model(name: str, label: str) -> None:
    llm = build_llm(name, api_key="k")

    assert llm is not None
    assert llm.label == label


def test_an_empty_model_setting_means_the_default() -> None:
    llm = build_llm("openai", model="", api_key="k")

    assert llm is not None
    assert llm.model == "gpt-4o-mini"


def test_an_unknown_provider_is_a_configuration_error() -> None:
    with pytest.raises(ValueError, match="unknown LLM provider 'gpt'"):
        build_llm("gpt")


@pytest.fixture
def llm_settings(monkeypatch: pytest.MonkeyPatch) -> Callable[..., None]:
    """Set Django settings for one test; works with or without pytest-django."""
    from django.conf import settings

    if not settings.configured:
        settings.configure()

    def apply(**values: Any) -> None:
        for name, value in values.items():
            monkeypatch.setattr(settings, name, value, raising=False)

    return apply


def test_get_llm_is_none_by_default_setting(llm_settings: Callable[..., None]) -> None:
    llm_settings(CORTEX_LLM="none")

    assert get_llm() is None


def test_get_llm_builds_the_configured_provider_once_and_rebuilds_on_change(
    llm_settings: Callable[..., None], stub_server: StubServer, payload: Callable[[str], Any]
) -> None:
    llm_settings(
        CORTEX_LLM="anthropic",
        CORTEX_LLM_MODEL="claude-haiku-4-5",
        CORTEX_LLM_TIMEOUT=5.0,
        ANTHROPIC_API_KEY="sk-ant-from-settings",
        ANTHROPIC_BASE_URL=stub_server.url,
    )

    llm = get_llm()

    assert llm is not None
    assert llm.label == "anthropic:claude-haiku-4-5"
    assert get_llm() is llm

    stub_server.route(
        "POST",
        ANY_PATH,
        StubResponse(json=payload("anthropic_message_text")),
    )
    llm.generate("What did we decide?")
    [request] = stub_server.received
    assert request.headers["authorization"] == "Bearer sk-ant-from-settings"

    llm_settings(CORTEX_LLM_MODEL="claude-opus-4-7")
    rebuilt = get_llm()
    assert rebuilt is not llm
    assert rebuilt is not None
    assert rebuilt.label == "anthropic:claude-opus-4-7"

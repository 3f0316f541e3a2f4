"""Choosing the configured provider (bring-your-own-key).

``CORTEX_LLM`` names the provider; ``"none"`` (the default) means Cortex runs
without an LLM and every LLM-assisted feature falls back to its rule-based path.
"""

from __future__ import annotations

import threading
from typing import Any

from django.conf import settings

from memories.llm.base import LLMProvider

PROVIDER_NAMES = ("none", "openai", "anthropic", "gemini")

# Which settings hold each provider's key and base URL.
_KEY_SETTINGS = {
    "openai": "OPENAI_API_KEY",
    "anthropic": "ANTHROPIC_API_KEY",
    "gemini": "GEMINI_API_KEY",
}
_BASE_URL_SETTINGS = {
    "openai": "OPENAI_BASE_URL",
    "anthropic": "ANTHROPIC_BASE_URL",
    "gemini": "GEMINI_BASE_URL",
}

_cache_lock = threading.Lock()
_cached: tuple[tuple[Any, ...], LLMProvider | None] | None = None


def build_llm(
    name: str,
    *,
    model: str | None = None,
    api_key: str | None = None,
    base_url: str | None = None,
    timeout: float = 30.0,
    retry_backoff: float = 1.0,
) -> LLMProvider | None:
    """Build the provider called ``name`` (case-insensitive), or None for ``"none"``.

    ``model`` None or "" picks the provider's default model. A missing
    ``api_key`` does not fail here: the provider raises ``LLMUnavailable`` on
    each call, which callers already handle as "no LLM answer". An unknown
    ``name`` is a configuration error and raises ``ValueError``.
    ``retry_backoff`` is the pause before the single retry (tests shorten it).
    """
    normalized = name.strip().lower()
    if normalized == "none":
        return None
    options: dict[str, Any] = {
        "api_key": api_key or None,
        "model": model or None,
        "base_url": base_url or None,
        "timeout": timeout,
        "retry_backoff": retry_backoff,
    }
    # The SDKs are imported only for the provider in use: together they add
    # seconds to every process start, and most deployments use one or none.
    if normalized == "openai":
        from memories.llm.openai_compat import OpenAICompatProvider

        return OpenAICompatProvider(**options)
    if normalized == "anthropic":
        from memories.llm.anthropic_provider import AnthropicProvider

        return AnthropicProvider(**options)
    if normalized == "gemini":
        from memories.llm.gemini_provider import GeminiProvider

        return GeminiProvider(**options)
    raise ValueError(f"unknown LLM provider {name!r}; expected one of {', '.join(PROVIDER_NAMES)}")


def get_llm() -> LLMProvider | None:
    """The provider configured in Django settings, or None when ``CORTEX_LLM`` is "none".

    Settings are read on every call (cheap, and never at import) but the provider, with its HTTP
    connection pool, is built once per process and rebuilt only when the
    relevant settings change, so ``override_settings`` in tests takes effect.
    """
    name = str(getattr(settings, "CORTEX_LLM", "none") or "none").strip().lower()
    key = (
        name,
        getattr(settings, "CORTEX_LLM_MODEL", None),
        float(getattr(settings, "CORTEX_LLM_TIMEOUT", 30.0) or 30.0),
        getattr(settings, _KEY_SETTINGS[name], None) if name in _KEY_SETTINGS else None,
        getattr(settings, _BASE_URL_SETTINGS[name], None) if name in _BASE_URL_SETTINGS else None,
    )
    global _cached
    with _cache_lock:
        if _cached is None or _cached[0] != key:
            _name, model, timeout, api_key, base_url = key
            _cached = (
                key,
                build_llm(
                    _name,
                    model=model,
                    api_key=api_key,
                    base_url=base_url,
                    timeout=timeout,
                ),
            )
        return _cached[1]

"""Choosing the embedder: ``build_embedder`` for explicit arguments, ``get_embedder`` from settings."""

from __future__ import annotations

import functools

from memories.embeddings.base import Embedder

PROVIDERS = ("local", "openai", "gemini", "hash")


def build_embedder(
    name: str,
    *,
    model: str | None = None,
    api_key: str | None = None,
    base_url: str | None = None,
    dim: int | None = None,
    timeout: float = 30.0,
) -> Embedder:
    """A new embedder of provider ``name``.

    Raises ValueError for an unknown provider or an option the provider cannot
    honour (the local model has one fixed model and size). Never contacts a
    provider and never loads a model: those happen on the first ``embed``,
    which is also where a missing key is reported. Provider modules are
    imported here, so their SDKs load only when chosen.
    """
    if name == "local":
        from memories.embeddings.local import DIM, MODEL_NAME, LocalEmbedder

        if model not in (None, MODEL_NAME):
            raise ValueError(f"the local embedder only runs {MODEL_NAME!r}, not {model!r}")
        if dim not in (None, DIM):
            raise ValueError(f"the local embedder produces {DIM} dimensions, not {dim}")
        return LocalEmbedder()
    if name == "hash":
        from memories.embeddings.hashing import DEFAULT_DIM, MODEL_NAME, HashEmbedder

        if model not in (None, MODEL_NAME):
            raise ValueError(f"the hash embedder has one model, {MODEL_NAME!r}, not {model!r}")
        return HashEmbedder(dim=DEFAULT_DIM if dim is None else dim)
    if name == "openai":
        from memories.embeddings.openai_compat import OpenAIEmbedder

        return OpenAIEmbedder(model=model, api_key=api_key, base_url=base_url, dim=dim, timeout=timeout)
    if name == "gemini":
        from memories.embeddings.gemini import GeminiEmbedder

        return GeminiEmbedder(model=model, api_key=api_key, base_url=base_url, dim=dim, timeout=timeout)
    raise ValueError(f"unknown embedder {name!r}; expected one of {', '.join(PROVIDERS)}")


@functools.cache
def get_embedder() -> Embedder:
    """The process-wide embedder configured in Django settings (built once, then cached).

    Reads ``CORTEX_EMBEDDER`` (default ``"local"``), ``CORTEX_EMBED_MODEL``,
    ``CORTEX_EMBED_DIM`` and the chosen provider's key (``OPENAI_API_KEY`` or
    ``GEMINI_API_KEY``) and, for ``openai``, ``OPENAI_BASE_URL``. Tests that
    change these settings call ``get_embedder.cache_clear()``.
    """
    # Imported here so that this package imports without configured settings.
    from django.conf import settings

    name = getattr(settings, "CORTEX_EMBEDDER", "local") or "local"
    api_key: str | None = None
    base_url: str | None = None
    if name == "openai":
        api_key = getattr(settings, "OPENAI_API_KEY", None)
        base_url = getattr(settings, "OPENAI_BASE_URL", None)
    elif name == "gemini":
        api_key = getattr(settings, "GEMINI_API_KEY", None)
    raw_dim = getattr(settings, "CORTEX_EMBED_DIM", None)
    return build_embedder(
        name,
        model=getattr(settings, "CORTEX_EMBED_MODEL", None) or None,
        api_key=api_key or None,
        base_url=base_url or None,
        dim=None if raw_dim in (None, "") else int(raw_dim),
        timeout=30.0,
    )

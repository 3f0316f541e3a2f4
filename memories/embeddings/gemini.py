"""Embeddings from the Gemini Developer API, via the official google-genai SDK.

The SDK sends a list of contents as one ``models/{model}:batchEmbedContents``
request. gemini-embedding-001 returns unnormalised vectors below its native
3072 dimensions, so rows are always normalised here.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from memories.embeddings.base import (
    EmbeddingFailed,
    EmbeddingUnavailable,
    Matrix,
    as_text_list,
    batched,
    empty_matrix,
    l2_normalise,
)

if TYPE_CHECKING:
    from google import genai
    from google.genai import errors as genai_errors

DEFAULT_MODEL = "gemini-embedding-001"
DEFAULT_DIM = 768
# batchEmbedContents takes at most 100 requests.
BATCH_SIZE = 100
# Two attempts in all, like the OpenAI provider; a short backoff because the
# caller's task owns longer waits.
_RETRY_ATTEMPTS = 2
_RETRY_INITIAL_DELAY = 0.5
_RETRY_JITTER = 0.25
_TRANSIENT_STATUSES = frozenset({408, 429, 500, 502, 503, 504})
_AUTH_STATUSES = frozenset({401, 403})


def _transport_errors() -> tuple[type[Exception], ...]:
    """Connection and timeout errors of whichever httpx flavour the SDK runs on.

    The SDK picks httpx or httpx2 at run time and lets their errors through
    unwrapped, so both are caught when installed.
    """
    found: list[type[Exception]] = []
    try:
        import httpx

        found.append(httpx.TransportError)
    except ImportError:
        pass
    try:
        import httpx2

        found.append(httpx2.TransportError)
    except ImportError:
        pass
    return tuple(found)


class GeminiEmbedder:
    """Gemini embeddings with ``output_dimensionality=dim``; rows normalised locally.

    A missing key is reported at embed time, so the app starts without one.
    """

    name = "gemini"

    def __init__(
        self,
        *,
        model: str | None = None,
        api_key: str | None = None,
        base_url: str | None = None,
        dim: int | None = None,
        timeout: float = 30.0,
    ) -> None:
        self.model = model or DEFAULT_MODEL
        self.dim = DEFAULT_DIM if dim is None else dim
        if self.dim < 1:
            raise ValueError(f"embedding dim must be positive, got {self.dim}")
        self._api_key = api_key or None
        self._base_url = base_url or None
        self._timeout = timeout
        self._client: genai.Client | None = None
        self._client_lock = threading.Lock()

    def __repr__(self) -> str:
        # Never show the key, even in a traceback's locals.
        return f"GeminiEmbedder(model={self.model!r}, dim={self.dim}, base_url={self._base_url!r})"

    def _get_client(self) -> genai.Client:
        if self._api_key is None:
            raise EmbeddingUnavailable("GEMINI_API_KEY is not set")
        with self._client_lock:
            if self._client is None:
                from google import genai
                from google.genai import types

                self._client = genai.Client(
                    # Explicit, so GOOGLE_GENAI_USE_VERTEXAI in the environment cannot
                    # silently switch the backend and its request shape.
                    vertexai=False,
                    api_key=self._api_key,
                    http_options=types.HttpOptions(
                        base_url=self._base_url,
                        timeout=max(1, round(self._timeout * 1000)),  # milliseconds
                        retry_options=types.HttpRetryOptions(
                            attempts=_RETRY_ATTEMPTS,
                            initial_delay=_RETRY_INITIAL_DELAY,
                            jitter=_RETRY_JITTER,
                            http_status_codes=sorted(_TRANSIENT_STATUSES),
                        ),
                    ),
                )
            return self._client

    def embed(self, texts: Sequence[str]) -> Matrix:
        """Unit vectors of shape ``(len(texts), dim)`` in input order.

        Raises EmbeddingUnavailable for transient failures and a rejected or
        missing key, EmbeddingFailed for a refused request or a malformed answer.
        """
        items = as_text_list(texts)
        if not items:
            return empty_matrix(self.dim)
        client = self._get_client()
        rows = [self._embed_batch(client, batch) for batch in batched(items, BATCH_SIZE)]
        return l2_normalise(np.concatenate(rows))

    def _embed_batch(self, client: genai.Client, batch: Sequence[str]) -> Matrix:
        from google.genai import errors, types

        try:
            response = client.models.embed_content(
                model=self.model,
                contents=list(batch),
                config=types.EmbedContentConfig(output_dimensionality=self.dim),
            )
        except errors.APIError as exc:
            raise _map_api_error(exc) from exc
        except _transport_errors() as exc:
            raise EmbeddingUnavailable(f"embedding endpoint unreachable: {type(exc).__name__}") from exc

        embeddings = response.embeddings or []
        if len(embeddings) != len(batch):
            raise EmbeddingFailed(f"expected {len(batch)} embeddings, got {len(embeddings)}")
        vectors = [np.asarray(item.values or [], dtype=np.float32) for item in embeddings]
        sizes = sorted({vector.shape[0] for vector in vectors})
        if sizes != [self.dim]:
            raise EmbeddingFailed(f"expected embeddings of dimension {self.dim}, got {sizes}")
        return np.stack(vectors)


def _map_api_error(exc: genai_errors.APIError) -> Exception:
    """EmbeddingUnavailable or EmbeddingFailed for an SDK APIError."""
    code = exc.code
    if code in _AUTH_STATUSES or _is_invalid_key(exc):
        return EmbeddingUnavailable(f"the embedding endpoint rejected the API key (HTTP {code}); check GEMINI_API_KEY")
    if code in _TRANSIENT_STATUSES:
        return EmbeddingUnavailable(f"embedding endpoint unavailable (HTTP {code} {exc.status})")
    return EmbeddingFailed(f"embedding request refused (HTTP {code} {exc.status}): {exc.message}")


def _is_invalid_key(exc: genai_errors.APIError) -> bool:
    # The Gemini API answers a bad key with 400 INVALID_ARGUMENT, reason API_KEY_INVALID.
    return "API_KEY_INVALID" in str(exc.details)

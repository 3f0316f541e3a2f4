"""Embeddings from any OpenAI-compatible ``/embeddings`` endpoint, via the official SDK.

Named ``openai_compat`` so that ``import openai`` inside this package still
means the SDK.
"""

from __future__ import annotations

import base64
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
    import openai

DEFAULT_MODEL = "text-embedding-3-small"
# Native sizes of OpenAI's own models; any other model needs an explicit dim.
KNOWN_DIMS = {
    "text-embedding-3-small": 1536,
    "text-embedding-3-large": 3072,
    "text-embedding-ada-002": 1536,
}
# OpenAI accepts 2048 inputs per request, but also caps the tokens summed over
# a request; 256 keeps long memories well inside that and bounds a retry's cost.
BATCH_SIZE = 256
# The SDK retries once (connection errors, timeouts, 408/409/429/5xx); more
# retries belong to the caller's task, which can back off for longer.
MAX_RETRIES = 1
# Besides 429 and 5xx, the SDK itself treats these as transient.
_TRANSIENT_STATUSES = frozenset({408, 409})


class OpenAIEmbedder:
    """OpenAI-compatible embeddings; rows re-normalised locally.

    ``dim`` defaults to the model's native size for OpenAI's own models and
    is then not sent; when given it is sent as ``dimensions=``. A missing key
    is reported at embed time, so the app starts without one.
    """

    name = "openai"

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
        if dim is None:
            if self.model not in KNOWN_DIMS:
                raise ValueError(f"the dimension of embedding model {self.model!r} is unknown; set CORTEX_EMBED_DIM")
            self.dim = KNOWN_DIMS[self.model]
        else:
            if dim < 1:
                raise ValueError(f"embedding dim must be positive, got {dim}")
            self.dim = dim
        self._send_dimensions = dim is not None
        self._api_key = api_key or None
        self._base_url = base_url or None
        self._timeout = timeout
        self._client: openai.OpenAI | None = None
        self._client_lock = threading.Lock()

    def __repr__(self) -> str:
        # Never show the key, even in a traceback's locals.
        return f"OpenAIEmbedder(model={self.model!r}, dim={self.dim}, base_url={self._base_url!r})"

    def _get_client(self) -> openai.OpenAI:
        if self._api_key is None:
            raise EmbeddingUnavailable("OPENAI_API_KEY is not set")
        with self._client_lock:
            if self._client is None:
                import openai

                self._client = openai.OpenAI(
                    api_key=self._api_key,
                    base_url=self._base_url,
                    timeout=self._timeout,
                    max_retries=MAX_RETRIES,
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

    def _embed_batch(self, client: openai.OpenAI, batch: Sequence[str]) -> Matrix:
        import openai

        try:
            response = client.embeddings.create(
                model=self.model,
                input=list(batch),
                dimensions=self.dim if self._send_dimensions else openai.omit,
                # The API's own default; some compatible servers reject base64.
                encoding_format="float",
            )
        except (openai.AuthenticationError, openai.PermissionDeniedError) as exc:
            raise EmbeddingUnavailable(
                f"the embedding endpoint rejected the API key (HTTP {exc.status_code}); check OPENAI_API_KEY"
            ) from exc
        except (openai.RateLimitError, openai.InternalServerError) as exc:
            raise EmbeddingUnavailable(f"embedding endpoint unavailable (HTTP {exc.status_code})") from exc
        except openai.APIConnectionError as exc:
            # Includes APITimeoutError.
            raise EmbeddingUnavailable(f"embedding endpoint unreachable: {exc}") from exc
        except openai.APIStatusError as exc:
            if exc.status_code in _TRANSIENT_STATUSES:
                raise EmbeddingUnavailable(f"embedding endpoint unavailable (HTTP {exc.status_code})") from exc
            raise EmbeddingFailed(f"embedding request refused (HTTP {exc.status_code}): {exc.message}") from exc

        data = sorted(response.data, key=lambda item: item.index)
        if [item.index for item in data] != list(range(len(batch))):
            raise EmbeddingFailed(f"expected {len(batch)} embeddings, got indexes {[item.index for item in data]}")
        vectors = [_as_floats(item.embedding) for item in data]
        sizes = sorted({vector.shape[0] for vector in vectors})
        if sizes != [self.dim]:
            raise EmbeddingFailed(f"expected embeddings of dimension {self.dim}, got {sizes}")
        return np.stack(vectors)


def _as_floats(embedding: object) -> np.ndarray:
    # A server that ignores encoding_format may still answer in base64.
    if isinstance(embedding, str):
        return np.frombuffer(base64.b64decode(embedding), dtype="<f4").astype(np.float32)
    return np.asarray(embedding, dtype=np.float32).reshape(-1)

"""Embedding on behalf of the store: the signature guard and the error mapping.

Every vector Cortex stores or compares comes through `embed_for_store`, which refuses to mix
models: the store's EmbeddingSignature (recorded on first use) must match the configured
embedder, or writes and recall stop with a message naming both.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

from cortex_site.errors import ServiceUnavailable
from memories.embeddings.base import Embedder, EmbeddingFailed, EmbeddingUnavailable, Matrix
from memories.embeddings.factory import get_embedder
from memories.models import EmbeddingSignature


class EmbeddingModelMismatch(ServiceUnavailable):
    error_code = "EMBEDDING_MODEL_MISMATCH"


def signature_of(embedder: Embedder) -> tuple[str, str, int]:
    return (embedder.name, embedder.model, embedder.dim)


def check_signature(embedder: Embedder, *, record_if_missing: bool) -> bool:
    """Raise EmbeddingModelMismatch when the store was filled by another model; True when a signature exists.

    An empty store takes the embedder's signature on its first write (`record_if_missing`).
    """
    stored = EmbeddingSignature.objects.order_by("pk").first()
    if stored is None:
        if record_if_missing:
            EmbeddingSignature.objects.create(provider=embedder.name, model=embedder.model, dim=embedder.dim)
            return True
        return False
    if (stored.provider, stored.model, stored.dim) != signature_of(embedder):
        raise EmbeddingModelMismatch(
            f"The store holds vectors from {stored.provider}:{stored.model} ({stored.dim} dimensions) but Cortex is "
            f"configured with {embedder.name}:{embedder.model} ({embedder.dim} dimensions). Configure the original "
            "model again, or run `python manage.py cortex reembed` to move every memory to the new one.",
            details={
                "store": {"provider": stored.provider, "model": stored.model, "dim": stored.dim},
                "configured": {"provider": embedder.name, "model": embedder.model, "dim": embedder.dim},
            },
        )
    return True


def embed_for_store(texts: Sequence[str], *, for_write: bool) -> Matrix:
    """Embed texts with the configured model after checking the store's signature.

    Raises ServiceUnavailable(EMBEDDING_UNAVAILABLE) when the provider cannot embed now; the
    caller has stored nothing yet, so a retry is safe.
    """
    embedder = get_embedder()
    signed = check_signature(embedder, record_if_missing=False)
    vectors = _embed(embedder, list(texts))
    if for_write and not signed:
        # An empty store takes the signature of the first vectors it is about to hold.
        check_signature(embedder, record_if_missing=True)
    return vectors


# Providers that compute in this process: their time is bounded by the text, not by a network
# timeout, so a writer may hold its transaction open while they run.
IN_PROCESS_PROVIDERS = frozenset({"local", "hash"})


class BackgroundEmbedding:
    """`embed_for_store(texts, for_write=True)` running on a worker thread while the caller writes.

    The signature is checked at construction, on the caller's thread (it reads the database, and
    Django connections belong to their thread); the worker only runs the model, which releases the
    GIL in onnxruntime (and waits on the network for hosted providers). `result()` waits for the
    vectors and raises what `embed_for_store` would (ServiceUnavailable); a caller that gives up
    before asking leaves the thread to finish on its own, with nothing stored. `in_process` says
    whether the model runs here (see IN_PROCESS_PROVIDERS) rather than behind a network call.
    """

    def __init__(self, texts: Sequence[str]) -> None:
        self._embedder = get_embedder()
        self._signed = check_signature(self._embedder, record_if_missing=False)
        self.in_process = self._embedder.name in IN_PROCESS_PROVIDERS
        pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="cortex-embed")
        self._future = pool.submit(_embed, self._embedder, list(texts))
        pool.shutdown(wait=False)  # the one job still runs; the thread exits after it

    def result(self) -> Matrix:
        vectors = self._future.result()
        if not self._signed:
            check_signature(self._embedder, record_if_missing=True)
            self._signed = True
        return vectors


def _embed(embedder: Embedder, texts: list[str]) -> Matrix:
    """The provider's vectors, its failures as the store's errors."""
    try:
        return embedder.embed(texts)
    except EmbeddingUnavailable as exc:
        raise ServiceUnavailable(
            f"The embedding provider is unavailable ({exc}). Nothing was stored; retry shortly.",
            error_code="EMBEDDING_UNAVAILABLE",
        ) from exc
    except EmbeddingFailed as exc:
        raise ServiceUnavailable(
            f"The embedding provider refused the request ({exc}). Nothing was stored.",
            error_code="EMBEDDING_FAILED",
        ) from exc

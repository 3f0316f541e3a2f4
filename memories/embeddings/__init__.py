"""Embedding providers: text in, unit float32 vectors out.

``get_embedder()`` is the process-wide embedder chosen in settings;
``build_embedder()`` builds one explicitly. Importing this package loads no
model and no provider SDK.
"""

from memories.embeddings.base import Embedder, EmbeddingFailed, EmbeddingUnavailable
from memories.embeddings.factory import build_embedder, get_embedder

__all__ = ["Embedder", "EmbeddingFailed", "EmbeddingUnavailable", "build_embedder", "get_embedder"]

"""Recall through the real local embedding model (all-MiniLM-L6-v2, int8 ONNX from PyPI), end to end."""

from __future__ import annotations

from typing import Any

import pytest

from memories.models import EmbeddingSignature


@pytest.mark.django_db
def test_paraphrase_is_recalled_with_the_local_model(acme: dict[str, Any], api: Any, use_embedder: Any) -> None:
    use_embedder("local")
    client = api(acme["employee"])
    notes = {
        "laptop": ("Hardware procurement", "New laptops are ordered through the IT service desk; allow five business days."),
        "expenses": ("Travel expenses", "Hotel stays above $250 per night need a manager's approval before booking."),
        "deploys": ("Release train", "Production deploys go out every Tuesday after the change advisory review."),
    }
    ids = {}
    for key, (title, content) in notes.items():
        response = client.post("/api/memories", {"title": title, "content": content})
        assert response.status_code == 201, response.content
        ids[key] = response.json()["id"]
    signature = EmbeddingSignature.objects.get()
    assert (signature.provider, signature.dim) == ("local", 384)

    def top(query: str) -> str:
        return client.post("/api/recall", {"query": query, "limit": 3}).json()["results"][0]["memory"]["id"]

    # Few shared words: the dense model must carry these.
    assert top("who do I ask to get a new computer") == ids["laptop"]
    assert top("can I book an expensive hotel on a business trip") == ids["expenses"]
    assert top("when do releases ship to prod") == ids["deploys"]

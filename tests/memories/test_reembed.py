"""cortex reembed: moving the store to another embedder (and dimension), resumably, and auditably."""

from __future__ import annotations

import io
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from django.test import override_settings
from support import principal

from audit.models import AuditEvent
from memories.embeddings.base import EmbeddingUnavailable, Matrix
from memories.embeddings.factory import get_embedder
from memories.embeddings.hashing import MODEL_NAME, HashEmbedder
from memories.embeddings.store import EmbeddingModelMismatch
from memories.models import EmbeddingSignature, Membership, Memory, MemoryChunk, Organization
from memories.selectors.recall import RecallQuery, recall
from memories.services import reembed as reembed_service
from memories.services.memories import MemoryDraft, embedding_text, memory_create

pytestmark = pytest.mark.django_db

LONG_RUNBOOK = "\n\n".join(
    f"Step {i}: the Dock API failover runbook says to drain traffic from region {i}, check replication lag, "
    "and only then promote the standby database; page the SRE on-call if lag stays above thirty seconds." * 2
    for i in range(1, 9)
)


@pytest.fixture(autouse=True)
def _configured_embedder() -> Iterator[None]:
    get_embedder.cache_clear()
    yield
    get_embedder.cache_clear()


def run(*args: str) -> str:
    out = io.StringIO()
    call_command("cortex", "reembed", *args, "--no-progress", stdout=out, stderr=io.StringIO())
    return out.getvalue()


def column_type() -> str:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT format_type(atttypid, atttypmod) FROM pg_attribute WHERE "
            "attrelid = 'memories_memorychunk'::regclass AND attname = 'embedding'"
        )
        return str(cursor.fetchone()[0])


def index_definition() -> str | None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT indexdef FROM pg_indexes WHERE indexname = 'chunk_embedding_hnsw'")
        row = cursor.fetchone()
    return row[0] if row else None


def stored_vectors() -> dict[int, tuple[str, str, np.ndarray | None]]:
    """chunk id → (memory title, chunk text, vector as stored)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT c.id, m.title, c.text, c.embedding::text FROM "
            "memories_memorychunk c JOIN memories_memory m ON m.id = c.memory_id"
        )
        rows = cursor.fetchall()
    return {r[0]: (r[1], r[2], np.array([float(x) for x in r[3].strip("[]").split(",")]) if r[3] else None) for r in rows}


def assert_vectors_are_the_pipelines(dim: int) -> None:
    embedder = get_embedder()
    rows = stored_vectors()
    assert rows
    for title, text, vector in rows.values():
        assert vector is not None and vector.shape == (dim,)
        expected = embedder.embed([embedding_text(title, text)])[0]
        assert np.allclose(vector, expected, atol=1e-6)


@pytest.fixture
def two_orgs(make_org: Callable[..., Organization], make_member: Callable[..., Membership]) -> dict[str, Membership]:
    acme, globex = make_org(), make_org()
    people = {"acme": make_member(acme, "Executive"), "globex": make_member(globex, "Employee")}
    memory_create(principal=principal(people["acme"]), draft=MemoryDraft(title="Dock API failover", content=LONG_RUNBOOK))
    memory_create(principal=principal(people["acme"]), draft=MemoryDraft(content="Laptops are refreshed every three years."))
    memory_create(principal=principal(people["globex"]), draft=MemoryDraft(content="Globex trucks are serviced every 20,000 km."))
    return people


def test_the_write_pipeline_and_reembed_embed_the_same_text(two_orgs: dict[str, Membership]) -> None:
    assert Memory.objects.get(title="Dock API failover").chunks.count() > 1
    assert_vectors_are_the_pipelines(384)

    out = run("--refresh", "--yes")

    assert "Re-embedded" in out
    assert_vectors_are_the_pipelines(384)


def test_reembed_drops_the_scopes_own_vector_indexes_for_the_next_sync_to_build(two_orgs: dict[str, Membership]) -> None:
    from memories.services.scope_indexes import index_name, scope_indexes

    scope_id = Memory.objects.get(title="Dock API failover").scope_id
    with connection.cursor() as cursor:  # as the sync builds it (not concurrently: this test runs in a transaction)
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")  # the rows' deferred checks first, as reembed does
        cursor.execute(
            f"CREATE INDEX {index_name(scope_id, 'vector')} ON memories_memorychunk USING hnsw (embedding vector_cosine_ops) "
            f"WHERE scope_id = {scope_id}"
        )
        cursor.execute(
            f"CREATE INDEX {index_name(scope_id, 'text')} ON memories_memorychunk USING gin (search_vector) "
            f"WHERE scope_id = {scope_id}"
        )
    assert scope_indexes() == {(scope_id, "vector"): True, (scope_id, "text"): True}

    run("--refresh", "--yes")

    # Every vector changed: an index of the old ones would only cost every write until the next sync rebuilds it.
    # The full-text one holds what did not change.
    assert scope_indexes() == {(scope_id, "text"): True}
    assert index_definition() is not None


def test_nothing_to_do_when_the_store_already_matches(two_orgs: dict[str, Membership]) -> None:
    out = run("--yes")

    assert "nothing to do" in out
    assert not AuditEvent.objects.filter(action__startswith="embedding.reembed").exists()


@override_settings(CORTEX_EMBED_DIM=256)
def test_before_reembed_writes_and_recall_refuse_naming_both_models(two_orgs: dict[str, Membership]) -> None:
    get_embedder.cache_clear()
    acme = principal(two_orgs["acme"])

    with pytest.raises(EmbeddingModelMismatch) as write:
        memory_create(principal=acme, draft=MemoryDraft(content="A new note."))
    with pytest.raises(EmbeddingModelMismatch) as read:
        recall(acme, RecallQuery("failover runbook"))

    for caught in (write, read):
        assert caught.value.error_code == "EMBEDDING_MODEL_MISMATCH"
        assert f"hash:{MODEL_NAME} (384 dimensions)" in caught.value.message
        assert f"hash:{MODEL_NAME} (256 dimensions)" in caught.value.message
        assert "cortex reembed" in caught.value.message


@override_settings(CORTEX_EMBED_DIM=256)
def test_reembed_to_another_dimension_moves_every_organization_and_recall_works_again(two_orgs: dict[str, Membership]) -> None:
    get_embedder.cache_clear()
    chunks = MemoryChunk.objects.count()

    out = run("--yes", "--batch-size", "2")

    assert "vector(384) to vector(256)" in out
    assert f"Re-embedded {chunks} chunks" in out
    assert column_type() == "vector(256)"
    signature = EmbeddingSignature.objects.get()
    assert (signature.provider, signature.model, signature.dim) == ("hash", MODEL_NAME, 256)
    definition = index_definition()
    assert definition is not None
    assert (
        "USING hnsw (embedding vector_cosine_ops)" in definition
        and "m='16'" in definition
        and "ef_construction='64'" in definition
    )
    assert_vectors_are_the_pipelines(256)
    hits = recall(principal(two_orgs["acme"]), RecallQuery("Dock API failover runbook standby database")).hits
    assert hits[0].memory.title == "Dock API failover"
    globex_hits = recall(principal(two_orgs["globex"]), RecallQuery("trucks serviced km")).hits
    assert [h.memory.content for h in globex_hits] == ["Globex trucks are serviced every 20,000 km."]
    stored = memory_create(principal=principal(two_orgs["acme"]), draft=MemoryDraft(content="Written after the switch."))
    assert stored.memory.chunks.get().embedding is not None
    start, finish = AuditEvent.objects.filter(organization__isnull=True, action__startswith="embedding.reembed").order_by("id")
    assert (start.action, finish.action) == ("embedding.reembed.start", "embedding.reembed.finish")
    assert start.actor_kind == AuditEvent.ActorKind.CLI
    assert start.details["from"] == ["hash", MODEL_NAME, 384] and start.details["to"] == ["hash", MODEL_NAME, 256]
    assert finish.details["embedded"] == chunks


class FlakyEmbedder:
    """The configured provider, failing (as a provider outage) after `healthy_calls` batches."""

    def __init__(self, dim: int, healthy_calls: int) -> None:
        self.inner = HashEmbedder(dim=dim)
        self.name, self.model, self.dim = self.inner.name, self.inner.model, dim
        self.calls = 0
        self.healthy_calls = healthy_calls

    def embed(self, texts: Sequence[str]) -> Matrix:
        self.calls += 1
        if self.calls > self.healthy_calls:
            raise EmbeddingUnavailable("connection reset by provider")
        return self.inner.embed(texts)


@override_settings(CORTEX_EMBED_DIM=256)
def test_an_interrupted_reembed_is_finished_by_running_it_again(
    two_orgs: dict[str, Membership], monkeypatch: pytest.MonkeyPatch
) -> None:
    get_embedder.cache_clear()
    chunks = MemoryChunk.objects.count()
    monkeypatch.setattr(reembed_service, "get_embedder", lambda: FlakyEmbedder(256, healthy_calls=1))

    with pytest.raises(CommandError) as caught:
        run("--yes", "--batch-size", "2")

    assert "run `cortex reembed` again" in str(caught.value)
    assert column_type() == "vector(256)"
    assert MemoryChunk.objects.filter(embedding__isnull=False).count() == 2
    assert index_definition() is None
    assert EmbeddingSignature.objects.get().dim == 384  # not switched: the new model is still refused
    with pytest.raises(EmbeddingModelMismatch):
        recall(principal(two_orgs["acme"]), RecallQuery("failover"))

    monkeypatch.undo()
    out = run("--yes", "--batch-size", "2")

    assert f"Resuming an unfinished re-embed: {chunks - 2} of {chunks} chunks" in out
    assert f"Re-embedded {chunks - 2} chunks" in out
    assert EmbeddingSignature.objects.get().dim == 256
    assert index_definition() is not None
    assert_vectors_are_the_pipelines(256)
    assert list(
        AuditEvent.objects.filter(organization__isnull=True, action__startswith="embedding.reembed").values_list(
            "action", flat=True
        )
    ) == ["embedding.reembed.start", "embedding.reembed.finish"]


class OldModel(HashEmbedder):
    """The model the store was filled with: same size, different vectors."""

    model = "hash-old"

    def embed(self, texts: Sequence[str]) -> Matrix:
        return -super().embed(texts)


def test_same_dimension_switch_also_catches_writes_made_meanwhile_by_processes_on_the_old_model(
    two_orgs: dict[str, Membership], monkeypatch: pytest.MonkeyPatch
) -> None:
    EmbeddingSignature.objects.update(model="hash-old")  # the store was filled by the old model
    monkeypatch.setattr(reembed_service, "get_embedder", lambda: FlakyEmbedder(384, healthy_calls=1))
    with pytest.raises(CommandError):
        run("--yes", "--batch-size", "2")
    assert column_type() == "vector(384)"
    # A web process that still runs the old model stores a memory in the middle of the switch.
    monkeypatch.setattr("memories.embeddings.store.get_embedder", lambda: OldModel())
    late = memory_create(principal=principal(two_orgs["globex"]), draft=MemoryDraft(content="Written by a stale process.")).memory
    monkeypatch.undo()

    run("--yes")

    assert EmbeddingSignature.objects.get().model == MODEL_NAME
    assert_vectors_are_the_pipelines(384)  # the stale write included
    assert late.chunks.get().embedding is not None


def test_without_yes_and_without_a_terminal_nothing_changes(two_orgs: dict[str, Membership]) -> None:
    with override_settings(CORTEX_EMBED_DIM=256):
        get_embedder.cache_clear()
        with pytest.raises(CommandError) as caught:
            call_command("cortex", "reembed", "--no-progress", stdout=io.StringIO())

    assert "add --yes" in str(caught.value)
    assert column_type() == "vector(384)"
    assert EmbeddingSignature.objects.get().dim == 384
    assert not MemoryChunk.objects.filter(embedding__isnull=True).exists()


def test_a_second_run_at_the_same_time_is_refused(two_orgs: dict[str, Membership], django_db_blocker: Any) -> None:
    from django.db import connections

    # Another session holds the run lock (as a concurrent `cortex reembed` would).
    other = connections.create_connection("default")
    try:
        with other.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_lock(%s)", [reembed_service._LOCK_KEY])
        with pytest.raises(CommandError) as caught:
            run("--yes", "--refresh")
        assert "Another `cortex reembed` is running" in str(caught.value)
    finally:
        other.close()

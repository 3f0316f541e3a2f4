"""Moving the store to the configured embedding model (`cortex reembed`).

The store never mixes vectors of two models (memories.embeddings.store refuses writes and
recall while the configured embedder differs from the recorded EmbeddingSignature). This
service is the way across:

1. **start** (one transaction): drop the HNSW index; when the dimension changes, `ALTER
   COLUMN embedding TYPE vector(N) USING NULL`, otherwise set every embedding to NULL; record
   the run marker — the audit event `embedding.reembed.start` (global chain) naming the
   target signature and the highest chunk id at that moment.
2. **batches**: chunks whose embedding IS NULL, in id order, `batch_size` at a time: embed
   exactly what the write pipeline embeds (`embedding_text(title, chunk)`) and store; each
   batch commits on its own.
3. **finish** (one transaction): under a SHARE lock on the chunk table (no write can slip in),
   re-embed chunks written after the start by processes still on the old model, rebuild the
   index exactly as MemoryChunk.Meta declares it, record the new signature, audit
   `embedding.reembed.finish`.

Resumable: a crash (or a provider outage) leaves the marker without its finish event and
NULLs for what is left; running again with the same configuration skips step 1 and carries
on from there. Only one run at a time (a session advisory lock).

While a run is in progress the old signature is still recorded, so processes on the new
model refuse writes and recall (EMBEDDING_MODEL_MISMATCH) until it finishes, and processes
still on the old model find no vectors for most chunks (lexical matches only).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from django.db import connection, transaction
from django.db.models import Count, Q

from audit.models import AuditEvent
from audit.services import Actor, record
from cortex_site.errors import Conflict, ServiceUnavailable
from memories.embeddings.base import Embedder, EmbeddingFailed, EmbeddingUnavailable
from memories.embeddings.factory import get_embedder
from memories.embeddings.store import signature_of
from memories.models import EmbeddingSignature, MemoryChunk
from memories.retrieval.sql import vector_literal
from memories.services.memories import embedding_text
from memories.services.scope_indexes import index_name as scope_index_name
from memories.services.scope_indexes import scope_indexes

INDEX_NAME = "chunk_embedding_hnsw"
TABLE = MemoryChunk._meta.db_table
DEFAULT_BATCH_SIZE = 256
_LOCK_KEY = 7302_0001  # session advisory lock: one reembed at a time
_MARKER_ACTIONS = ("embedding.reembed.start", "embedding.reembed.finish")

Signature = tuple[str, str, int]
Progress = Callable[[int], None]


def _label(signature: Signature | None) -> str:
    if signature is None:
        return "nothing recorded"
    provider, model, dim = signature
    return f"{provider}:{model} ({dim} dimensions)"


@dataclass(frozen=True)
class ReembedPlan:
    stored: Signature | None  # what the store records now
    target: Signature  # the configured embedder
    column_dim: int | None  # what the vector column holds now
    chunks: int  # every chunk of every organization
    pending: int  # chunks without a vector
    organizations: int
    index_present: bool
    resuming: bool  # an earlier run towards `target` did not finish

    @property
    def changes_model(self) -> bool:
        return self.stored != self.target

    @property
    def changes_dimension(self) -> bool:
        return self.column_dim != self.target[2]

    @property
    def needed(self) -> bool:
        return self.changes_model or self.changes_dimension or self.resuming or self.pending > 0 or not self.index_present

    def describe(self, *, refresh: bool = False) -> str:
        if not (self.needed or refresh):
            return f"The store already holds {_label(self.target)} vectors for all {self.chunks:,} chunks; nothing to do."
        lines = [f"Store: {_label(self.stored)}.", f"Configured: {_label(self.target)}."]
        if self.resuming:
            lines.append(f"Resuming an unfinished re-embed: {self.pending:,} of {self.chunks:,} chunks still to embed.")
        elif self.changes_model or refresh:
            lines.append(f"Every chunk ({self.chunks:,}, in {self.organizations:,} organizations) will be embedded again.")
        else:
            lines.append(f"{self.pending:,} chunks without a vector will be embedded.")
        if self.changes_dimension:
            lines.append(f"The vector column changes from vector({self.column_dim}) to vector({self.target[2]}).")
        lines.append(f"The HNSW index {INDEX_NAME} is {'rebuilt' if self.index_present else 'built'} at the end.")
        if self.changes_model:
            lines.append("Until it finishes, writes and recall with the new model are refused (EMBEDDING_MODEL_MISMATCH).")
        return "\n".join(lines)


@dataclass(frozen=True)
class ReembedReport:
    embedded: int
    seconds: float
    signature: Signature


def column_dimension() -> int | None:
    """The declared dimension of the chunk vector column (None for an unconstrained `vector`)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT format_type(atttypid, atttypmod) FROM pg_attribute WHERE attrelid = %s::regclass AND attname = 'embedding'",
            [TABLE],
        )
        declared = cursor.fetchone()[0]  # e.g. "vector(384)"
    return int(declared.split("(")[1].rstrip(")")) if "(" in declared else None


def _index_present() -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1 FROM pg_indexes WHERE tablename = %s AND indexname = %s", [TABLE, INDEX_NAME])
        return cursor.fetchone() is not None


def _open_marker(target: Signature) -> dict[str, Any] | None:
    """The start event of an unfinished run towards `target`, if the last run did not finish."""
    last = AuditEvent.objects.filter(organization__isnull=True, action__in=_MARKER_ACTIONS).order_by("-id").first()
    if last is None or last.action != "embedding.reembed.start":
        return None
    details = dict(last.details)
    return details if tuple(details.get("to") or ()) == target else None


def reembed_plan(embedder: Embedder | None = None) -> ReembedPlan:
    embedder = embedder or get_embedder()
    target = signature_of(embedder)
    stored = EmbeddingSignature.objects.order_by("pk").first()
    counts = MemoryChunk.objects.aggregate(
        chunks=Count("id"),
        pending=Count("id", filter=Q(embedding__isnull=True)),
        organizations=Count("organization", distinct=True),
    )
    chunks, pending, organizations = counts["chunks"], counts["pending"], counts["organizations"]
    return ReembedPlan(
        stored=(stored.provider, stored.model, stored.dim) if stored else None,
        target=target,
        column_dim=column_dimension(),
        chunks=chunks,
        pending=pending,
        organizations=organizations,
        index_present=_index_present(),
        resuming=_open_marker(target) is not None,
    )


def reembed(
    *,
    batch_size: int = DEFAULT_BATCH_SIZE,
    refresh: bool = False,
    embedder: Embedder | None = None,
    on_total: Callable[[int], None] | None = None,
    progress: Progress | None = None,
) -> ReembedReport:
    """Bring every chunk of every organization to the configured embedder; see the module docstring.

    `refresh` embeds everything again even when the signature matches. `on_total` is told how
    many chunks are to be embedded once that is known; `progress` how many each batch stored.
    Raises Conflict(REEMBED_RUNNING) when another run holds the lock, and
    ServiceUnavailable(EMBEDDING_UNAVAILABLE / EMBEDDING_FAILED) when the provider fails midway
    (what was embedded stays; running again continues).
    """
    if batch_size < 1:
        raise ValueError("batch_size must be at least 1")
    embedder = embedder or get_embedder()
    started = time.monotonic()
    with _run_lock():
        plan = reembed_plan(embedder)
        if not (plan.needed or refresh):
            return ReembedReport(embedded=0, seconds=0.0, signature=plan.target)
        marker = _open_marker(plan.target)
        if marker is None and (plan.changes_model or plan.changes_dimension or refresh):
            marker = _start(plan)
        if on_total is not None:
            on_total(MemoryChunk.objects.filter(embedding__isnull=True).count())
        high_water = int(marker["high_water"]) if marker else None
        embedded = _embed_pending(embedder, batch_size, progress)
        embedded += _finish(plan, embedder, batch_size, high_water, embedded, started, progress)
    return ReembedReport(embedded=embedded, seconds=round(time.monotonic() - started, 2), signature=plan.target)


@contextmanager
def _run_lock() -> Iterator[None]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_lock(%s)", [_LOCK_KEY])
        if not cursor.fetchone()[0]:
            raise Conflict("Another `cortex reembed` is running; wait for it to finish.", error_code="REEMBED_RUNNING")
    try:
        yield
    finally:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_unlock(%s)", [_LOCK_KEY])


def _flush_deferred_checks(cursor: Any) -> None:
    # Foreign keys are checked at commit (deferred); checks still queued for chunk rows written
    # earlier in an enclosing transaction would make ALTER TABLE / CREATE INDEX refuse to run.
    cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")


def _start(plan: ReembedPlan) -> dict[str, Any]:
    """Drop the index, clear (or retype) the vectors and record the run marker — all or nothing."""
    with transaction.atomic(), connection.cursor() as cursor:
        _flush_deferred_checks(cursor)
        cursor.execute(f"LOCK TABLE {TABLE} IN SHARE ROW EXCLUSIVE MODE")
        cursor.execute(f"DROP INDEX IF EXISTS {INDEX_NAME}")
        # The scopes' own vector indexes too: every vector changes; beat's next scope index sync builds them again.
        for scope_id, kind in scope_indexes("vector"):
            cursor.execute(f"DROP INDEX IF EXISTS {scope_index_name(scope_id, kind)}")
        if plan.changes_dimension:
            cursor.execute(f"ALTER TABLE {TABLE} ALTER COLUMN embedding TYPE vector({int(plan.target[2])}) USING NULL")
        else:
            cursor.execute(f"UPDATE {TABLE} SET embedding = NULL WHERE embedding IS NOT NULL")  # noqa: S608 - the model's table name
        cursor.execute(f"SELECT coalesce(max(id), 0) FROM {TABLE}")  # noqa: S608 - the model's table name
        high_water = int(cursor.fetchone()[0])
        details = {
            "from": list(plan.stored) if plan.stored else None,
            "to": list(plan.target),
            "column": {"from": plan.column_dim, "to": plan.target[2]},
            "chunks": plan.chunks,
            "organizations": plan.organizations,
            "high_water": high_water,
        }
        record(
            "embedding.reembed.start",
            organization=None,
            actor=Actor.cli(),
            target_type="embedding",
            target_id=_label(plan.target),
            details=details,
        )
    return details


def _embed_rows(embedder: Embedder, rows: list[tuple[int, str, str]]) -> None:
    """Embed (id, title, text) rows exactly as the write pipeline would, and store the vectors."""
    try:
        vectors = embedder.embed([embedding_text(title, text) for _id, title, text in rows])
    except EmbeddingUnavailable as exc:
        raise ServiceUnavailable(
            f"The embedding provider is unavailable ({exc}). What was embedded is kept; run `cortex reembed` again to continue.",
            error_code="EMBEDDING_UNAVAILABLE",
        ) from exc
    except EmbeddingFailed as exc:
        raise ServiceUnavailable(
            f"The embedding provider refused a batch ({exc}). What was "
            "embedded is kept; fix the cause and run `cortex reembed` again.",
            error_code="EMBEDDING_FAILED",
        ) from exc
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            UPDATE {TABLE} AS c SET embedding = v.embedding::vector
              FROM unnest(%s::bigint[], %s::text[]) AS v(id, embedding)
             WHERE c.id = v.id
            """,  # noqa: S608 - the model's table name; values are parameters
            [[r[0] for r in rows], [vector_literal(v) for v in vectors]],
        )


_PENDING_SQL = f"""
    SELECT c.id, m.title, c.text
      FROM {TABLE} AS c JOIN memories_memory AS m ON m.id = c.memory_id
     WHERE c.embedding IS NULL AND c.id > %s
     ORDER BY c.id
     LIMIT %s
"""  # noqa: S608 - the model's table name


def _embed_pending(embedder: Embedder, batch_size: int, progress: Progress | None) -> int:
    """Every chunk without a vector, in id order, one batch (one UPDATE, committed) at a time.

    No transaction is held open while the provider embeds; a chunk deleted meanwhile (a
    redaction) simply matches nothing in the UPDATE.
    """
    done, after = 0, 0
    while True:
        with connection.cursor() as cursor:
            cursor.execute(_PENDING_SQL, [after, batch_size])
            rows = cursor.fetchall()
        if not rows:
            return done
        _embed_rows(embedder, rows)
        after = rows[-1][0]
        done += len(rows)
        if progress is not None:
            progress(len(rows))


def _finish(
    plan: ReembedPlan,
    embedder: Embedder,
    batch_size: int,
    high_water: int | None,
    embedded: int,
    started: float,
    progress: Progress | None,
) -> int:
    """Catch late writes, rebuild the index, record the signature; returns how many late chunks it embedded."""
    with transaction.atomic():
        with connection.cursor() as cursor:
            # Writers wait from here until commit; a process still on the old model may have
            # stored old vectors since the start: those are embedded again now.
            _flush_deferred_checks(cursor)
            cursor.execute(f"LOCK TABLE {TABLE} IN SHARE MODE")
            if high_water is not None:
                cursor.execute(f"UPDATE {TABLE} SET embedding = NULL WHERE id > %s AND embedding IS NOT NULL", [high_water])  # noqa: S608
        late = _embed_pending(embedder, batch_size, progress)
        if not _index_present():
            index = next(i for i in MemoryChunk._meta.indexes if i.name == INDEX_NAME)
            with connection.schema_editor(atomic=False) as editor:
                editor.add_index(MemoryChunk, index)
        provider, model, dim = plan.target
        EmbeddingSignature.objects.all().delete()
        EmbeddingSignature.objects.create(provider=provider, model=model, dim=dim)
        record(
            "embedding.reembed.finish",
            organization=None,
            actor=Actor.cli(),
            target_type="embedding",
            target_id=_label(plan.target),
            details={"to": list(plan.target), "embedded": embedded + late, "seconds": round(time.monotonic() - started, 2)},
        )
    return late

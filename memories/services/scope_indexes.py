"""Vector indexes of one scope each, for the readers who read one scope.

The chunk table's HNSW index (`chunk_embedding_hnsw`) holds every organization's chunks, and a
reader's filter (organization, scopes, clearance) is applied while the graph is walked: a reader
who may see a small share of the table has the walk visit many chunks for each one it returns
(100k memories: a Contractor who reads one scope, a tenth of the table, HNSW p50 8 ms against the
Executive's 3). So a scope holding at least CORTEX_SCOPE_INDEX_MIN_CHUNKS active chunks, and at
most half of the table, gets a partial HNSW index of its own chunks, `chunk_hnsw_scope_<id>`
(`WHERE scope_id = <id>`). PostgreSQL's planner picks it by itself for every query whose filter
names that scope alone — a reader of one scope, a recall narrowed to one — since the predicate
proves the index holds every row the query can return; the read rule stays in the query's WHERE
either way, so what a reader may see does not depend on which index answers. Readers of several
scopes keep the table's index.

`scope_indexes_sync` (beat, every 10 minutes) builds what is missing with CREATE INDEX
CONCURRENTLY — writers are never blocked — and drops an index whose scope is gone, has shrunk
below half the threshold or has grown past three quarters of the table (the hysteresis keeps a
scope near a limit from being built and dropped in turn). A build interrupted half-way leaves an
invalid index, which the next sync drops and builds again. Writes into an indexed scope maintain
two graphs (docs/benchmarks.md measures what that costs).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from django.conf import settings
from django.db import connection
from pgvector.django import HnswIndex

from memories.models import MemoryChunk, Scope, TermCount
from memories.retrieval.sql import SCOPE_VECTOR_INDEX_PREFIX, TABLE_VECTOR_INDEX, vector_indexes

TABLE = MemoryChunk._meta.db_table
PREFIX = SCOPE_VECTOR_INDEX_PREFIX
# One sync at a time (a session lock: CREATE INDEX CONCURRENTLY cannot run in a transaction).
_LOCK_KEY = 7302_0003
# The largest share of the table a scope may hold to get an index, and the share at which it loses it.
BUILD_SHARE = 0.5
DROP_SHARE = 0.75
# Memory for one build: HNSW builds slow down by an order of magnitude once the graph spills to disk.
_BUILD_MEMORY_PER_CHUNK = 3 * 1024
_BUILD_MEMORY_MB = (64, 2048)


@dataclass
class ScopeIndexSync:
    built: list[int] = field(default_factory=list)  # scope ids whose index was built (or rebuilt)
    dropped: list[int] = field(default_factory=list)  # scope ids whose index was dropped
    kept: list[int] = field(default_factory=list)
    skipped: bool = False  # another sync held the lock


def index_name(scope_id: int) -> str:
    return f"{PREFIX}{int(scope_id)}"


def scope_indexes() -> dict[int, bool]:
    """Every per-scope index on the chunk table: scope id → whether it is valid (a finished build)."""
    return {scope_id: index.valid for scope_id, index in vector_indexes(connection).items() if scope_id is not None}


def _chunks_per_scope() -> dict[int, int]:
    """Active chunks per existing scope, from the counts the chunk triggers keep (no scan of the chunks)."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            SELECT s.id, coalesce(sum(t.chunks), 0) FROM {Scope._meta.db_table} AS s
              LEFT JOIN {TermCount._meta.db_table} AS t ON t.scope_id = s.id AND t.lexeme = ''
             GROUP BY s.id
            """  # noqa: S608 - the models' table names
        )
        return {int(scope_id): int(chunks) for scope_id, chunks in cursor.fetchall()}


def _table_index() -> HnswIndex:
    index = next(i for i in MemoryChunk._meta.indexes if i.name == TABLE_VECTOR_INDEX)
    assert isinstance(index, HnswIndex)
    return index


def _build(scope_id: int, chunks: int) -> None:
    table = _table_index()  # the same graph parameters as the table's own index
    options = ", ".join(f"{k} = {int(v)}" for k, v in (("m", table.m), ("ef_construction", table.ef_construction)) if v)
    graph = f"WITH ({options}) " if options else ""
    memory_mb = min(max(chunks * _BUILD_MEMORY_PER_CHUNK // 2**20, _BUILD_MEMORY_MB[0]), _BUILD_MEMORY_MB[1])
    with connection.cursor() as cursor:
        cursor.execute(f"SET maintenance_work_mem = '{memory_mb}MB'")
        try:
            cursor.execute(
                f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {index_name(scope_id)} ON {TABLE} "
                f"USING hnsw (embedding vector_cosine_ops) {graph}WHERE scope_id = {int(scope_id)}"
            )
        finally:
            cursor.execute("RESET maintenance_work_mem")


def _drop(scope_id: int) -> None:
    with connection.cursor() as cursor:
        cursor.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {index_name(scope_id)}")


def scope_indexes_sync() -> ScopeIndexSync:
    """Build the per-scope indexes that are due and drop those no longer wanted (see the module docstring).

    Runs outside any transaction (CONCURRENTLY needs it); one at a time — a second caller returns at
    once with `skipped`. Running it again changes nothing."""
    if connection.in_atomic_block:
        raise RuntimeError("scope_indexes_sync builds indexes concurrently and cannot run inside a transaction")
    threshold = settings.CORTEX_SCOPE_INDEX_MIN_CHUNKS
    outcome = ScopeIndexSync()
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_lock(%s)", [_LOCK_KEY])
        if not cursor.fetchone()[0]:
            outcome.skipped = True
            return outcome
    try:
        chunks = _chunks_per_scope()
        table = sum(chunks.values())
        for scope_id, valid in sorted(scope_indexes().items()):
            count = chunks.get(scope_id)
            if valid and count is not None and threshold / 2 <= count <= DROP_SHARE * table:
                outcome.kept.append(scope_id)
                continue
            _drop(scope_id)  # an interrupted build too: made again below when still due
            if valid:
                outcome.dropped.append(scope_id)
        for scope_id, count in sorted(chunks.items()):
            if scope_id not in outcome.kept and count >= threshold and count <= BUILD_SHARE * table:
                _build(scope_id, count)
                outcome.built.append(scope_id)
    finally:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_unlock(%s)", [_LOCK_KEY])
    return outcome

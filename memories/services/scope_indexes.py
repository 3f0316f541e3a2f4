"""Indexes of one scope each — its vector graph and its full-text index — for the readers who read one scope.

The chunk table's HNSW index (`chunk_embedding_hnsw`) holds every organization's chunks, and a
reader's filter (organization, scopes, clearance) is applied while the graph is walked: a reader
who may see a small share of the table has the walk visit many chunks for each one it returns
(100k memories: a Contractor who reads one scope, a tenth of the table, HNSW p50 8 ms against the
Executive's 3). The table's full-text index (`chunk_search_gin`) likewise gives every chunk of the
table holding a query's words, which such a reader's (scope, clearance) rows then narrow (100k: a
Contractor's 10.7k matches of "contract" ANDed with his 13.1k rows to keep 1.0k). So a scope holding
at least CORTEX_SCOPE_INDEX_MIN_CHUNKS active chunks, and at most half of the table, gets a partial
HNSW index of its own chunks, `chunk_hnsw_scope_<id>`, and a partial GIN index of their full-text
vectors, `chunk_gin_scope_<id>` (both `WHERE scope_id = <id>`). PostgreSQL's planner picks them by
itself for every query whose filter names that scope alone — a reader of one scope, a recall
narrowed to one — since the predicate proves the index holds every row the query can return; the
read rule stays in the query's WHERE either way, so what a reader may see does not depend on which
index answers. Readers of several scopes keep the table's indexes.

`scope_indexes_sync` (beat, every 10 minutes) builds what is missing with CREATE INDEX
CONCURRENTLY — writers are never blocked — and drops the indexes of a scope that is gone, has shrunk
below half the threshold or has grown past three quarters of the table (the hysteresis keeps a
scope near a limit from being built and dropped in turn). A build interrupted half-way leaves an
invalid index, which the next sync drops and builds again. Writes into an indexed scope maintain
two graphs and two full-text indexes (docs/benchmarks.md measures what that costs).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from django.conf import settings
from django.db import connection
from pgvector.django import HnswIndex

from memories.models import MemoryChunk, Scope, TermCount
from memories.retrieval.sql import (
    SCOPE_TEXT_INDEX_PREFIX,
    SCOPE_VECTOR_INDEX_PREFIX,
    TABLE_TEXT_INDEX,
    TABLE_VECTOR_INDEX,
    chunk_indexes,
)

TABLE = MemoryChunk._meta.db_table
# The kinds of index a scope gets: kind → (the prefix of its name, the table's own index of that kind).
Kind = Literal["vector", "text"]
KINDS: dict[Kind, tuple[str, str]] = {
    "vector": (SCOPE_VECTOR_INDEX_PREFIX, TABLE_VECTOR_INDEX),
    "text": (SCOPE_TEXT_INDEX_PREFIX, TABLE_TEXT_INDEX),
}
# One sync at a time (a session lock: CREATE INDEX CONCURRENTLY cannot run in a transaction).
_LOCK_KEY = 7302_0003
# The largest share of the table a scope may hold to get its indexes, and the share at which it loses them.
BUILD_SHARE = 0.5
DROP_SHARE = 0.75
# Memory for one build: HNSW builds slow down by an order of magnitude once the graph spills to disk.
_BUILD_MEMORY_PER_CHUNK = 3 * 1024
_BUILD_MEMORY_MB = (64, 2048)


@dataclass
class ScopeIndexSync:
    built: list[int] = field(default_factory=list)  # scope ids that had an index built (or rebuilt)
    dropped: list[int] = field(default_factory=list)  # scope ids whose indexes were dropped
    kept: list[int] = field(default_factory=list)  # scope ids whose indexes were all there and valid
    skipped: bool = False  # another sync held the lock


def index_name(scope_id: int, kind: Kind) -> str:
    return f"{KINDS[kind][0]}{int(scope_id)}"


def scope_indexes(kind: Kind | None = None) -> dict[tuple[int, Kind], bool]:
    """Every per-scope index on the chunk table (of one `kind`, or of all): (scope id, kind) → whether
    it is valid (a finished build)."""
    found: dict[tuple[int, Kind], bool] = {}
    for name, (prefix, table_index) in KINDS.items():
        if kind in (None, name):
            for scope_id, index in chunk_indexes(connection, table_index, prefix).items():
                if scope_id is not None:
                    found[(scope_id, name)] = index.valid
    return found


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


def _build(scope_id: int, kind: Kind, chunks: int) -> None:
    """Build one of a scope's indexes, concurrently: writers go on while it is built."""
    if kind == "text":
        method = "gin (search_vector)"
    else:
        table = _table_index()  # the same graph parameters as the table's own index
        options = ", ".join(f"{k} = {int(v)}" for k, v in (("m", table.m), ("ef_construction", table.ef_construction)) if v)
        method = f"hnsw (embedding vector_cosine_ops) WITH ({options})" if options else "hnsw (embedding vector_cosine_ops)"
    memory_mb = min(max(chunks * _BUILD_MEMORY_PER_CHUNK // 2**20, _BUILD_MEMORY_MB[0]), _BUILD_MEMORY_MB[1])
    with connection.cursor() as cursor:
        cursor.execute(f"SET maintenance_work_mem = '{memory_mb}MB'")
        try:
            cursor.execute(
                f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {index_name(scope_id, kind)} ON {TABLE} "
                f"USING {method} WHERE scope_id = {int(scope_id)}"
            )
        finally:
            cursor.execute("RESET maintenance_work_mem")


def _drop(scope_id: int, kind: Kind) -> None:
    with connection.cursor() as cursor:
        cursor.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {index_name(scope_id, kind)}")


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
        present = scope_indexes()
        indexed = {scope_id for (scope_id, _), valid in present.items() if valid}

        def wanted(scope_id: int) -> bool:
            count = chunks.get(scope_id)
            if count is None:
                return False
            if scope_id in indexed:  # the hysteresis: an indexed scope keeps its indexes a while longer
                return threshold / 2 <= count <= DROP_SHARE * table
            return threshold <= count <= BUILD_SHARE * table

        for scope_id in sorted({scope_id for scope_id, _ in present} | set(chunks)):
            keep = wanted(scope_id)
            mine = {kind: present.get((scope_id, kind)) for kind in KINDS}
            if keep and all(mine.values()):
                outcome.kept.append(scope_id)
                continue
            for kind, valid in mine.items():
                if valid is not None and not (keep and valid):
                    _drop(scope_id, kind)  # an interrupted build too: made again below when still due
            if not keep:
                if scope_id in indexed:
                    outcome.dropped.append(scope_id)
                continue
            for kind, valid in mine.items():
                if not valid:
                    _build(scope_id, kind, chunks[scope_id])
            outcome.built.append(scope_id)
    finally:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_unlock(%s)", [_LOCK_KEY])
    return outcome

"""Indexes of one scope each, vector and full-text (memories/services/scope_indexes.py): built for scopes that
are large and not most of the table, used by PostgreSQL for a filter that names one scope, dropped when their
scope shrinks or is gone, rebuilt after an interrupted build — and never a change to what anyone may read."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.conf import settings as django_settings
from django.db import connection
from django.utils import timezone
from support import principal, remember

from memories.embeddings.factory import get_embedder
from memories.models import Memory, MemoryChunk, Scope
from memories.retrieval import sql
from memories.selectors.recall import RecallQuery, recall
from memories.services.memories import memory_delete
from memories.services.scope_indexes import KINDS, Kind, index_name, scope_indexes, scope_indexes_sync
from memories.tasks import sync_scope_indexes

# CREATE INDEX CONCURRENTLY cannot run inside the transaction a plain django_db test is wrapped in.
pytestmark = pytest.mark.django_db(transaction=True)


# Unrelated facts (post-write conflict detection runs as it does in production: look-alikes would supersede each other).
ENGINEERING = [
    "The robot fleet firmware ships on Tuesdays after the canary run.",
    "Our CI pipeline runs the integration suite on every merge to main.",
    "Kubernetes nodes are patched monthly by the platform team.",
    "The on-call rotation hands over every Monday at ten.",
    "Grafana dashboards live in the observability folder.",
    "Database backups are verified weekly by restoring them to staging.",
]
SALES = [
    "The partner discount is ten percent for resellers.",
    "Enterprise renewals are negotiated ninety days before expiry.",
    "Quotes above fifty thousand euros need the sales director's approval.",
    "The CRM of record is HubSpot.",
    "Trade show leads are entered within two days.",
    "Demo accounts expire after fourteen days.",
]
HANDBOOK = ["The office closes at six.", "Parental leave is sixteen weeks."]


@pytest.fixture(autouse=True)
def _no_index_outlives_the_test() -> Iterator[None]:
    yield
    with connection.cursor() as cursor:
        for scope_id, kind in scope_indexes():
            cursor.execute(f"DROP INDEX IF EXISTS {index_name(scope_id, kind)}")


@pytest.fixture
def world(acme: dict[str, Any], settings: Any) -> dict[str, Any]:
    """Engineering and sales hold 6 of the 14 chunks each (large, under half), the handbook 2 (small)."""
    settings.CORTEX_SCOPE_INDEX_MIN_CHUNKS = 4
    for text in ENGINEERING:
        remember(acme["employee"], text, scope="engineering", clearance_min="Contractor")
    for text in SALES:
        remember(acme["manager"], text, scope="sales")
    for text in HANDBOOK:
        remember(acme["exec"], text, scope="handbook")
    scopes = {scope.slug: scope.pk for scope in Scope.objects.filter(organization=acme["org"])}
    return {**acme, "scopes": scopes}


def _definition(scope_id: int, kind: Kind) -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT indexdef FROM pg_indexes WHERE indexname = %s", [index_name(scope_id, kind)])
        return str(cursor.fetchone()[0])


def _both(*scope_ids: int) -> dict[tuple[int, str], bool]:
    """What scope_indexes() lists when each of these scopes has both its indexes, valid."""
    return {(scope_id, kind): True for scope_id in scope_ids for kind in KINDS}


def test_a_large_scope_gets_its_own_index_a_small_one_none_and_running_again_changes_nothing(world: dict[str, Any]) -> None:
    engineering, sales = world["scopes"]["engineering"], world["scopes"]["sales"]
    first = scope_indexes_sync()
    assert (first.built, first.dropped, first.skipped) == (sorted([engineering, sales]), [], False)
    assert scope_indexes() == _both(engineering, sales)
    for scope_id in (engineering, sales):
        vector, text = _definition(scope_id, "vector"), _definition(scope_id, "text")
        assert "USING hnsw (embedding vector_cosine_ops)" in vector and "m='16'" in vector
        assert "USING gin (search_vector)" in text
        assert vector.endswith(f"WHERE (scope_id = {scope_id})") and text.endswith(f"WHERE (scope_id = {scope_id})")
    again = scope_indexes_sync()
    assert (again.built, again.dropped, again.kept) == ([], [], sorted([engineering, sales]))
    # Beat's task runs the same sync.
    assert sync_scope_indexes() == {"built": [], "dropped": []}
    assert "memories.sync_scope_indexes" in {entry["task"] for entry in django_settings.CELERY_BEAT_SCHEDULE.values()}


def test_a_scope_holding_more_than_half_of_the_chunks_gets_none(world: dict[str, Any]) -> None:
    # Engineering alone: 6 of 8 chunks once sales is gone; its readers are served by the table's own index.
    for memory_id in Memory.objects.filter(organization=world["org"], scope__slug="sales").values_list("pk", flat=True):
        memory_delete(principal=principal(world["exec"]), memory_id=memory_id)
    assert scope_indexes_sync().built == []
    assert scope_indexes() == {}


def _plan(where: sql.ChunkFilter) -> str:
    """What PostgreSQL does for a nearest-chunks query under `where`, as recall orders it, with sequential and
    bitmap scans and sorts ruled out: on a table this small any index and a sort would do, so only the vector
    indexes — which give the order themselves — are left to choose between, as on a large table."""
    clause, params = where.sql()
    vector = sql.vector_literal(get_embedder().embed(["robot fleet firmware"])[0])
    with connection.cursor() as cursor:
        cursor.execute("SET enable_seqscan = off")
        cursor.execute("SET enable_bitmapscan = off")
        cursor.execute("SET enable_sort = off")
        try:
            cursor.execute(
                f"EXPLAIN SELECT c.id FROM memories_memorychunk AS c WHERE {clause} AND c.embedding IS NOT NULL "  # noqa: S608
                "ORDER BY c.embedding <=> %s::vector LIMIT 40",
                [*params, vector],
            )
            return "\n".join(row[0] for row in cursor.fetchall())
        finally:
            cursor.execute("RESET enable_seqscan")
            cursor.execute("RESET enable_bitmapscan")
            cursor.execute("RESET enable_sort")


def _text_plan(where: sql.ChunkFilter, term: str) -> str:
    """What PostgreSQL does for recall's full-text candidates (sql.lexical_hits) under `where`, with sequential
    scans and plain index scans ruled out: on a table this small reading every row would do, so only the
    bitmap scans a large table gets are left to choose between."""
    statements: list[tuple[str, Any]] = []

    def keep(execute: Any, statement: str, params: Any, many: bool, context: Any) -> Any:
        statements.append((statement, params))
        return execute(statement, params, many, context)

    with connection.execute_wrapper(keep):
        sql.lexical_hits([term], [1.0], where, 40)
    ((statement, params),) = statements
    with connection.cursor() as cursor:
        cursor.execute("SET enable_seqscan = off")
        cursor.execute("SET enable_indexscan = off")
        try:
            cursor.execute(f"EXPLAIN {statement}", params)
            return "\n".join(row[0] for row in cursor.fetchall())
        finally:
            cursor.execute("RESET enable_seqscan")
            cursor.execute("RESET enable_indexscan")


def _crowd(scope_ids: list[int], chunks: int) -> None:
    """`chunks` more chunks in each of these scopes, of a memory of that scope, words of their own and no vector:
    enough rows that the planner weighs the full-text indexes against the others as on a real store (on a
    handful of rows, reading them all through any index is as cheap)."""
    with connection.cursor() as cursor:
        cursor.execute(
            """
            INSERT INTO memories_memorychunk (memory_id, index, char_start, char_end, text, search_vector, organization_id,
                                              scope_id, clearance_rank, status, valid_from, category, source, tags)
            SELECT m.id, 100 + g, 0, 20, 'ledger entry ' || g, to_tsvector('english', 'ledger entry ' || g),
                   m.organization_id, m.scope_id, m.clearance_rank, 'active', m.valid_from, m.category, m.source, '{}'
              FROM (SELECT DISTINCT ON (scope_id) * FROM memories_memory WHERE scope_id = ANY(%s) ORDER BY scope_id, id) AS m
             CROSS JOIN generate_series(1, %s) AS g
            """,
            [scope_ids, chunks],
        )
        cursor.execute("ANALYZE memories_memorychunk")


def test_a_filter_naming_one_scope_is_served_by_that_scopes_indexes_and_one_naming_several_by_none(
    world: dict[str, Any],
) -> None:
    engineering, sales = world["scopes"]["engineering"], world["scopes"]["sales"]
    _crowd([engineering, sales], 3000)
    scope_indexes_sync()
    reader = principal(world["exec"])

    def where(scope_ids: list[int]) -> sql.ChunkFilter:
        return sql.ChunkFilter(reader.organization_id, scope_ids, reader.clearance_rank, timezone.now(), earlier_versions=True)

    for scope_id in (engineering, sales):
        plan = _plan(where([scope_id]))
        assert f"Index Scan using {index_name(scope_id, 'vector')} " in plan, plan
        # The read rule is still applied to what the index returns.
        assert "clearance_rank <=" in plan and "organization_id =" in plan
        text = _text_plan(where([scope_id]), "fleet")
        assert f"Bitmap Index Scan on {index_name(scope_id, 'text')}" in text, text
        assert "clearance_rank <=" in text and "organization_id =" in text
    # Two scopes: no one scope's index holds all their chunks, so none may answer; the table's do.
    several = _plan(where([engineering, sales]))
    assert "_scope_" not in several and "Index Scan using chunk_embedding_hnsw " in several, several
    several_text = _text_plan(where([engineering, sales]), "fleet")
    assert "_scope_" not in several_text and "Bitmap Index Scan on chunk_search_gin" in several_text, several_text


def test_recall_through_a_scope_index_finds_what_the_tables_index_finds_and_nothing_hidden(world: dict[str, Any]) -> None:
    # The contractor reads engineering (granted) and the handbook (all members) below their clearance; narrowed
    # to engineering, their nearest chunks come from engineering's own index once it exists.
    contractor = principal(world["contractor"])
    hidden = remember(
        world["manager"], "The robot fleet firmware budget is confidential.", scope="engineering", clearance_min="Manager"
    )
    where = sql.ChunkFilter(
        organization_id=contractor.organization_id,
        scope_ids=[world["scopes"]["engineering"]],
        clearance_rank=contractor.clearance_rank,
        moment=timezone.now(),
        earlier_versions=True,
    )
    vector = get_embedder().embed(["robot fleet firmware Tuesday"])[0]
    query = RecallQuery(query="robot fleet firmware Tuesday", scopes=["engineering"], limit=10)

    def found() -> tuple[list[tuple[str, float]], list[tuple[str, float]], list[int]]:
        with connection.cursor() as cursor:  # index paths only, as on a large table
            cursor.execute("SET enable_seqscan = off")
            cursor.execute("SET enable_bitmapscan = off")
            try:
                nearest = [(str(hit.memory_id), round(hit.similarity, 6)) for hit in sql.dense_hits(vector, where, 40)]
                hits = [(str(hit.memory.pk), hit.score) for hit in recall(contractor, query, audit=False).hits]
            finally:
                cursor.execute("RESET enable_bitmapscan")
            cursor.execute("SET enable_indexscan = off")  # full-text candidates come from bitmap scans
            try:
                lexical = sql.lexical_hits(["fleet", "firmware", "tuesday"], [1.0, 1.0, 1.0], where, 40)
            finally:
                cursor.execute("RESET enable_seqscan")
                cursor.execute("RESET enable_indexscan")
            return nearest, hits, lexical

    # Engineering 3,007 chunks (with the hidden one), sales 3,007, the handbook 2: neither is over half the table.
    _crowd([world["scopes"]["engineering"]], 3000)
    _crowd([world["scopes"]["sales"]], 3001)
    without = found()
    assert scope_indexes_sync().built == [world["scopes"]["engineering"], world["scopes"]["sales"]]
    assert _plan(where).count(f"Index Scan using {index_name(world['scopes']['engineering'], 'vector')} ") == 1
    assert f"Bitmap Index Scan on {index_name(world['scopes']['engineering'], 'text')}" in _text_plan(where, "fleet")
    with_index = found()
    assert with_index == without
    nearest, hits, lexical = with_index
    # The engineering chunk naming the fleet's firmware, and not the one above the contractor's clearance.
    lexical_memories = set(MemoryChunk.objects.filter(pk__in=lexical).values_list("memory_id", flat=True))
    assert len(lexical) == 1 and hidden.pk not in lexical_memories
    # Every engineering chunk the contractor may see, nearest first, and none above their clearance.
    engineering = Memory.objects.filter(organization=world["org"], scope__slug="engineering", clearance_rank=0)
    assert {memory_id for memory_id, _ in nearest} == {str(pk) for pk in engineering.values_list("pk", flat=True)}
    assert len(nearest) == len(ENGINEERING) and str(hidden.pk) not in {memory_id for memory_id, _ in nearest + hits}
    assert hits[0][0] == str(Memory.objects.get(content=ENGINEERING[0]).pk)


def test_an_interrupted_build_is_made_again_a_missing_kind_is_added_and_a_shrunk_or_vanished_scopes_indexes_are_dropped(
    world: dict[str, Any],
) -> None:
    engineering, sales = world["scopes"]["engineering"], world["scopes"]["sales"]
    gone = max(world["scopes"].values()) + 100
    with connection.cursor() as cursor:
        # A concurrent build that failed half-way leaves an invalid index under the name (here: a unique
        # index the duplicated organization ids refuse).
        with pytest.raises(Exception, match="could not create unique index"):
            cursor.execute(
                f"CREATE UNIQUE INDEX CONCURRENTLY {index_name(sales, 'text')} ON memories_memorychunk (organization_id) "
                f"WHERE scope_id = {sales}"
            )
        # An index left from a scope that no longer exists.
        cursor.execute(
            f"CREATE INDEX {index_name(gone, 'vector')} ON memories_memorychunk USING hnsw (embedding vector_cosine_ops) "
            f"WHERE scope_id = {gone}"
        )
        # And a scope with its vector index only, as syncs before full-text indexes per scope left it.
        cursor.execute(
            f"CREATE INDEX {index_name(engineering, 'vector')} ON memories_memorychunk "
            f"USING hnsw (embedding vector_cosine_ops) WHERE scope_id = {engineering}"
        )
        cursor.execute("SELECT %s::regclass::oid", [index_name(engineering, "vector")])
        engineering_graph = cursor.fetchone()[0]
    assert scope_indexes() == {(sales, "text"): False, (gone, "vector"): True, (engineering, "vector"): True}
    outcome = scope_indexes_sync()
    assert outcome.dropped == [gone] and outcome.built == [engineering, sales]
    assert scope_indexes() == _both(engineering, sales)
    assert "USING gin (search_vector)" in _definition(sales, "text")
    with connection.cursor() as cursor:  # the graph that was there is kept, not built again
        cursor.execute("SELECT %s::regclass::oid", [index_name(engineering, "vector")])
        assert cursor.fetchone()[0] == engineering_graph
    # Engineering shrinks to one chunk, under half the threshold: its indexes go.
    for memory_id in Memory.objects.filter(organization=world["org"], scope__slug="engineering").values_list("pk", flat=True)[:5]:
        memory_delete(principal=principal(world["exec"]), memory_id=memory_id)
    shrunk = scope_indexes_sync()
    assert (shrunk.dropped, shrunk.built) == ([engineering], [])
    assert scope_indexes() == _both(sales)


def test_one_sync_at_a_time_and_never_inside_a_transaction(world: dict[str, Any], django_db_blocker: Any) -> None:
    import psycopg
    from django.db import transaction

    with transaction.atomic(), pytest.raises(RuntimeError, match="cannot run inside a transaction"):
        scope_indexes_sync()
    # Another session holds the sync's lock: this one builds nothing and says so.
    with psycopg.connect(**_connection_arguments(), autocommit=True) as other:
        other.execute("SELECT pg_advisory_lock(73020003)")
        outcome = scope_indexes_sync()
        assert outcome.skipped and outcome.built == [] and scope_indexes() == {}
        # Released here, not by closing: a closed connection's server process lets go of its locks
        # a moment after the client has moved on, which on a busy machine is after the next line.
        other.execute("SELECT pg_advisory_unlock(73020003)")
    assert scope_indexes_sync().built == sorted([world["scopes"]["engineering"], world["scopes"]["sales"]])


def _connection_arguments() -> dict[str, Any]:
    params = dict(connection.get_connection_params())
    params.pop("cursor_factory", None)
    params.pop("context", None)
    return params


def test_the_search_breadth_follows_the_size_of_the_graph_a_reader_walks(
    world: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The breadth that finds the exact neighbours in a 130k-chunk graph finds fewer in a 1.3M one: it grows
    # with the graph the query walks — the reader's one scope's index when there is one, else the table's.
    engineering, sales, handbook = (world["scopes"][slug] for slug in ("engineering", "sales", "handbook"))
    scope_indexes_sync()
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE memories_memorychunk")
    monkeypatch.setattr(sql, "EF_SEARCH_BY_GRAPH", ((5, 100), (10, 200)))  # this store's sizes, scaled down
    monkeypatch.setattr(sql, "_graph_sizes_read", (float("-inf"), {}))

    def reader(*scope_ids: int) -> sql.ChunkFilter:
        return sql.ChunkFilter(world["org"].pk, list(scope_ids), 3, timezone.now())

    sizes = sql._graph_sizes()
    assert sizes[engineering] == sizes[sales] == 6 and sizes[None] >= 14 and handbook not in sizes
    assert sql.ef_search_for(reader(engineering)) == 200  # its scope's graph: 6 chunks
    assert sql.ef_search_for(reader(engineering, sales)) == 400  # the table's: every chunk
    assert sql.ef_search_for(reader(handbook)) == 400  # a scope without an index walks the table's
    # The sizes are kept per process for a while: a scope indexed meanwhile is not looked up on every recall.
    with connection.cursor() as cursor:
        cursor.execute(f"DROP INDEX {index_name(engineering, 'vector')}")
    assert sql.ef_search_for(reader(engineering)) == 200

"""The retrieval queries. Every one carries the principal's permission filter in its WHERE clause.

- `dense_hits`: nearest chunks by cosine over the HNSW index, with pgvector's iterative index
  scan so a filtered query keeps scanning until it has `k` visible chunks.
- `lexical_hits`: chunks matching any query term through the GIN full-text index, ranked by
  the IDF-weighted share of terms they contain.
- `score_chunks`: for a set of candidate chunks, their exact cosine and which terms each
  contains (in the body and in the title/tags), re-applying the filter (defence in depth), with
  what the ranking needs of each one's memory row and the chunk's vector.
- `retrieve`: the three above as one statement (recall's candidates in one round trip).
- `memories_with_authors`: the returned memories, with their authors, as model instances.
- `term_document_frequencies`, `typo_corrections`: term statistics under the reader's read rule (the
  counts the chunk triggers keep in memories_termcount); `parse_terms`: how the text search
  configuration reads a query term, kept per process.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np

from cortex_site.db_router import content_read_connection
from cortex_site.model_rows import row_reader, table_and_columns
from memories.models import Memory, User
from memories.retrieval import prepared

# HNSW search breadth by the size of the graph a query walks, and how far an iterative scan may go
# before giving up (pgvector ≥ 0.8). The same breadth finds less of the exact top-10 in a larger graph:
# with `hash` vectors, text queries, ef_search 100 finds 0.993 of it in the 130k-chunk graph of 100k
# memories but 0.937 in the 1.3M-chunk graph of 1M (200: 0.967, 400: 0.982), and a Contractor's walk
# of one scope's 262k-chunk graph 0.969 at 100 (200: 0.982) — docs/benchmarks.md.
EF_SEARCH = 100
EF_SEARCH_BY_GRAPH = ((150_000, EF_SEARCH), (500_000, 200))  # (up to this many chunks, ef_search); beyond: 400
EF_SEARCH_LARGEST = 400
# How long a process keeps the graphs' sizes (they change with writes, slowly).
GRAPH_SIZES_SECONDS = 300.0
MAX_SCAN_TUPLES = 40_000
# Lexical matches that get the cover-density tie-break (see lexical_hits).
RANK_POOL = 400


@dataclass(frozen=True)
class ChunkFilter:
    """The read rule as chunk-table predicates (plus the caller's optional narrowing)."""

    organization_id: int
    scope_ids: Sequence[int]
    clearance_rank: int
    moment: datetime
    as_of: datetime | None = None
    category: str | None = None
    source: str | None = None
    tags: Sequence[str] = ()
    # Superseded memories too: a match on an earlier version leads to the current one (recall()).
    earlier_versions: bool = False

    def sql(self, *, inline: bool = False) -> tuple[str, list[Any]]:
        """The predicates and their parameters. `inline` writes the organization, scopes and clearance
        into the text (integers from the Principal, never the caller's words): a prepared statement's
        generic plan can use a scope's own indexes only when the scope is a constant (`retrieve`)."""
        clauses = [
            "c.status IN ('active', 'superseded')" if self.earlier_versions else "c.status = 'active'",
            "(c.valid_until IS NULL OR c.valid_until > %s)",
        ]
        params: list[Any] = [self.moment]
        if inline:
            clauses[:0] = [
                f"c.organization_id = {int(self.organization_id)}",
                f"c.scope_id = ANY({_scope_array(self.scope_ids)})",
                f"c.clearance_rank <= {int(self.clearance_rank)}",
            ]
        else:
            clauses[:0] = ["c.organization_id = %s", "c.scope_id = ANY(%s)", "c.clearance_rank <= %s"]
            params[:0] = [self.organization_id, list(self.scope_ids), self.clearance_rank]
        if self.as_of is not None:
            clauses.append("c.valid_from <= %s")
            params.append(self.as_of)
        if self.category:
            clauses.append("c.category = %s")
            params.append(self.category)
        if self.source:
            clauses.append("lower(c.source) = lower(%s)")
            params.append(self.source)
        if self.tags:
            clauses.append("c.tags @> %s::varchar(50)[]")
            params.append(list(self.tags))
        return " AND ".join(clauses), params


def vector_literal(vector: np.ndarray) -> str:
    return "[" + ",".join(f"{x:.7g}" for x in vector.tolist()) + "]"


@dataclass(frozen=True)
class DenseHit:
    chunk_id: int
    memory_id: Any
    similarity: float
    superseded: bool = False


def dense_hits(query_vector: np.ndarray, where: ChunkFilter, k: int, *, exact: bool = False) -> list[DenseHit]:
    """The k visible chunks nearest to the query (approximate through HNSW unless `exact`)."""
    clause, params = where.sql()
    literal = vector_literal(query_vector)
    # On a replica route this may be the read replica (cortex_site/db_router.py), like the other reads here.
    with content_read_connection().cursor() as cursor:
        cursor.execute(
            f"""{_index_settings(k, where, exact=exact)};
            WITH hits AS MATERIALIZED (
                SELECT c.id, c.memory_id, c.embedding <=> %s::vector AS distance, c.status = 'superseded' AS superseded
                  FROM memories_memorychunk AS c
                 WHERE {clause} AND c.embedding IS NOT NULL
                 ORDER BY c.embedding <=> %s::vector
                 LIMIT %s
            )
            SELECT id, memory_id, distance, superseded FROM hits ORDER BY distance
            """,  # noqa: S608 - clause is built from fixed fragments; values are parameters
            [literal, *params, literal, k],
        )
        rows = prepared.rows_after_settings(cursor)
    return [DenseHit(chunk_id=r[0], memory_id=r[1], similarity=1.0 - float(r[2]), superseded=bool(r[3])) for r in rows]


def _index_settings(k: int, where: ChunkFilter, *, exact: bool) -> str:
    """The planner settings of a nearest-chunks query, sent in the same message as the query itself:
    a multi-statement message is one implicit transaction, so SET LOCAL ends with it (inside an
    open transaction, with that one) — no BEGIN/COMMIT round trips of its own."""
    if exact:
        # Sequential scan: the ground truth the benchmark compares the index path against.
        return "SET LOCAL enable_indexscan = off"
    return (
        f"SET LOCAL hnsw.ef_search = {max(ef_search_for(where), int(k))}; "
        f"SET LOCAL hnsw.iterative_scan = relaxed_order; SET LOCAL hnsw.max_scan_tuples = {MAX_SCAN_TUPLES}"
    )


def ef_search_for(where: ChunkFilter) -> int:
    """The search breadth for the graph this reader's query walks (EF_SEARCH_BY_GRAPH): the vector
    index of its one scope when it reads one scope that has one (memories/services/scope_indexes.py;
    the planner picks it), else the table's index, which holds every organization's chunks."""
    sizes = _graph_sizes()
    chunks = sizes.get(where.scope_ids[0]) if len(where.scope_ids) == 1 else None
    if chunks is None:
        chunks = sizes.get(None, 0)
    for up_to, breadth in EF_SEARCH_BY_GRAPH:
        if chunks <= up_to:
            return breadth
    return EF_SEARCH_LARGEST


# The chunk table's vector and full-text indexes, and the prefixes of the per-scope ones
# (memories/services/scope_indexes.py).
TABLE_VECTOR_INDEX = "chunk_embedding_hnsw"
SCOPE_VECTOR_INDEX_PREFIX = "chunk_hnsw_scope_"
TABLE_TEXT_INDEX = "chunk_search_gin"
SCOPE_TEXT_INDEX_PREFIX = "chunk_gin_scope_"


@dataclass(frozen=True)
class ChunkIndex:
    valid: bool  # a finished build (an interrupted CREATE INDEX CONCURRENTLY leaves an invalid one)
    chunks: int  # as the catalog estimates them (kept by VACUUM, ANALYZE and the index build)


def chunk_indexes(connection: Any, table_index: str, scope_prefix: str) -> dict[int | None, ChunkIndex]:
    """One kind of the chunk table's indexes as the catalog lists them: scope id → that scope's index
    (named `scope_prefix` + id), None → the table's own (`table_index`)."""
    with connection.cursor() as cursor:
        cursor.execute(
            """
            SELECT c.relname, i.indisvalid, greatest(c.reltuples, 0)::int8
              FROM pg_index AS i JOIN pg_class AS c ON c.oid = i.indexrelid
             WHERE i.indrelid = 'memories_memorychunk'::regclass AND (c.relname = %s OR c.relname LIKE %s)
            """,
            [table_index, scope_prefix.replace("_", r"\_") + "%"],
        )
        rows = cursor.fetchall()
    found: dict[int | None, ChunkIndex] = {}
    for name, valid, chunks in rows:
        suffix = name.removeprefix(scope_prefix)
        if name == table_index or suffix.isdigit():
            found[None if name == table_index else int(suffix)] = ChunkIndex(bool(valid), int(chunks))
    return found


def vector_indexes(connection: Any) -> dict[int | None, ChunkIndex]:
    """The chunk table's vector indexes (`chunk_indexes`)."""
    return chunk_indexes(connection, TABLE_VECTOR_INDEX, SCOPE_VECTOR_INDEX_PREFIX)


_graph_sizes_read: tuple[float, dict[int | None, int]] = (float("-inf"), {})


def _graph_sizes() -> dict[int | None, int]:
    """Chunks in each valid vector index (`vector_indexes`), kept per process for GRAPH_SIZES_SECONDS:
    one catalog query every few minutes, not one per recall."""
    global _graph_sizes_read
    read_at, sizes = _graph_sizes_read
    if time.monotonic() - read_at < GRAPH_SIZES_SECONDS:
        return sizes
    found = vector_indexes(content_read_connection())
    sizes = {key: index.chunks for key, index in found.items() if index.valid}
    _graph_sizes_read = (time.monotonic(), sizes)
    return sizes


def _any_term_query(terms: Sequence[str]) -> tuple[str, list[str]]:
    return "(SELECT " + " || ".join(["plainto_tsquery('english', %s)"] * len(terms)) + ")", list(terms)


# One term's query as a scalar subquery: PostgreSQL computes it once per statement (an InitPlan)
# instead of once per row it is matched against — plainto_tsquery is only STABLE, so a call in a
# filter or a select list runs for every row, parsing and stemming the term again each time.
_TERM_QUERY = "(SELECT plainto_tsquery('english', %s))"


def _lexical_select(
    terms: Sequence[str],
    weights: Sequence[float],
    where: ChunkFilter,
    k: int,
    common: Sequence[bool] | None,
    *,
    inline: bool = False,
) -> tuple[str, list[Any]] | None:
    """The lexical candidates' SELECT (chunk ids, best first) and its parameters; None when no term
    selects. `inline`: the read rule's integers and the limits in the text (ChunkFilter.sql)."""
    flags = list(common or [False] * len(terms))
    selective = [t for t, frequent in zip(terms, flags, strict=True) if not frequent]
    if not selective:
        return None
    clause, params = where.sql(inline=inline)
    selective_query, selective_params = _any_term_query(selective)
    # float8, not numeric (what a bare Python float parameter becomes): the sum is computed and sorted
    # for every match, and numeric arithmetic made that ~7% of the statement.
    weighted = " + ".join([f"%s::float8 * (c.search_vector @@ {_TERM_QUERY})::int"] * len(terms))
    weighted_params: list[Any] = []
    for term, weight in zip(terms, weights, strict=True):
        weighted_params += [weight, term]
    statement = f"""
        WITH matches AS MATERIALIZED (
            SELECT c.id, c.search_vector, ({weighted}) AS weight
              FROM memories_memorychunk AS c
             WHERE {clause} AND c.search_vector @@ {selective_query}
             ORDER BY weight DESC, c.valid_from DESC, c.id
             LIMIT {int(max(k, RANK_POOL))}
        )
        SELECT m.id FROM matches AS m
         ORDER BY m.weight DESC, ts_rank_cd(m.search_vector, {selective_query}) DESC, m.id
         LIMIT {int(k)}
        """  # noqa: S608 - fixed fragments and integers; values are parameters
    return statement, [*weighted_params, *params, *selective_params, *selective_params]


def lexical_hits(
    terms: Sequence[str], weights: Sequence[float], where: ChunkFilter, k: int, *, common: Sequence[bool] | None = None
) -> list[int]:
    """Chunk ids containing at least one selective query term, best first (IDF-weighted share of
    the query's terms they contain, then cover density).

    `common` terms (in so many chunks that their matches are a large share of the store) select
    no candidates: ranking every match of a word like "update" in a 100k-memory organization is
    what made this query slow. Chunks with common terms still get their lexical strength when
    dense retrieval (or a selective term) brings them (see score_chunks). The cover-density
    tie-break (ts_rank_cd, the expensive part per row) runs only on the RANK_POOL best matches.
    """
    select = _lexical_select(terms, weights, where, k, common)
    if select is None:
        return []
    with content_read_connection().cursor() as cursor:
        cursor.execute(*select)
        return [row[0] for row in cursor.fetchall()]


def _scope_array(scope_ids: Sequence[int]) -> str:
    """Scope ids as an array constant in a statement's text (integers, never the caller's words)."""
    return "'{" + ",".join(str(int(scope_id)) for scope_id in scope_ids) + "}'::bigint[]"


def _visible_cells(rule: ChunkFilter) -> str:
    """The cells of memories_termcount a reader may see (their read rule's organization, scopes,
    clearance), written into the text like ChunkFilter.sql(inline=True)."""
    return (
        f"s.organization_id = {int(rule.organization_id)} AND s.scope_id = ANY({_scope_array(rule.scope_ids)}) "
        f"AND s.clearance_rank <= {int(rule.clearance_rank)}"
    )


@dataclass(frozen=True)
class ParsedTerm:
    """How the 'english' configuration reads a query term: its lexemes (none for a stop word) and, for a
    hyphenated word ("on-call": 'on-cal' & 'call'), the whole word's lexeme."""

    lexemes: tuple[str, ...]
    whole_word: str | None


# Parses of the terms this process has seen. They depend on the text search configuration alone, never
# on data, so they are kept: parsing (ts_debug) cost more than the counting it serves (~0.6 of 1.3 ms).
_PARSES: dict[str, ParsedTerm] = {}
PARSES_KEPT = 50_000


def parse_terms(terms: Sequence[str]) -> dict[str, ParsedTerm]:
    """Each term's parse, from this process's parses or, for terms new to it, one round trip."""
    parsed = {term: known for term in terms if (known := _PARSES.get(term)) is not None}
    missing = [term for term in dict.fromkeys(terms) if term not in parsed]
    if not missing:
        return parsed
    with content_read_connection().cursor() as cursor:
        cursor.execute(
            """
            SELECT t.term, tsvector_to_array(to_tsvector('english', t.term)), (
                       SELECT CASE WHEN (array_agg(d.alias ORDER BY d.n))[1] IN ('asciihword', 'hword', 'numhword')
                                    AND bool_and(d.n = 1 OR d.alias = 'blank' OR d.alias LIKE 'hword\\_%%')
                                   THEN (array_agg(d.lexemes[1] ORDER BY d.n))[1] END
                         FROM ts_debug('english', t.term)
                              WITH ORDINALITY AS d(alias, description, token, dictionaries, dictionary, lexemes, n)
                   )
              FROM unnest(%s::text[]) AS t(term)
            """,
            [missing],
        )
        rows = cursor.fetchall()
    if len(_PARSES) + len(rows) > PARSES_KEPT:
        _PARSES.clear()
    for term, lexemes, whole_word in rows:
        parsed[term] = _PARSES[term] = ParsedTerm(tuple(lexemes), whole_word)
    return parsed


def term_document_frequencies(rule: ChunkFilter, terms: Sequence[str], cap: int) -> tuple[int, dict[str, int]]:
    """How many active chunks the reader may see, and for each term -1 for a stop word, else how
    many of those visible chunks contain it, up to `cap`. One round trip (two the first time this
    process sees a term: parse_terms).

    Counted under the read rule's organization, scopes and clearance only: a statistic that ranking
    uses must not move when someone writes what this reader cannot see (a score-level side channel).
    Read from the counts the chunk triggers keep (memories_termcount: a few index rows per word). A
    term of several lexemes matches the chunks holding all of them, which per-lexeme counts cannot
    say — except for a hyphenated word ("on-call": 'on-cal' & 'call'), whose whole-word lexeme only
    ever comes with its parts, so its count is the whole word's. Any other (a ticket id: 'da' &
    '-3661') is counted from the visible chunks, up to `cap` — unless one of its lexemes is in no
    visible chunk, which makes it 0 without counting.
    """
    parsed = parse_terms(terms)
    # Each term's lexemes travel joined by spaces: the parser never puts a blank inside a token.
    asked = [(term, list(parsed[term].lexemes), parsed[term].whole_word) for term in terms]
    cells = _visible_cells(rule)
    rows = prepared.fetch(
        content_read_connection(),
        f"""
            WITH asked AS (
                SELECT * FROM unnest(%s::text[], %s::text[], %s::text[]) AS a(term, lexemes, whole_word)
            )
            SELECT NULL::text, (
                       SELECT coalesce(sum(s.chunks), 0) FROM memories_termcount AS s
                        WHERE {cells} AND s.lexeme = ''
                   )
            UNION ALL
            SELECT a.term, CASE
                   WHEN a.lexemes = '' THEN -1
                   WHEN a.whole_word IS NOT NULL OR strpos(a.lexemes, ' ') = 0 THEN (
                       SELECT least(coalesce(sum(s.chunks), 0), {int(cap)}) FROM memories_termcount AS s
                        WHERE {cells} AND s.lexeme = coalesce(a.whole_word, a.lexemes)
                   )
                   -- A lexeme no visible chunk holds: no visible chunk holds them all.
                   WHEN (
                       SELECT min((SELECT coalesce(sum(s.chunks), 0) FROM memories_termcount AS s
                                    WHERE {cells} AND s.lexeme = l.lexeme))
                         FROM unnest(string_to_array(a.lexemes, ' ')) AS l(lexeme)
                   ) = 0 THEN 0
                   -- The scope and clearance tests are kept off the indexes ("+ 0"): the planner ANDed
                   -- the full-text matches (22 at 1M chunks) with a scope's whole bitmap (263k rows,
                   -- 42 ms), and then with the bitmap of every chunk at the reader's clearance
                   -- (656k rows of (scope, clearance), 34 ms, for a Contractor's "P-1649").
                   ELSE (
                       SELECT count(*) FROM (
                           SELECT 1 FROM memories_memorychunk AS c
                            WHERE c.organization_id = {int(rule.organization_id)}
                              AND c.scope_id + 0 = ANY({_scope_array(rule.scope_ids)})
                              AND c.clearance_rank + 0 <= {int(rule.clearance_rank)}
                              AND c.status = 'active' AND c.search_vector @@ plainto_tsquery('english', a.term)
                            LIMIT {int(cap)}
                       ) AS matches
                   ) END
              FROM asked AS a
            """,  # noqa: S608 - fixed fragments and integers; values are parameters
        [
            [term for term, _, _ in asked],
            [" ".join(lexemes) for _, lexemes, _ in asked],
            [whole_word for _, _, whole_word in asked],
        ],
    )
    return int(rows[0][1]), {row[0]: int(row[1]) for row in rows[1:]}


@dataclass(frozen=True)
class MemoryRow:
    """What the read rule (`Principal.can_read_memory`) and the ranking need of a candidate's memory,
    read from its memories_memory row (not the chunk's copies of those columns) in the statement that
    found the chunk: the pool is ranked without loading Memory objects."""

    pk: Any
    organization_id: int
    scope_id: int
    clearance_rank: int
    status: str
    valid_from: datetime
    valid_until: datetime | None


@dataclass(frozen=True)
class ScoredChunk:
    chunk_id: int
    memory_id: Any
    index: int
    text: str
    similarity: float
    body_hits: tuple[bool, ...]
    title_hits: tuple[bool, ...]
    superseded: bool = False
    # Among the dense (nearest-vector) candidates, not only a lexical one (see retrieve).
    from_dense: bool = False
    memory: MemoryRow | None = None
    # The chunk's vector (float64; None without one), for comparing candidates with each other in
    # Python (recall's version sharing) instead of in another statement.
    embedding: np.ndarray | None = None


def score_chunks(
    chunk_ids: Sequence[int], query_vector: np.ndarray, terms: Sequence[str], where: ChunkFilter, *, of_memories: bool = False
) -> list[ScoredChunk]:
    """Exact similarity and per-term matches for candidate chunks still visible under `where`
    (with `of_memories`, the ids are memory ids: every chunk of those memories)."""
    if not chunk_ids:
        return []
    clause, params = where.sql()
    body, title, joins = _scored_columns(terms)
    with content_read_connection().cursor() as cursor:
        cursor.execute(
            f"""
            SELECT c.id, c.memory_id, c.index, c.text, 1 - (c.embedding <=> %s::vector),
                   ARRAY[{body}]::boolean[], ARRAY[{title}]::boolean[], c.status = 'superseded', false,
                   {_MEMORY_COLUMNS}
              FROM memories_memorychunk AS c JOIN memories_memory AS m ON m.id = c.memory_id {joins}
             WHERE {"c.memory_id" if of_memories else "c.id"} = ANY(%s) AND {clause}
            """,  # noqa: S608 - fixed fragments; values are parameters
            [vector_literal(query_vector), *terms, *terms, list(chunk_ids), *params],
        )
        rows = cursor.fetchall()
    return [_scored_chunk(r, bool(terms)) for r in rows]


# The memory row's read-rule columns (MemoryRow) and the chunk's vector in pgvector's binary form
# (`vector_send`: int16 dimensions, int16 unused, big-endian float4s) — bytes decode far faster than
# the vector's text form parses. The moments come as microseconds since the epoch (exact): Django's
# timestamptz loader parses text in Python, ~3 µs a value, 120 values a recall.
_MEMORY_COLUMNS = (
    "m.organization_id, m.scope_id, m.clearance_rank, m.status, "
    "(extract(epoch FROM m.valid_from) * 1000000)::int8, (extract(epoch FROM m.valid_until) * 1000000)::int8, "
    "vector_send(c.embedding)"
)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _moment(microseconds: int) -> datetime:
    return _EPOCH + timedelta(microseconds=microseconds)


def _scored_columns(terms: Sequence[str]) -> tuple[str, str, str]:
    """The per-term body and title/tags match arrays of a scored chunk (`c`), and the join they need:
    the title/tags part of the full-text vector, filtered once per chunk (`ts_filter` per term was
    the costliest part of scoring; OFFSET 0 keeps the planner from folding it back into each use)."""
    if not terms:
        return "NULL::boolean", "NULL::boolean", ""
    body = ", ".join([f"c.search_vector @@ {_TERM_QUERY}"] * len(terms))
    title = ", ".join([f"t.tv @@ {_TERM_QUERY}"] * len(terms))
    return body, title, "CROSS JOIN LATERAL (SELECT ts_filter(c.search_vector, '{a}') AS tv OFFSET 0) AS t"


def _scored_chunk(row: Sequence[Any], has_terms: bool) -> ScoredChunk:
    return ScoredChunk(
        chunk_id=row[0],
        memory_id=row[1],
        index=row[2],
        text=row[3],
        # A chunk without a vector (mid re-embed) still has its lexical signal.
        similarity=float(row[4]) if row[4] is not None else 0.0,
        body_hits=tuple(bool(x) for x in row[5]) if has_terms else (),
        title_hits=tuple(bool(x) for x in row[6]) if has_terms else (),
        superseded=bool(row[7]),
        from_dense=bool(row[8]),
        memory=MemoryRow(
            row[1], row[9], row[10], row[11], row[12], _moment(row[13]), None if row[14] is None else _moment(row[14])
        ),
        embedding=None if row[15] is None else np.frombuffer(row[15], dtype=">f4", offset=4).astype(np.float64),
    )


def retrieve(
    query_vector: np.ndarray,
    terms: Sequence[str],
    weights: Sequence[float],
    where: ChunkFilter,
    *,
    dense_k: int,
    lexical_k: int,
    common: Sequence[bool] | None = None,
    exact: bool = False,
) -> list[ScoredChunk]:
    """The candidates of one recall, scored, in one statement: the `dense_k` nearest chunks (as
    `dense_hits`) and the `lexical_k` lexical ones (as `lexical_hits`), each with what `score_chunks`
    gives, ordered by chunk id. One round trip (see _index_settings), where separate queries and
    an explicit transaction took six."""
    clause, params = where.sql(inline=True)
    literal = vector_literal(query_vector)
    lexical = _lexical_select(terms, weights, where, lexical_k, common, inline=True)
    lexical_cte, lexical_params = (f", lexical AS MATERIALIZED ({lexical[0]})", lexical[1]) if lexical else ("", [])
    lexical_union = " UNION SELECT id FROM lexical" if lexical else ""
    body, title, joins = _scored_columns(terms)
    statement = f"""
        WITH dense AS MATERIALIZED (
            SELECT c.id FROM memories_memorychunk AS c
             WHERE {clause} AND c.embedding IS NOT NULL
             ORDER BY c.embedding <=> %s::vector
             LIMIT {int(dense_k)}
        ){lexical_cte}
        SELECT c.id, c.memory_id, c.index, c.text, 1 - (c.embedding <=> %s::vector),
               ARRAY[{body}]::boolean[], ARRAY[{title}]::boolean[], c.status = 'superseded',
               c.id IN (SELECT id FROM dense), {_MEMORY_COLUMNS}
          FROM memories_memorychunk AS c JOIN memories_memory AS m ON m.id = c.memory_id {joins}
         WHERE c.id IN (SELECT id FROM dense{lexical_union}) AND {clause}
         ORDER BY c.id
        """  # noqa: S608 - fixed fragments and integers; values are parameters
    rows = prepared.fetch(
        content_read_connection(),
        statement,
        [*params, literal, *lexical_params, literal, *terms, *terms, *params],
        planner_settings=_index_settings(dense_k, where, exact=exact),
        # The exact path (the benchmark's ground truth) is sent whole: a plan made once would keep the
        # index scan that its enable_indexscan = off is there to forbid.
        prepare=not exact,
    )
    return [_scored_chunk(r, bool(terms)) for r in rows]


def memories_with_authors(memory_ids: Sequence[Any]) -> dict[Any, Memory]:
    """`Memory.objects.select_related("author").in_bulk(memory_ids)` as one hand-written statement:
    building and compiling that queryset took about half of the ~1 ms it cost a recall (the
    statement itself is a few index lookups). Read where the ORM would read it (a replica on its
    routes), through the same converters (cortex_site/model_rows.py)."""
    connection = content_read_connection()
    memories, people = row_reader(Memory, connection), row_reader(User, connection)
    memory_table, memory_columns = table_and_columns(Memory, memories.fields, connection, alias="m")
    people_table, people_columns = table_and_columns(User, people.fields, connection, alias="u")
    quote = connection.ops.quote_name
    author = Memory._meta.get_field("author")
    join = f"u.{quote(str(User._meta.pk.column))} = m.{quote(str(author.column))}"
    statement = (
        f"SELECT {memory_columns}, {people_columns} FROM {memory_table} AS m "  # noqa: S608 - the models' own names
        f"LEFT JOIN {people_table} AS u ON {join} WHERE m.{quote(str(Memory._meta.pk.column))} = ANY(%s)"
    )
    rows = prepared.fetch(connection, statement, [list(memory_ids)])
    found: dict[Any, Memory] = {}
    split = len(memories.fields)
    person_id = split + people.fields.index(User._meta.pk)
    for row in rows:
        memory = memories.read(row[:split], connection)
        # No author, or one deleted since (the join found nobody): None, as select_related gives.
        author.set_cached_value(memory, people.read(row[split:], connection) if row[person_id] is not None else None)
        found[memory.pk] = memory
    return found


def current_versions(memory_ids: Sequence[Any], max_hops: int = 20) -> dict[Any, Any]:
    """For superseded memories: the active memory at the end of each one's supersession chain
    (absent when the chain ends elsewhere, e.g. in a redaction). One recursive query; callers
    filter the results by permission (they are ids only)."""
    if not memory_ids:
        return {}
    with content_read_connection().cursor() as cursor:
        cursor.execute(
            """
            WITH RECURSIVE chain(start_id, memory_id, status, hops) AS (
                SELECT m.id, m.superseded_by_id, NULL::varchar, 0 FROM memories_memory AS m
                 WHERE m.id = ANY(%s) AND m.status = 'superseded' AND m.superseded_by_id IS NOT NULL
                UNION ALL
                SELECT chain.start_id, m.superseded_by_id, m.status, chain.hops + 1
                  FROM chain JOIN memories_memory AS m ON m.id = chain.memory_id
                 WHERE m.status = 'superseded' AND m.superseded_by_id IS NOT NULL AND chain.hops < %s
            )
            SELECT chain.start_id, m.id FROM chain JOIN memories_memory AS m ON m.id = chain.memory_id
             WHERE m.status = 'active'
            """,
            [list(memory_ids), max_hops],
        )
        return {row[0]: row[1] for row in cursor.fetchall()}


def typo_corrections(rule: ChunkFilter, variants: Sequence[str], cap: int) -> tuple[dict[str, str], dict[str, int]]:
    """Typo candidates and their visible frequencies, in one round trip: spelling → lexeme for every
    variant that stems to a lexeme some chunk the reader may see contains, and for one spelling per
    lexeme (the first in code-point order) how many of those visible chunks contain it, up to `cap`,
    as `term_document_frequencies` counts — both from memories_termcount, under the reader's read
    rule: a word only hidden memories hold proposes nothing."""
    if not variants:
        return {}, {}
    with content_read_connection().cursor() as cursor:
        cursor.execute(
            f"""
            WITH spelled AS MATERIALIZED (
                SELECT v.spelling, (ts_lexize('english_stem', v.spelling))[1] AS lexeme FROM unnest(%s::text[]) AS v(spelling)
            )
            SELECT sp.spelling, sp.lexeme, least(counted.chunks, %s)
              FROM spelled AS sp
              JOIN (
                  SELECT s.lexeme, sum(s.chunks) AS chunks FROM memories_termcount AS s
                   WHERE {_visible_cells(rule)} AND s.lexeme IN (SELECT lexeme FROM spelled)
                   GROUP BY s.lexeme HAVING sum(s.chunks) > 0
              ) AS counted ON counted.lexeme = sp.lexeme
            """,  # noqa: S608 - fixed fragments; values are parameters
            [list(variants), cap],
        )
        rows = cursor.fetchall()
    known = {spelling: lexeme for spelling, lexeme, _ in rows}
    counts = {lexeme: int(chunks) for _, lexeme, chunks in rows}
    first: dict[str, str] = {}
    for spelling, lexeme in sorted(known.items()):
        first.setdefault(lexeme, spelling)
    return known, {spelling: counts[lexeme] for lexeme, spelling in first.items()}

"""Recall latency, HNSW agreement and ingest throughput on synthetic corpora (not a test).

    make bench                                    # everything: starts embedded services, runs, stops them
    .venv/bin/python bench/recall.py --sizes 10000 --queries 200 --ingest 200    # a quicker run

What it measures (docs/benchmarks.md has the numbers and how to read them):

- **recall latency**: `recall()` server-side time without the query embedding
  (`RecallResult.timings["search_ms"]`), p50/p95 over the queries, for an Executive who sees
  every memory and a Contractor who sees ~10% (public-docs at the lowest clearance);
  the same with `exact=True` (no HNSW index);
- **brute force in numpy** over exactly the chunks that principal may see: time per query and
  its top-10 memories;
- **agreement@10**: overlap of the dense top-10 memories of the index path
  (`memories.retrieval.sql.dense_hits`) with the numpy top-10, and of the final `recall()`
  top-10 with `recall(exact=True)`;
- **ingest**: memories/s through the real write pipeline with the `hash` and the `local`
  embedder (300–800 characters each): `memory_create`, one memory per call, and
  `memory_create_many` in batches of 25, as `cortex import` writes JSONL;
- **writes into a scope with its own indexes** (`--indexed-writes`): batches into such a
  scope with its vector and full-text indexes and without them, alternating, each rolled back.

Before measuring, each corpus gets the per-scope vector and full-text indexes beat's sync would give it
(memories/services/scope_indexes.py); the first run on a corpus builds them.

How the corpora are loaded: memories come from bench/synthetic.py (seeded); they are chunked by
the real chunker, embedded with the `hash` embedder (what Cortex is configured with in that
phase) on the exact text the write pipeline embeds, and written with COPY straight into
memories_memory / memories_memorychunk (full-text vectors computed in SQL as the pipeline does),
with the HNSW and GIN indexes dropped during the load and rebuilt afterwards. Each corpus gets
its own database on the same server (cortex_bench_recall_<size>), kept between runs
(`--reload` rebuilds it); each ingest run uses a new organization in cortex_bench_ingest_<embedder>.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import math
import os
import platform
import pstats
import re
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

import harness  # noqa: E402

SEED = 20251115
INGEST_SEED = 7
TOP = 10
HOME = Path(os.environ.get("CORTEX_BENCH_HOME") or Path(tempfile.gettempdir()) / "cortex-bench").resolve()


# -- driver (no Django here: each phase runs in a child with its own settings) --------------------------
def machine() -> dict[str, Any]:
    cpu = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        ),
        platform.processor(),
    )
    mem_kb = next(
        (int(line.split()[1]) for line in Path("/proc/meminfo").read_text().splitlines() if line.startswith("MemTotal")), 0
    )
    return {"nproc": os.cpu_count(), "cpu": cpu, "ram_gib": round(mem_kb / 1024 / 1024, 1), "python": platform.python_version()}


def database_url(base: str, name: str) -> str:
    parts = urlsplit(base)
    return urlunsplit((parts.scheme, parts.netloc, "/" + name, parts.query, parts.fragment))


def run_phase(env: dict[str, str], *args: str) -> dict[str, Any]:
    return harness.run_phase(Path(__file__).resolve(), env, *args)


def drive(args: argparse.Namespace) -> int:
    from cortex_site.runner import embedded_services

    HOME.mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = {"machine": machine(), "started": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "phases": []}
    with embedded_services(HOME) as services:
        base = {**os.environ, **services}
        base.update(
            DJANGO_SETTINGS_MODULE="cortex_site.settings",
            CORTEX_HOME=str(HOME),
            SECRET_KEY=base.get("SECRET_KEY") or "bench-only-secret-key",
            CELERY_TASK_ALWAYS_EAGER="0",  # the request path only enqueues post-write work, as in production
            PYTHONUNBUFFERED="1",
        )
        if args.ingest:
            for embedder in args.embedders:
                env = {
                    **base,
                    "CORTEX_EMBEDDER": embedder,
                    "DATABASE_URL": database_url(base["DATABASE_URL"], f"cortex_bench_ingest_{embedder}"),
                }
                results["phases"].append(run_phase(env, "ingest", embedder, str(args.ingest)))
        for size in args.sizes:
            name = f"cortex_bench_recall_{size}" + ("" if args.recall_embedder == "hash" else f"_{args.recall_embedder}")
            env = {**base, "CORTEX_EMBEDDER": args.recall_embedder, "DATABASE_URL": database_url(base["DATABASE_URL"], name)}
            extra = ["--reload"] if args.reload else []
            if args.capture:
                extra += ["--capture", str(Path(args.capture).resolve())]
            if args.indexed_writes:
                extra += ["--indexed-writes"]
            results["phases"].append(run_phase(env, "recall", str(size), str(args.queries), *extra))
    output = Path(args.json or HOME / "results.json")
    output.write_text(json.dumps(results, indent=2))
    print(f"\nresults written to {output}")
    print(summary(results))
    return 0


def summary(results: dict[str, Any]) -> str:
    lines = [f"machine: {results['machine']}"]
    for phase in results["phases"]:
        if phase["phase"] == "ingest":
            lines.append(
                f"ingest {phase['embedder']:>5}: {phase['memories_per_s']:.1f} memories/s "
                f"(p50 {phase['write_ms']['p50']:.1f} ms, p95 {phase['write_ms']['p95']:.1f} ms per memory; "
                f"embedding alone {phase['embed_only_per_s']:.1f}/s; batches "
                f"of {phase['bulk_batch']} through memory_create_many: "
                f"{phase['bulk_memories_per_s']:.1f} memories/s; load {phase['loadavg']})"
            )
        else:
            lines.append(
                f"corpus {phase['size']:,} memories ({phase['embedder']}) / {phase['chunks']:,} "
                f"chunks (load {phase['load_s']:.0f}s, loadavg {phase['loadavg']})"
            )
            for who, m in phase["principals"].items():
                lines.append(
                    f"  {who:<10} visible {m['visible_memories']:>6,}  recall search "
                    f"p50 {m['search_ms']['p50']:.1f} p95 {m['search_ms']['p95']:.1f} ms"
                    f" | exact recall p50 {m['exact_search_ms']['p50']:.1f} p95 {m['exact_search_ms']['p95']:.1f}"
                    f" | dense index p50 {m['dense_index_ms']['p50']:.1f} p95 {m['dense_index_ms']['p95']:.1f}"
                    f" | numpy p50 {m['numpy_ms']['p50']:.1f} p95 {m['numpy_ms']['p95']:.1f}"
                    f" | agreement@10 dense {m['agreement_dense_at_10']:.3f} (text queries {m['agreement_dense_text_queries']}, "
                    f"identifier-only {m['agreement_dense_identifier_queries']}; "
                    f"sql exact vs numpy {m['agreement_sql_exact_vs_numpy']:.3f})"
                    f", final {m['agreement_final_at_10']:.3f}"
                )
                lines.append(
                    f"  {'':<10} SQL statements p50 {m['sql_statements']['p50']:.0f} max {m['sql_statements']['max']:.0f}; "
                    "phases p50/p95 ms: "
                    + ", ".join(f"{k.removesuffix('_ms')} {v['p50']:.1f}/{v['p95']:.1f}" for k, v in m["phases_ms"].items())
                )
    return "\n".join(lines)


# -- phases (children: Django configured from the environment) -----------------------------------------
def percentiles(values: Sequence[float]) -> dict[str, float]:
    ordered = sorted(values)

    def pick(q: float) -> float:
        return ordered[max(0, math.ceil(q * len(ordered)) - 1)]  # nearest rank

    return {
        "p50": round(statistics.median(ordered), 2),
        "p95": round(pick(0.95), 2),
        "max": round(ordered[-1], 2),
        "n": len(ordered),
    }


def loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def ensure_database() -> None:
    """Create this phase's database (on the same server) when it does not exist yet."""
    import psycopg

    url = os.environ["DATABASE_URL"]
    name = urlsplit(url).path.lstrip("/")
    with psycopg.connect(database_url(url, "postgres"), autocommit=True) as conn:
        if conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone() is None:
            conn.execute(f'CREATE DATABASE "{name}"')


def drop_database() -> None:
    import psycopg

    url = os.environ["DATABASE_URL"]
    name = urlsplit(url).path.lstrip("/")
    with psycopg.connect(database_url(url, "postgres"), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def setup_django(reload: bool = False) -> None:
    if reload:
        drop_database()
    ensure_database()
    import django

    django.setup()
    from django.core.cache import cache
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    # Every bench database has organization id 1 and they share one Redis: cached term
    # frequencies of one corpus must not leak into the next.
    cache.clear()


def make_org(slug: str) -> tuple[Any, Any, Any]:
    """The organization with every synthetic scope, an Executive who reads all, a Contractor."""
    from synthetic import SCOPES

    from memories.access import Principal
    from memories.models import Membership, Scope
    from memories.services import tenancy

    org = tenancy.organization_create(slug=slug)
    for scope_slug, _share in SCOPES:
        if scope_slug != "public-docs":
            tenancy.scope_create(organization=org, slug=scope_slug, visibility=Scope.Visibility.GRANTED)
    executive = tenancy.member_add(
        organization=org, email=f"exec@{slug}.bench", clearance="Executive", role=Membership.Role.ADMIN
    )
    for scope in Scope.objects.filter(organization=org):
        tenancy.grant_set(membership=executive, scope=scope, can_write=True)
    contractor = tenancy.member_add(
        organization=org, email=f"contractor@{slug}.bench", clearance="Contractor", role=Membership.Role.MEMBER
    )

    def principal(membership: Any) -> Principal:
        return Principal(Membership.objects.select_related("organization", "user").get(pk=membership.pk))

    return org, principal(executive), principal(contractor)


# -- ingest -------------------------------------------------------------------------------------------
BULK_BATCH = 25


def phase_ingest(embedder_name: str, count: int) -> dict[str, Any]:
    setup_django()
    from synthetic import memory

    from memories.chunking import chunk_text
    from memories.embeddings.factory import get_embedder
    from memories.services.memories import MemoryDraft, WriteResult, embedding_text, memory_create, memory_create_many

    slug = f"ingest-{time.strftime('%Y%m%d-%H%M%S')}"
    _org, writer, _ = make_org(slug)
    embedder = get_embedder()
    salt = int(time.time())  # new texts every run: nothing may be deduplicated
    items = [memory(INGEST_SEED + salt, i, allow_long=False) for i in range(count + 5)]

    def draft(m: Any) -> MemoryDraft:
        return MemoryDraft(title=m.title, content=m.content, scope=m.scope, category=m.category, source=m.source, tags=m.tags)

    for m in items[:5]:  # warm-up: model load, connections, caches
        memory_create(principal=writer, draft=draft(m))
    timed = items[5:]
    before = loadavg()
    latencies = []
    started = time.perf_counter()
    for m in timed:
        t0 = time.perf_counter()
        result = memory_create(principal=writer, draft=draft(m))
        latencies.append((time.perf_counter() - t0) * 1000)
        assert not result.deduplicated
    total = time.perf_counter() - started
    # The same number of new memories in batches through memory_create_many (what `cortex import`
    # does with JSONL): one embedding call and one commit per batch.
    batched = [memory(INGEST_SEED + salt + 1, i, allow_long=False) for i in range(len(timed))]
    started = time.perf_counter()
    for start in range(0, len(batched), BULK_BATCH):
        outcomes = memory_create_many(principal=writer, drafts=[draft(m) for m in batched[start : start + BULK_BATCH]])
        assert all(isinstance(o, WriteResult) and not o.deduplicated for o in outcomes), outcomes
    bulk_total = time.perf_counter() - started
    # The embedding alone, one call per memory as the pipeline makes it, for the same texts.
    texts = [[embedding_text(m.title, c.text) for c in chunk_text(m.content)] for m in timed]
    t0 = time.perf_counter()
    for group in texts:
        embedder.embed(group)
    embed_only = time.perf_counter() - t0
    return {
        "phase": "ingest",
        "embedder": f"{embedder.name}:{embedder.model} ({embedder.dim})",
        "memories": len(timed),
        "mean_chars": round(statistics.mean(len(m.content) for m in timed)),
        "seconds": round(total, 2),
        "memories_per_s": round(len(timed) / total, 1),
        "write_ms": percentiles(latencies),
        "bulk_batch": BULK_BATCH,
        "bulk_memories_per_s": round(len(batched) / bulk_total, 1),
        "embed_only_per_s": round(len(timed) / embed_only, 1),
        "embed_only_ms_mean": round(embed_only / len(timed) * 1000, 2),
        "loadavg": f"{before} → {loadavg()}",
    }


# -- recall corpus ------------------------------------------------------------------------------------
def _embed_batch(texts: list[str]) -> Any:
    from memories.embeddings.factory import get_embedder

    return get_embedder().embed(texts)


def corpus_vectors(size: int, texts: list[str]) -> Any:
    """The chunk vectors of the corpus, computed in parallel once and cached under the bench home."""
    import multiprocessing

    import numpy as np

    from memories.embeddings.factory import get_embedder

    embedder = get_embedder()
    cache = HOME / f"vectors-{SEED}-{size}-{embedder.name}-{embedder.model}-{embedder.dim}.npy"
    if cache.exists():
        vectors = np.load(cache)
        if vectors.shape == (len(texts), embedder.dim):
            return vectors
    from django.db import connections

    batches = [texts[i : i + 2000] for i in range(0, len(texts), 2000)]
    if embedder.name == "local":
        # onnxruntime already uses every core; one process, batch after batch.
        parts = []
        for number, batch in enumerate(batches, start=1):
            parts.append(embedder.embed(batch))
            print(f"  {min(number * 2000, len(texts)):,} / {len(texts):,}", flush=True)
        vectors = np.vstack(parts)
    else:
        connections.close_all()  # forked workers must not share the parent's database socket
        with multiprocessing.get_context("fork").Pool(os.cpu_count() or 1) as pool:
            vectors = np.vstack(pool.map(_embed_batch, batches))
    np.save(cache, vectors)
    return vectors


def load_corpus(size: int) -> tuple[Any, Any, Any, float]:
    import psycopg
    from django.db import connection
    from django.utils import timezone
    from synthetic import memory

    from memories.chunking import chunk_text
    from memories.embeddings.factory import get_embedder
    from memories.embeddings.store import check_signature
    from memories.models import Memory, MemoryChunk, Scope
    from memories.retrieval.sql import vector_literal
    from memories.services.memories import content_hash, embedding_text

    started = time.perf_counter()
    org, executive, contractor = make_org(f"bench-{size}")
    check_signature(get_embedder(), record_if_missing=True)
    scopes = dict(Scope.objects.filter(organization=org).values_list("slug", "id"))
    now = timezone.now()
    print(f"generating {size:,} memories", flush=True)
    items = [memory(SEED, i) for i in range(size)]
    chunks = [(i, c) for i, m in enumerate(items) for c in chunk_text(m.content)]
    print(f"embedding {len(chunks):,} chunks with {get_embedder().name} ({os.cpu_count()} processes)", flush=True)
    t0 = time.perf_counter()
    vectors = corpus_vectors(size, [embedding_text(items[i].title, c.text) for i, c in chunks])
    print(f"  {time.perf_counter() - t0:.0f}s", flush=True)

    ids = [uuid.uuid5(uuid.NAMESPACE_URL, f"cortex-bench:{SEED}:{i}") for i in range(size)]
    fields = list(Memory._meta.concrete_fields)
    user_id = executive.user.pk

    def memory_row(i: int) -> list[Any]:
        m = items[i]
        valid_from = now - timedelta(days=m.age_days)
        values = {
            "id": ids[i],
            "organization_id": org.pk,
            "scope_id": scopes[m.scope],
            "title": m.title,
            "content": m.content,
            "category": m.category,
            "source": m.source,
            "created_by_id": user_id,
            "author_id": user_id,
            "tags": m.tags,
            "clearance_rank": m.clearance_rank,
            "status": "active",
            "valid_from": valid_from,
            "valid_until": valid_from + (now - valid_from) / 2 if m.expired else None,
            "created_at": valid_from,
            "updated_at": valid_from,
            "content_hash": content_hash(m.content),
        }
        return [values[f.attname] if f.attname in values else f.get_default() for f in fields]

    print("writing with COPY", flush=True)
    t0 = time.perf_counter()
    chunk_table = MemoryChunk._meta.db_table
    with psycopg.connect(os.environ["DATABASE_URL"]) as conn:
        conn.execute("DROP INDEX IF EXISTS chunk_embedding_hnsw")
        conn.execute("DROP INDEX IF EXISTS chunk_search_gin")
        columns = ", ".join(f'"{f.column}"' for f in fields)
        with conn.cursor() as cur, cur.copy(f"COPY {Memory._meta.db_table} ({columns}) FROM STDIN") as copy:
            for i in range(size):
                copy.write_row(memory_row(i))
        conn.execute(
            "CREATE TEMP TABLE staging (memory_id uuid, idx int, char_start "
            "int, char_end int, text text, embedding text) ON COMMIT DROP"
        )
        with conn.cursor() as cur, cur.copy("COPY staging FROM STDIN") as copy:
            for (i, c), vector in zip(chunks, vectors, strict=True):
                copy.write_row([ids[i], c.index, c.start, c.end, c.text, vector_literal(vector)])
        # The same full-text vector as memories.services.memories.pipeline.index_chunks.
        conn.execute(
            f"""
            INSERT INTO {chunk_table} (memory_id, index, char_start, char_end, text, embedding, search_vector,
                                       organization_id, scope_id, clearance_rank, status, valid_from, valid_until,
                                       category, source, tags)
            SELECT s.memory_id, s.idx, s.char_start, s.char_end, s.text, s.embedding::vector,
                   setweight(to_tsvector('english', m.title), 'A')
                   || setweight(to_tsvector('english', array_to_string(m.tags, ' ')), 'A')
                   || setweight(to_tsvector('english', s.text), 'B'),
                   m.organization_id, m.scope_id, m.clearance_rank, m.status, m.valid_from, m.valid_until,
                   m.category, m.source, m.tags
              FROM staging AS s JOIN {Memory._meta.db_table} AS m ON m.id = s.memory_id
            """  # noqa: S608 - model table names
        )
        conn.commit()
    print(f"  {time.perf_counter() - t0:.0f}s; building indexes", flush=True)
    t0 = time.perf_counter()
    with connection.cursor() as cursor:
        # The HNSW graph is built in memory while it fits maintenance_work_mem and much more slowly
        # once it does not (~2.5 GB at 1M memories); the embedded server's 256 MB is for a running Cortex.
        cursor.execute("SET maintenance_work_mem = %s", [f"{max(256, len(chunks) * 3 // 1000)}MB"])
    with connection.schema_editor() as editor:
        for index in MemoryChunk._meta.indexes:
            if index.name in {"chunk_embedding_hnsw", "chunk_search_gin"}:
                editor.add_index(MemoryChunk, index)
    with connection.cursor() as cursor:
        cursor.execute(f"ANALYZE {Memory._meta.db_table}")
        cursor.execute(f"ANALYZE {chunk_table}")
    print(f"  {time.perf_counter() - t0:.0f}s", flush=True)
    return org, executive, contractor, time.perf_counter() - started


def phase_recall(
    size: int, query_count: int, reload: bool, capture: str | None = None, indexed_writes: bool = False
) -> dict[str, Any]:
    setup_django(reload=reload)
    from memories.embeddings.factory import get_embedder
    from memories.models import Membership, MemoryChunk, Organization

    slug = f"bench-{size}"
    org = Organization.objects.filter(slug=slug).first()
    if org is None:
        org, executive, contractor, load_s = load_corpus(size)
    else:
        from memories.access import Principal

        def principal(email: str) -> Principal:
            return Principal(Membership.objects.select_related("organization", "user").get(organization=org, user__email=email))

        executive, contractor, load_s = principal(f"exec@{slug}.bench"), principal(f"contractor@{slug}.bench"), 0.0
        print(f"reusing the loaded corpus {slug} (--reload rebuilds it)", flush=True)
    # What beat's scope index sync does on a running server: a vector and a full-text index per large scope
    # (the first run on a corpus builds them; later ones find them).
    from memories.services.scope_indexes import scope_indexes_sync

    started = time.perf_counter()
    synced = scope_indexes_sync()
    indexes = {"built": len(synced.built), "kept": len(synced.kept), "seconds": round(time.perf_counter() - started, 1)}
    print(f"scope indexes: {indexes['built']} built, {indexes['kept']} kept ({indexes['seconds']} s)", flush=True)
    result: dict[str, Any] = {
        "phase": "recall",
        "size": size,
        "scope_indexes": indexes,
        "embedder": "{0.name}:{0.model} ({0.dim})".format(get_embedder()),
        "chunks": MemoryChunk.objects.filter(organization=org).count(),
        "load_s": round(load_s, 1),
        "principals": {},
    }
    before = loadavg()
    matrix = visible_matrix(org.pk)
    for who, principal in (("Executive", executive), ("Contractor", contractor)):
        print(f"measuring {who}", flush=True)
        result["principals"][who] = measure(principal, size, query_count, matrix)
    result["loadavg"] = f"{before} → {loadavg()}"
    if capture:
        capture_results(Path(capture), size, query_count, {"Executive": executive, "Contractor": contractor})
    if indexed_writes:
        result["indexed_scope_writes"] = measure_indexed_scope_writes(executive)
    return result


INDEXED_WRITES = 500


def measure_indexed_scope_writes(writer: Any) -> dict[str, Any] | None:
    """What a scope's own indexes (vector and full-text) cost its writers: INDEXED_WRITES new memories into
    the first scope that has them, in batches of BULK_BATCH through memory_create_many, with the indexes and
    without them (dropped inside the transaction), each run rolled back so the corpus stays as it was (the batches commit
    as savepoints: no fsync per batch, in both runs alike)."""
    from django.db import connection, transaction
    from synthetic import memory

    from memories.models import Memory, MemoryChunk, Scope
    from memories.services.memories import MemoryDraft, memory_create_many
    from memories.services.scope_indexes import KINDS, index_name, scope_indexes

    present = scope_indexes()
    indexed = [scope_id for scope_id, _ in present if all(present.get((scope_id, kind)) for kind in KINDS)]
    scope = Scope.objects.filter(pk__in=indexed, organization_id=writer.organization_id).order_by("pk").first()
    if scope is None:
        return None
    salt = int(time.time())
    rates: dict[str, list[float]] = {"without_index": [], "with_index": []}
    for attempt, with_index in enumerate((False, True, False, True)):  # alternating: neither run always goes first
        items = [memory(INGEST_SEED + salt + attempt, i, allow_long=False) for i in range(INDEXED_WRITES)]
        drafts = [MemoryDraft(title=m.title, content=m.content, scope=scope.slug, category=m.category) for m in items]
        with transaction.atomic():
            if not with_index:
                with connection.cursor() as cursor:
                    cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
                    for kind in KINDS:
                        cursor.execute(f"DROP INDEX {index_name(scope.pk, kind)}")
            started = time.perf_counter()
            for start in range(0, len(drafts), BULK_BATCH):
                memory_create_many(principal=writer, drafts=drafts[start : start + BULK_BATCH])
            rates["with_index" if with_index else "without_index"].append(round(len(drafts) / (time.perf_counter() - started), 1))
            transaction.set_rollback(True)
    # The rolled-back rows are dead tuples the HNSW graphs still point at: cleaned now, so that they change
    # no later measurement of this corpus.
    with connection.cursor() as cursor:
        cursor.execute(f"VACUUM {Memory._meta.db_table}, {MemoryChunk._meta.db_table}")
    print(f"writes into {scope.slug} with its own indexes and without (memories/s): {rates}", flush=True)
    return {"scope": scope.slug, "memories": INDEXED_WRITES, "memories_per_s": rates}


# A fixed moment for captured results: recency (and so every score) depends on the time of the
# query, and two captures hours apart must compare equal when the ranking code did not change.
CAPTURE_MOMENT = "2027-01-01T00:00:00+00:00"


def capture_results(path: Path, size: int, query_count: int, principals: dict[str, Any]) -> None:
    """Every hit field of the top-10 of each bench query, per principal, at CAPTURE_MOMENT; with
    `path` already there (an earlier capture), the differences from it are printed instead of
    overwriting it (0 differences, or each one a float difference of at most 1e-9)."""
    from datetime import datetime
    from unittest import mock

    from synthetic import query

    from memories.selectors.recall import RecallQuery, recall

    moment = datetime.fromisoformat(CAPTURE_MOMENT)
    captured: dict[str, list[list[dict[str, Any]]]] = {}
    with mock.patch("django.utils.timezone.now", return_value=moment):
        for who, principal in principals.items():
            captured[who] = [
                [
                    {
                        "id": str(h.memory.pk),
                        "score": h.score,
                        "relevance": h.relevance,
                        "recency": h.recency,
                        "snippet": h.snippet,
                        "chunk_index": h.chunk_index,
                        "dense": h.dense,
                        "lexical": h.lexical,
                        "match": h.match,
                        "confidence": str(h.confidence),
                        "earlier_version": str(h.earlier_version.pk) if h.earlier_version else None,
                    }
                    for h in recall(principal, RecallQuery(query(SEED, i, size), limit=TOP), audit=False).hits
                ]
                for i in range(query_count)
            ]
    if not path.exists():
        path.write_text(json.dumps(captured, indent=1))
        print(f"captured the top-{TOP} of {query_count} queries per principal into {path}", flush=True)
        return
    print(compare_captures(json.loads(path.read_text()), captured), flush=True)


def compare_captures(before: dict[str, Any], after: dict[str, Any]) -> str:
    differences, largest = [], 0.0
    for who, queries in before.items():
        for number, (old, new) in enumerate(zip(queries, after[who], strict=True)):
            if [h["id"] for h in old] != [h["id"] for h in new]:
                differences.append(f"{who} query {number}: ids {[h['id'][:8] for h in old]} → {[h['id'][:8] for h in new]}")
                continue
            for rank, (a, b) in enumerate(zip(old, new, strict=True)):
                for key, value in a.items():
                    if isinstance(value, float) and isinstance(b[key], float):
                        largest = max(largest, abs(value - b[key]))
                        if abs(value - b[key]) <= 1e-9:
                            continue
                    if value != b[key]:
                        differences.append(f"{who} query {number} rank {rank}: {key} {value!r} → {b[key]!r}")
    lines = [f"capture comparison: {len(differences)} differences (largest float difference {largest:.2e})"]
    return "\n".join(lines + differences[:40])


def visible_matrix(organization_id: int) -> dict[str, Any]:
    """Every chunk of the organization with what the read rule needs, for numpy brute force."""
    import numpy as np
    import psycopg
    from pgvector.psycopg import register_vector

    with psycopg.connect(os.environ["DATABASE_URL"]) as conn:
        register_vector(conn)
        rows = conn.execute(
            "SELECT memory_id, scope_id, clearance_rank, status, valid_until, "
            "embedding FROM memories_memorychunk WHERE organization_id = %s ORDER BY id",
            [organization_id],
        ).fetchall()
    return {
        "memory": np.array([r[0] for r in rows], dtype=object),
        "scope": np.array([r[1] for r in rows]),
        "rank": np.array([r[2] for r in rows]),
        "active": np.array([r[3] == "active" for r in rows]),
        "valid_until": [r[4] for r in rows],
        "vectors": np.vstack([r[5].to_numpy() for r in rows]).astype(np.float32),
    }


def top_memories(ranked_memory_ids: Iterator[Any], k: int = TOP) -> list[Any]:
    seen: list[Any] = []
    for memory_id in ranked_memory_ids:
        if memory_id not in seen:
            seen.append(memory_id)
            if len(seen) == k:
                break
    return seen


def measure(principal: Any, size: int, query_count: int, data: dict[str, Any]) -> dict[str, Any]:
    import numpy as np
    from django.utils import timezone
    from synthetic import query

    from memories.embeddings.factory import get_embedder
    from memories.retrieval import sql
    from memories.retrieval.terms import normalise_query
    from memories.selectors.recall import RecallQuery, recall

    embedder = get_embedder()
    now = timezone.now()
    readable = principal.readable_scope_ids
    not_expired = np.array([v is None or v > now for v in data["valid_until"]])
    mask = np.isin(data["scope"], list(readable)) & (data["rank"] <= principal.clearance_rank) & data["active"] & not_expired
    vectors = np.ascontiguousarray(data["vectors"][mask])
    memory_ids = data["memory"][mask]
    where = sql.ChunkFilter(
        organization_id=principal.organization_id, scope_ids=sorted(readable), clearance_rank=principal.clearance_rank, moment=now
    )

    def dense_top(vector: Any, exact: bool) -> list[Any]:
        pool = 40  # what recall() asks for first, widened the same way
        hits = sql.dense_hits(vector, where, pool, exact=exact)
        while len({h.memory_id for h in hits}) < TOP and len(hits) == pool and pool < 2000:
            pool *= 4
            hits = sql.dense_hits(vector, where, pool, exact=exact)
        return top_memories(h.memory_id for h in hits)

    def numpy_top(vector: Any) -> list[Any]:
        scores = vectors @ vector
        k = min(len(scores), 200)
        best = np.argpartition(-scores, k - 1)[:k]
        ordered = best[np.argsort(-scores[best], kind="stable")]
        return top_memories(memory_ids[j] for j in ordered)

    for i in range(20):  # warm-up: caches, term frequencies, plans
        recall(principal, RecallQuery(query(SEED, 100_000 + i, size), limit=TOP), audit=False)

    texts = [query(SEED, i, size) for i in range(query_count)]
    vectors_q = [embedder.embed([normalise_query(text)])[0] for text in texts]
    stats: dict[str, list[float]] = {
        k: [] for k in ("search", "took", "embed", "exact_search", "dense_index", "dense_exact", "numpy")
    }
    # 1. the index path alone, as a server runs it (no exact scans in between to churn the caches);
    # per phase (RecallResult.timings) and the SQL statements each recall sends
    final, result_counts = [], []
    phases: dict[str, list[float]] = {}
    statements: list[int] = []
    profiler = cProfile.Profile() if os.environ.get("CORTEX_BENCH_PROFILE") == "1" else None
    if profiler:
        profiler.enable()
    for text in texts:
        with count_statements() as counted:
            found = recall(principal, RecallQuery(text, limit=TOP), audit=False)
        statements.append(counted[0])
        for key, value in found.timings.items():
            if key not in ("embed_ms", "search_ms"):
                phases.setdefault(key, []).append(value)
        stats["search"].append(found.timings["search_ms"])
        stats["embed"].append(found.timings["embed_ms"])
        stats["took"].append(found.took_ms)
        result_counts.append(len(found.hits))
        final.append({h.memory.pk for h in found.hits})
    if profiler:
        profiler.disable()
        pstats.Stats(profiler, stream=sys.stdout).sort_stats("tottime").print_stats(30)
    # 2. the dense top-10 through the index, and by brute force in numpy over the same visible chunks
    index_tops, brute_tops = [], []
    for vector in vectors_q:
        t0 = time.perf_counter()
        index_tops.append(dense_top(vector, exact=False))
        stats["dense_index"].append((time.perf_counter() - t0) * 1000)
        t0 = time.perf_counter()
        brute_tops.append(numpy_top(vector))
        stats["numpy"].append((time.perf_counter() - t0) * 1000)
    # 3. the exact paths (sequential scans)
    agree_final, agree_sql_exact = [], []
    for text, vector, brute, found_ids in zip(texts, vectors_q, brute_tops, final, strict=True):
        exact = recall(principal, RecallQuery(text, limit=TOP), audit=False, exact=True)
        stats["exact_search"].append(exact.timings["search_ms"])
        final_exact = [h.memory.pk for h in exact.hits]
        if final_exact:
            agree_final.append(len(found_ids & set(final_exact)) / len(final_exact))
        t0 = time.perf_counter()
        sql_exact = dense_top(vector, exact=True)
        stats["dense_exact"].append((time.perf_counter() - t0) * 1000)
        if brute:
            agree_sql_exact.append(len(set(sql_exact) & set(brute)) / len(brute))
    agree_dense = [len(set(i) & set(b)) / len(b) for i, b in zip(index_tops, brute_tops, strict=True) if b]
    identifier = [bool(re.fullmatch(r"[A-Z]+-\d+", t)) for t in texts]
    by_kind = {
        kind: [a for a, ident in zip(agree_dense, identifier, strict=True) if ident == (kind == "identifier")]
        for kind in ("identifier", "text")
    }
    return {
        "visible_memories": len(set(memory_ids)),
        "visible_chunks": int(mask.sum()),
        "queries": query_count,
        "search_ms": percentiles(stats["search"]),
        "took_ms": percentiles(stats["took"]),
        "embed_ms": percentiles(stats["embed"]),
        "exact_search_ms": percentiles(stats["exact_search"]),
        "dense_index_ms": percentiles(stats["dense_index"]),
        "dense_exact_ms": percentiles(stats["dense_exact"]),
        "numpy_ms": percentiles(stats["numpy"]),
        "agreement_dense_at_10": round(statistics.mean(agree_dense), 4),
        "agreement_dense_text_queries": round(statistics.mean(by_kind["text"]), 4) if by_kind["text"] else None,
        "agreement_dense_identifier_queries": round(statistics.mean(by_kind["identifier"]), 4) if by_kind["identifier"] else None,
        "identifier_queries": sum(identifier),
        "agreement_dense_min": round(min(agree_dense), 2),
        "agreement_sql_exact_vs_numpy": round(statistics.mean(agree_sql_exact), 4),
        "agreement_final_at_10": round(statistics.mean(agree_final), 4),
        "mean_results": round(statistics.mean(result_counts), 2),
        "phases_ms": {key: percentiles(values) for key, values in phases.items()},
        "sql_statements": percentiles(statements),
    }


@contextmanager
def count_statements() -> Iterator[list[int]]:
    """How many SQL statements go through Django's connections inside the block (transaction
    BEGIN/COMMIT that psycopg sends on its own are not counted)."""
    from django.db import connections

    counted = [0]

    def wrapper(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        counted[0] += 1
        return execute(sql, params, many, context)

    with ExitStack() as stack:
        for conn in connections.all(initialized_only=True):
            stack.enter_context(conn.execute_wrapper(wrapper))
        yield counted


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=lambda v: [int(x) for x in v.split(",") if x.strip()], default=[10_000, 100_000])
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--ingest", type=int, default=500, help="memories per ingest run (0 skips ingest)")
    parser.add_argument("--embedders", type=lambda v: v.split(","), default=["hash", "local"], help="ingest embedders")
    parser.add_argument("--reload", action="store_true", help="rebuild the corpora even when loaded")
    parser.add_argument(
        "--recall-embedder",
        default="hash",
        choices=["hash", "local"],
        help="embedder of the recall corpora and queries (default hash)",
    )
    parser.add_argument("--json", help=f"where to write the results (default {HOME}/results.json)")
    parser.add_argument("--profile", action="store_true", help="print a cProfile of the recall loop (slows it down)")
    parser.add_argument(
        "--capture",
        help="write every hit field of the bench queries' top-10 to this file (or, when it exists, compare with it)",
    )
    parser.add_argument(
        "--indexed-writes",
        action="store_true",
        help="also time writes into a scope with its own indexes, with them and without (rolled back; "
        "the corpus is vacuumed after, which moves its HNSW graphs slightly)",
    )
    parser.add_argument("--phase", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.profile:
        os.environ["CORTEX_BENCH_PROFILE"] = "1"  # the phase children inherit it
    if not args.phase:
        return drive(args)
    kind, *rest = args.phase
    if kind == "ingest":
        result = phase_ingest(rest[0], int(rest[1]))
    else:
        result = phase_recall(
            int(rest[0]), int(rest[1]), reload=args.reload, capture=args.capture, indexed_writes=args.indexed_writes
        )
    print("RESULT " + json.dumps(result, default=str), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

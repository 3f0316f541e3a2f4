"""Where the batched write pipeline spends its time (not a test): statements and Python per memory.

    .venv/bin/python bench/ingest_profile.py                        # hash embedder, 8 batches of 25
    .venv/bin/python bench/ingest_profile.py --embedder local --batches 4

Starts embedded PostgreSQL + Redis as bench/recall.py does (same `$CORTEX_BENCH_HOME`, its own
database `cortex_bench_ingest_profile_<embedder>`), writes new synthetic memories (bench/synthetic.py)
through `memory_create_many` in batches of 25 as one writer, and reports per memory:

- **round trips**: every statement the batch sent (savepoints and the commit included), grouped by
  kind (insert into which table, select from which, advisory locks, …), with the wall time each
  kind took as seen from Python (the database's work plus the round trip);
- **Python**: cProfile of the same batches (the top functions by own time, and the pipeline's
  stages by cumulative time), in a second pass so the profiler's overhead does not distort the
  statement timings;
- post-write work is enqueued to Redis on commit as in production (no worker consumes it).

Figures go to docs/benchmarks.md ("Ingest") with the command and the load average printed here.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import re
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

from recall import HOME, database_url, loadavg, machine, make_org, setup_django  # noqa: E402

BATCH = 25
SEED = 11


def drive(args: argparse.Namespace) -> int:
    from cortex_site.runner import embedded_services

    HOME.mkdir(parents=True, exist_ok=True)
    with embedded_services(HOME) as services:
        env = {
            **os.environ,
            **services,
            "DJANGO_SETTINGS_MODULE": "cortex_site.settings",
            "CORTEX_HOME": str(HOME),
            "SECRET_KEY": os.environ.get("SECRET_KEY") or "bench-only-secret-key",
            "CELERY_TASK_ALWAYS_EAGER": "0",
            "PYTHONUNBUFFERED": "1",
            "CORTEX_EMBEDDER": args.embedder,
        }
        env["DATABASE_URL"] = database_url(services["DATABASE_URL"], f"cortex_bench_ingest_profile_{args.embedder}")
        command = [sys.executable, str(Path(__file__).resolve()), "--phase", args.embedder, str(args.batches)]
        result = subprocess.run(command, env=env, cwd=ROOT, check=True, stdout=subprocess.PIPE, text=True)
    report = json.loads(result.stdout.rsplit("RESULT ", 1)[1])
    print(render({"machine": machine(), **report}))
    return 0


def _kind(sql: str) -> str:
    """A statement's kind: the verb and, for data statements, the table."""
    text = " ".join(sql.split())
    upper = text.upper()
    if "PG_ADVISORY_XACT_LOCK(%S, %S)" in upper:
        return "advisory lock (audit chain)"
    if "PG_ADVISORY_XACT_LOCK" in upper:
        return "advisory lock (contents)"
    if upper.startswith(("SAVEPOINT", "RELEASE SAVEPOINT", "ROLLBACK TO SAVEPOINT")):
        return "savepoint"
    for verb, pattern in (
        ("insert into", r'^INSERT INTO "?(\w+)'),
        ("update", r'^UPDATE "?(\w+)'),
        ("select from", r'\bFROM "?(\w+)"?'),
    ):
        match = re.search(pattern, text, flags=re.IGNORECASE)
        if match and (verb != "select from" or upper.startswith("SELECT")):
            return f"{verb} {match.group(1)}"
    return upper.split(" ", 1)[0].lower() if upper else "?"


def phase(embedder_name: str, batches: int) -> dict[str, Any]:
    setup_django()
    from django.db import connection
    from synthetic import memory

    from memories.embeddings.factory import get_embedder
    from memories.services.memories import MemoryDraft, WriteResult, memory_create_many

    _org, writer, _ = make_org(f"profile-{time.strftime('%Y%m%d-%H%M%S')}")
    embedder = get_embedder()
    salt = int(time.time())
    counter = iter(range(10**9))

    def drafts() -> list[Any]:
        return [
            MemoryDraft(title=m.title, content=m.content, scope=m.scope, category=m.category, source=m.source, tags=m.tags)
            for m in (memory(SEED + salt, next(counter), allow_long=False) for _ in range(BATCH))
        ]

    def write(batch: Sequence[Any]) -> None:
        outcomes = memory_create_many(principal=writer, drafts=batch)
        assert all(isinstance(o, WriteResult) and not o.deduplicated for o in outcomes), outcomes

    write(drafts())  # warm-up: the model, connections, the principal's caches
    statements: dict[str, list[float]] = defaultdict(list)

    def timed(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            statements[_kind(sql)].append((time.perf_counter() - t0) * 1000)

    before = loadavg()
    # Pass 1: statements and wall time, no profiler.
    wall = 0.0
    with connection.execute_wrapper(timed):
        for _ in range(batches):
            batch = drafts()
            t0 = time.perf_counter()
            write(batch)
            wall += time.perf_counter() - t0
    memories = batches * BATCH
    # Pass 2: the same amount of work under cProfile.
    profile = cProfile.Profile()
    for _ in range(batches):
        batch = drafts()
        profile.enable()
        write(batch)
        profile.disable()
    stats = pstats.Stats(profile)
    own = io.StringIO()
    pstats.Stats(profile, stream=own).sort_stats("tottime").print_stats(25)
    stages = {}
    for (filename, _line, name), (_cc, _nc, _tt, cumulative, _callers) in stats.stats.items():  # type: ignore[attr-defined]
        if filename.endswith(("pipeline.py", "services.py", "store.py")) and name in STAGES:
            stages[name] = round(cumulative * 1000 / memories, 3)
    return {
        "embedder": f"{embedder.name}:{embedder.model}",
        "memories": memories,
        "batch": BATCH,
        "loadavg_before": before,
        "loadavg_after": loadavg(),
        "memories_per_s": round(memories / wall, 1),
        "ms_per_memory": round(wall * 1000 / memories, 3),
        "statements_per_batch": {kind: len(times) / batches for kind, times in sorted(statements.items())},
        "statement_ms_per_memory": {kind: round(sum(times) / memories, 3) for kind, times in sorted(statements.items())},
        "sql_ms_per_memory": round(sum(sum(t) for t in statements.values()) / memories, 3),
        "stages_ms_per_memory": stages,
        "profile_top_own_time": own.getvalue(),
    }


# Pipeline stages reported by cumulative time (profiler pass; includes the profiler's own overhead).
STAGES = {
    "memory_create_many",
    "_clean",
    "_resolve",
    "_store_many",
    "_lock_contents",
    "_readable_duplicates",
    "_insert_rows",
    "create_chunks_many",
    "record_many",
    "result",
    "_enqueue_post_write",
}


def render(report: dict[str, Any]) -> str:
    lines = [
        f"machine: {report['machine']}",
        f"{report['embedder']}: {report['memories']} memories in batches of {report['batch']}: "
        f"{report['memories_per_s']} memories/s, {report['ms_per_memory']} ms per memory "
        f"(load {report['loadavg_before']} → {report['loadavg_after']})",
        f"SQL (as seen from Python): {report['sql_ms_per_memory']} ms per memory",
        "statements per batch / ms per memory:",
    ]
    for kind, count in report["statements_per_batch"].items():
        lines.append(f"  {count:6.1f}  {report['statement_ms_per_memory'][kind]:7.3f} ms  {kind}")
    lines.append("pipeline stages, cumulative ms per memory (profiled pass):")
    for name, ms in sorted(report["stages_ms_per_memory"].items(), key=lambda kv: -kv[1]):
        lines.append(f"  {ms:7.3f}  {name}")
    lines.append(report["profile_top_own_time"])
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--embedder", default="hash", choices=["hash", "local"])
    parser.add_argument("--batches", type=int, default=8)
    parser.add_argument("--phase", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if not args.phase:
        return drive(args)
    result = phase(args.phase[0], int(args.phase[1]))
    print("RESULT " + json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

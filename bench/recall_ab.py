"""Two versions of recall timed in one process, query by query (not a test).

    .venv/bin/python bench/recall_ab.py --before HEAD~1                       # 10k corpus, 200 queries, 2 rounds
    .venv/bin/python bench/recall_ab.py --before main --sizes 100000 --rounds 3

Whole runs of bench/recall.py on this shared 2-core machine move by more than most changes to recall
do: two runs of the same code minutes apart differ by up to a third. This bench takes the recall module
and its SQL module (memories/selectors/recall.py, memories/retrieval/sql.py) as they are at the git
revision `--before`, loads them beside the working tree's, and times both on bench/recall.py's corpus
(loaded by a run of it first) in one process, query by query, alternating which version goes first:
whatever the machine does falls on both alike. Each query's server-side time (`search_ms`) and its
phases are reported per version as p50/p95, with the share of queries the working tree answered faster.

Only what those two modules do is compared: a change elsewhere (scoring, models, the Principal) is
in both versions alike. The two versions share the database connection and its caches.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

import harness  # noqa: E402
import recall as recall_bench  # noqa: E402

MODULES = {"sql": "memories/retrieval/sql.py", "recall": "memories/selectors/recall.py"}
PHASES = ("search_ms", "terms_ms", "retrieve_ms", "fold_ms", "share_ms", "rank_ms")


def drive(args: argparse.Namespace) -> int:
    from cortex_site.runner import embedded_services

    with tempfile.TemporaryDirectory(prefix="cortex-recall-ab-") as before:
        for name, path in MODULES.items():
            shown = subprocess.run(["git", "show", f"{args.before}:{path}"], cwd=ROOT, capture_output=True, text=True)
            if shown.returncode != 0:
                raise SystemExit(f"{path} at {args.before}: {shown.stderr.strip()}")
            Path(before, f"{name}.py").write_text(shown.stdout)
        with embedded_services(recall_bench.HOME) as services:
            base = {**os.environ, **services}
            base.update(
                DJANGO_SETTINGS_MODULE="cortex_site.settings",
                CORTEX_HOME=str(recall_bench.HOME),
                SECRET_KEY=base.get("SECRET_KEY") or "bench-only-secret-key",
                CELERY_TASK_ALWAYS_EAGER="0",
                CORTEX_EMBEDDER="hash",
                PYTHONUNBUFFERED="1",
            )
            for size in args.sizes:
                env = {**base, "DATABASE_URL": recall_bench.database_url(base["DATABASE_URL"], f"cortex_bench_recall_{size}")}
                result = harness.run_phase(
                    Path(__file__).resolve(), env, "ab", str(size), str(args.queries), str(args.rounds), before
                )
                print(report(result, args.before))
    return 0


def report(result: dict[str, Any], before: str) -> str:
    machine = recall_bench.machine()
    lines = [f"corpus {result['size']:,}, {result['queries']} queries × {result['rounds']} rounds, machine {machine}"]
    for who, versions in result["principals"].items():
        lines.append(f"  {who} (working tree faster on {versions['faster_share']:.0%} of queries)")
        for version in ("before", "after"):
            phases = ", ".join(
                f"{name[:-3]} {versions[version][name]['p50']}/{versions[version][name]['p95']}" for name in PHASES
            )
            lines.append(f"    {before if version == 'before' else 'working tree':>14}: p50/p95 ms {phases}")
    return "\n".join(lines)


def phase_ab(size: int, query_count: int, rounds: int, before_dir: str) -> dict[str, Any]:
    recall_bench.setup_django()
    from synthetic import query

    from memories.access import Principal
    from memories.models import Membership, Organization
    from memories.selectors import recall as after

    slug = f"bench-{size}"
    org = Organization.objects.filter(slug=slug).first()
    if org is None:
        raise SystemExit(f"no {size:,}-memory corpus: run bench/recall.py --sizes {size} --ingest 0 first")
    before_sql = harness.load_module("recall_ab_before_sql", Path(before_dir, "sql.py"))
    before = harness.load_module("recall_ab_before_recall", Path(before_dir, "recall.py"))
    before.sql = before_sql  # type: ignore[attr-defined]  # its SQL as it was, not the working tree's
    texts = [query(recall_bench.SEED, i, size) for i in range(query_count)]
    result: dict[str, Any] = {"size": size, "queries": query_count, "rounds": rounds, "principals": {}}
    for who, email in (("Executive", f"exec@{slug}.bench"), ("Contractor", f"contractor@{slug}.bench")):
        principal = Principal(Membership.objects.select_related("organization", "user").get(organization=org, user__email=email))
        versions = (("before", before), ("after", after))
        for i in range(20):  # warm-up: caches, plans, both versions
            for _name, module in versions:
                module.recall(principal, module.RecallQuery(query(recall_bench.SEED, 100_000 + i, size), limit=10), audit=False)
        timings: dict[str, dict[str, list[float]]] = {"before": {}, "after": {}}
        faster = 0
        for n in range(rounds * len(texts)):
            searched: dict[str, float] = {}
            for name, module in versions if n % 2 == 0 else versions[::-1]:
                found = module.recall(principal, module.RecallQuery(texts[n % len(texts)], limit=recall_bench.TOP), audit=False)
                searched[name] = found.timings["search_ms"]
                for phase in PHASES:
                    timings[name].setdefault(phase, []).append(found.timings.get(phase, 0.0))
            faster += searched["after"] < searched["before"]
        result["principals"][who] = {
            **{name: {phase: recall_bench.percentiles(values) for phase, values in timings[name].items()} for name in timings},
            "faster_share": faster / (rounds * len(texts)),
        }
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--before", help="the git revision to compare the working tree with")
    parser.add_argument("--sizes", type=lambda v: [int(x) for x in v.split(",") if x.strip()], default=[10_000])
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=2, help="passes over the queries")
    parser.add_argument("--phase", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.phase:
        _kind, size, queries, rounds, before_dir = args.phase
        result = phase_ab(int(size), int(queries), int(rounds), before_dir)
        print("RESULT " + json.dumps(result), flush=True)
        return 0
    if not args.before:
        parser.error("--before is required")
    return drive(args)


if __name__ == "__main__":
    sys.exit(main())

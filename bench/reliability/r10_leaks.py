"""Reliability step `leaks`: the leak suite and the access state machine with the full budget.

Runs tests/hardening/leaks through the test runner (which starts and removes its own embedded
PostgreSQL and Redis) with CORTEX_LEAK_FULL=1 — every principal asks about every object of every
kind, and the Hypothesis state machine runs its long profile — and CORTEX_LEAK_REPORT pointing at
a file each check appends its figures to. Writes section `leaks` of docs/reliability.md:
principals × surfaces × canaries checked, leaks found, state-machine steps run.

    .venv/bin/python bench/reliability/r10_leaks.py            # the full run
    .venv/bin/python bench/reliability/r10_leaks.py --quick    # the make-test sample (for a fast look)
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.reliability.report import ROOT, write_section


def surface_count() -> dict[str, int]:
    """How many surfaces each channel's table lists (read from the suite itself, so the figure cannot drift)."""
    sys.path.insert(0, str(ROOT / "tests"))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "cortex_site.settings")
    for key, value in {
        "DATABASE_URL": "postgresql://count@/count",
        "REDIS_URL": "redis://127.0.0.1:1/0",
        "CORTEX_TESTING": "1",
        "SECRET_KEY": "count",
    }.items():
        os.environ.setdefault(key, value)
    import django

    django.setup()
    from hardening.leaks.surfaces import MCP, REST, UI

    return {"rest": len(REST), "ui": len(UI), "mcp": len(MCP)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="the sampled make-test budget instead of the full one")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="cortex-leaks-") as tmp:
        report = Path(tmp) / "leaks.jsonl"
        env = dict(os.environ, CORTEX_LEAK_REPORT=str(report))
        if not args.quick:
            env["CORTEX_LEAK_FULL"] = "1"
        started = time.monotonic()
        command = [sys.executable, "-m", "cortex_site.runner", "test", "tests/hardening/leaks", "-q", "-p", "no:cacheprovider"]
        result = subprocess.run(command, env=env, cwd=ROOT, check=False)
        elapsed = time.monotonic() - started
        lines = [json.loads(line) for line in report.read_text().splitlines()] if report.exists() else []
    surfaces = surface_count()
    checks = [line for line in lines if line["channel"] != "state-machine"]
    principals: dict[str, set[str]] = defaultdict(set)
    requests: dict[str, int] = defaultdict(int)
    canaries = 0
    problems = 0
    for line in checks:
        principals[line["channel"]].add(line["principal"])
        requests[line["channel"]] += line["requests"]
        canaries += line["canaries_checked"]
        problems += line["problems"]
    steps = sum(line["steps"] for line in lines if line["channel"] == "state-machine")
    rows = [
        f"| {channel} | {len(principals[channel])} | {surfaces.get(channel, 1)} | {requests[channel]} |"
        for channel in ("rest", "ui", "mcp", "selectors")
        if channel in principals
    ]
    body = "\n".join(
        [
            f"Budget: {'sampled (make test)' if args.quick else 'full — every principal asks about every object'}; "
            f"pytest exit code {result.returncode}; {elapsed:.0f} s.",
            "",
            "| channel | principals | surfaces | requests (answers searched) |",
            "| --- | --- | --- | --- |",
            *rows,
            "",
            f"- canary × answer checks: **{canaries:,}** (every canary string searched in every answer)",
            f"- leaks found (a canary beyond the principal's rights, an object answering otherwise than a missing one, "
            f"a complete list missing what it may read): **{problems}**",
            f"- state machine (grant, revoke, clearance, deactivate/reactivate, redact, supersede, token narrowing, "
            f"remember; read rule checked on REST, MCP and the browser after each step): **{steps} steps**",
            "",
            "Leaks found and fixed while building the suite (issue 18): a source rule or a token's default scope "
            "naming a scope the writer cannot read answered `SCOPE_NOT_WRITABLE` naming it (now `UNKNOWN_SCOPE`, as "
            "for a missing scope, and the built-in GitHub rule skips an engineering the writer cannot see); an "
            "admin's export of a scope they cannot read answered 400 \"That scope belongs to another "
            'organization" where a missing scope answers 404 (now the same 404).',
        ]
    )
    shown = " ".join([".venv/bin/python bench/reliability/r10_leaks.py", *sys.argv[1:]])
    write_section("leaks", "Leaks: principals × surfaces × canaries", body, command=shown)
    return 0 if result.returncode == 0 and problems == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())

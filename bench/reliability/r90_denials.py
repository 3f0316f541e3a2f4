"""Denials under probing: another organization's ids hammered over REST cannot flood the owner's
audit chain, tell the prober anything, or reach the prober's own log.

    .venv/bin/python bench/reliability/r90_denials.py                      # section `denials`
    .venv/bin/python bench/reliability/r90_denials.py --targets 20 --rounds 5

One child (bench/reliability/live.py) on a fresh database: an owner organization with `--targets`
memories and a prober organization whose admin holds a token; then the web server `make run`
starts (one uvicorn process, DEBUG off) on loopback. The prober sends `--rounds` rounds, each a
GET /api/memories/{id} of every target and of as many random (missing) ids, with one fixed
X-Request-ID. Measured: how many `access.denied` events the owner's chain gained (the bound is
one per actor, rule and target a minute: at most `--targets` per started minute of the run), how
many the prober's organization gained (must be 0), whether every hidden answer equals the missing
answer byte for byte (the id aside), the latency of both, and `verify_chain`
on both organizations afterwards.
"""

from __future__ import annotations

import argparse
import sys
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from live import drive, emit, live, quantiles, seed, setup_django
from report import write_section

STEP = "denials"
SCRIPT = Path(__file__).resolve()


def phase_probe(targets: int, rounds: int) -> dict[str, Any]:
    setup_django()
    import httpx

    from audit.models import AuditEvent
    from audit.services import verify_chain
    from memories.services.memories import MemoryDraft, memory_create

    owner = seed("owner")
    prober = seed("prober")
    ids = [
        str(
            memory_create(
                principal=owner.principal,
                draft=MemoryDraft(
                    title=f"Runbook {n}", content=f"Service S-{n} restarts with runbook R-{n}.", scope="engineering"
                ),
            ).memory.pk
        )
        for n in range(targets)
    ]

    def denied(organization: Any) -> int:
        return AuditEvent.objects.filter(organization=organization, action="access.denied").count()

    before = {"owner": denied(owner.organization), "prober": denied(prober.organization)}
    hidden_ms: list[float] = []
    missing_ms: list[float] = []
    identical = differing = 0
    statuses: dict[str, int] = {}
    headers = {"Authorization": f"Bearer {prober.token}", "X-Request-ID": "probe-run"}
    started = time.monotonic()
    with live("web") as instance, httpx.Client(base_url=instance.url, headers=headers, timeout=30) as http:
        http.get(f"/api/memories/{uuid.uuid4()}")  # warm-up: imports, connections, the first plans
        for _ in range(rounds):
            for target in ids:
                missing_id = str(uuid.uuid4())
                t0 = time.perf_counter()
                hidden = http.get(f"/api/memories/{target}")
                t1 = time.perf_counter()
                missing = http.get(f"/api/memories/{missing_id}")
                t2 = time.perf_counter()
                hidden_ms.append((t1 - t0) * 1000)
                missing_ms.append((t2 - t1) * 1000)
                for response in (hidden, missing):
                    statuses[str(response.status_code)] = statuses.get(str(response.status_code), 0) + 1
                same = (
                    hidden.status_code == missing.status_code
                    and hidden.content.replace(target.encode(), b"ID") == missing.content.replace(missing_id.encode(), b"ID")
                    and sorted(hidden.headers.keys()) == sorted(missing.headers.keys())
                )
                identical += same
                differing += not same
    elapsed = time.monotonic() - started
    return {
        # Each target's events are at least a minute apart (the cache's window).
        "bound": targets * (int(elapsed // 60) + 1),
        "targets": targets,
        "rounds": rounds,
        "probes": 2 * targets * rounds,
        "seconds": round(elapsed, 1),
        "owner_events": denied(owner.organization) - before["owner"],
        "prober_events": denied(prober.organization) - before["prober"],
        "identical": identical,
        "differing": differing,
        "statuses": statuses,
        "hidden_ms": quantiles(hidden_ms),
        "missing_ms": quantiles(missing_ms),
        "owner_chain_ok": verify_chain(owner.organization).ok,
        "prober_chain_ok": verify_chain(prober.organization).ok,
    }


def describe(result: dict[str, Any]) -> str:
    h, m = result["hidden_ms"], result["missing_ms"]
    return "\n".join(
        [
            f"{result['targets']} memories of the owner organization, probed by another organization's token: "
            f"{result['rounds']} rounds of every id and as many missing ids, {result['probes']} requests in "
            f"{result['seconds']} s (one uvicorn process, DEBUG off, loopback).",
            "",
            "| measure | value |",
            "| --- | ---: |",
            f"| `access.denied` events added to the owner's chain | {result['owner_events']} (bound: {result['bound']}) |",
            f"| `access.denied` events added to the prober's organization | {result['prober_events']} |",
            f"| hidden answers identical to a missing id's (status, body, header names) | "
            f"{result['identical']} of {result['identical'] + result['differing']} |",
            f"| statuses | {', '.join(f'{k}: {v}' for k, v in sorted(result['statuses'].items()))} |",
            f"| hidden id p50 / p95 / p99 ms | {h['p50']} / {h['p95']} / {h['p99']} |",
            f"| missing id p50 / p95 / p99 ms | {m['p50']} / {m['p95']} / {m['p99']} |",
            f"| owner's chain verifies / prober's chain verifies | {result['owner_chain_ok']} / {result['prober_chain_ok']} |",
            "",
            "Every probe of a hidden id costs one more lookup (the owner and the rule); only the first per target",
            "within the minute also writes the audit row, the rest stop at the cache's bound.",
        ]
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--targets", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--phase", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.phase:
        emit(phase_probe(int(args.phase[1]), int(args.phase[2])))
        return 0
    env = {"CORTEX_API_RATE": "1000000/min"}  # the prober's token budget is not what is measured
    [result] = drive(SCRIPT, STEP, [["probe", str(args.targets), str(args.rounds)]], env)
    body = describe(result)
    ok = (
        result["prober_events"] == 0
        and result["differing"] == 0
        and 0 < result["owner_events"] <= result["bound"]
        and result["owner_chain_ok"]
        and result["prober_chain_ok"]
    )
    command = "make reliability RELIABILITY=r90_denials.py"
    if args.targets != 50 or args.rounds != 10:
        command = f".venv/bin/python bench/reliability/r90_denials.py --targets {args.targets} --rounds {args.rounds}"
    write_section("denials", "Denials under probing", body, command=command)
    print(body)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())

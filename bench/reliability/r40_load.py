"""Load: a mixed workload against the server `make run` starts, at 16 and 64 concurrent clients.

    .venv/bin/python bench/reliability/r40_load.py                          # section `load`
    .venv/bin/python bench/reliability/r40_load.py --clients 16 --seconds 20 --corpus 500

One child process (bench/reliability/live.py): a fresh database on the step's embedded PostgreSQL
+ Redis, an organization with the synthetic corpus (bench/synthetic.py, written through the write
pipeline), then uvicorn + Celery worker + beat exactly as `make run` runs them (one web process,
DEBUG off), on loopback. asyncio clients (httpx) each loop for a bounded time over a weighted mix:
recall 60 % (POST /api/recall), list 15 % (GET /api/memories), detail 10 % (GET /api/memories/{id}),
remember 10 % (POST /api/memories, a unique idempotency key each) and MCP 5 % (a stateless
`tools/call` of `recall` on /mcp/). Latency is the client's, from send to the full answer.
An error is any answer that is not 2xx (or a transport failure, or an MCP tool error). After the
runs, every write the server acknowledged is read back over the API by its id.

The embedder is `hash` (CORTEX_EMBEDDER; deterministic, no model): the figures are Cortex's own
cost — HTTP, permission-filtered hybrid SQL, audit writes — not an embedding provider's.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import random
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from live import drive, emit, live, quantiles, seed, setup_django
from report import write_section

STEP = "load"
SCRIPT = Path(__file__).resolve()
MIX = (("recall", 60), ("list", 15), ("detail", 10), ("remember", 10), ("mcp", 5))
MCP_ACCEPT = "application/json, text/event-stream"


def seed_corpus(count: int) -> tuple[Any, list[str], list[str]]:
    """The organization, the ids of its memories, and recall queries over them."""
    from synthetic import SCOPES, memory, query

    from memories.services.memories import MemoryDraft, WriteResult, memory_create_many

    seeded = seed("load", scopes=[slug for slug, _ in SCOPES if slug != "public-docs"])
    ids: list[str] = []
    for start in range(0, count, 25):
        drafts = []
        for index in range(start, min(count, start + 25)):
            m = memory(20261201, index)
            drafts.append(MemoryDraft(title=m.title, content=m.content, scope=m.scope, category=m.category, tags=list(m.tags)))
        for outcome in memory_create_many(principal=seeded.principal, drafts=drafts):
            assert isinstance(outcome, WriteResult), outcome
            ids.append(str(outcome.memory.pk))
    queries = [query(20261201, i, count) for i in range(200)]
    return seeded, ids, queries


def mcp_ok(answer: Any) -> bool:
    text = answer.text
    if answer.headers.get("content-type", "").startswith("text/event-stream"):
        text = next((line[5:].strip() for line in text.splitlines() if line.startswith("data:")), "{}")
    body = json.loads(text or "{}")
    return "result" in body and not body["result"].get("isError", False)


async def run_level(
    url: str, token: str, clients: int, seconds: float, ids: list[str], queries: list[str], tag: str
) -> dict[str, Any]:
    import httpx

    names = [name for name, _ in MIX]
    weights = [weight for _, weight in MIX]
    serial = itertools.count()
    latencies: dict[str, list[float]] = defaultdict(list)
    statuses: Counter[str] = Counter()
    acknowledged: list[str] = []
    deadline = time.monotonic() + seconds
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    headers = {"Authorization": f"Bearer {token}"}

    async with httpx.AsyncClient(base_url=url, headers=headers, timeout=60, limits=limits) as http:

        async def one(rng: random.Random) -> None:
            op = rng.choices(names, weights)[0]
            n = next(serial)
            started = time.perf_counter()
            ok = False
            try:
                if op == "recall":
                    answer = await http.post("/api/recall", json={"query": rng.choice(queries), "limit": 10})
                elif op == "list":
                    answer = await http.get("/api/memories", params={"limit": 20})
                elif op == "detail":
                    answer = await http.get(f"/api/memories/{rng.choice(ids)}")
                elif op == "remember":
                    answer = await http.post(
                        "/api/memories",
                        json={
                            "title": f"Load note {tag}-{n}",
                            "content": f"Load run {tag} note {n}: the {rng.choice(queries)} question was answered.",
                            "scope": "engineering",
                            "idempotency_key": f"load-{tag}-{n}",
                        },
                    )
                    if answer.status_code == 201:
                        acknowledged.append(answer.json()["id"])
                else:
                    call = {"name": "recall", "arguments": {"query": rng.choice(queries), "limit": 5}}
                    answer = await http.post(
                        "/mcp/",
                        json={"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": call},
                        headers={"Accept": MCP_ACCEPT},
                    )
                ok = 200 <= answer.status_code < 300 and (op != "mcp" or mcp_ok(answer))
                statuses[f"{op} {answer.status_code}{'' if ok else ' error'}"] += 1
            except httpx.HTTPError as error:
                statuses[f"{op} {type(error).__name__}"] += 1
            latencies[op].append((time.perf_counter() - started) * 1000)
            if not ok:
                latencies["errors"].append(1)

        async def client(index: int) -> None:
            rng = random.Random(index)
            while time.monotonic() < deadline:
                await one(rng)

        started = time.monotonic()
        await asyncio.gather(*(client(i) for i in range(clients)))
        elapsed = time.monotonic() - started
    every = [ms for op, values in latencies.items() if op != "errors" for ms in values]
    return {
        "clients": clients,
        "seconds": round(elapsed, 1),
        "requests": len(every),
        "rps": round(len(every) / elapsed, 1),
        "errors": len(latencies["errors"]),
        "all": quantiles(every),
        "ops": {op: quantiles(latencies[op]) for op in names},
        "statuses": dict(statuses),
        "acknowledged": acknowledged,
    }


def phase_load(levels: list[int], seconds: float, corpus: int) -> dict[str, Any]:
    setup_django()
    import httpx

    seeded, ids, queries = seed_corpus(corpus)
    results = []
    with live("web", "worker", "beat") as instance:
        # Warm-up: imports, connections, the first query plans.
        asyncio.run(run_level(instance.url, seeded.token, 4, 3, ids, queries, "warm"))
        for clients in levels:
            results.append(asyncio.run(run_level(instance.url, seeded.token, clients, seconds, ids, queries, f"c{clients}")))
        written = [memory_id for level in results for memory_id in level["acknowledged"]]
        with httpx.Client(base_url=instance.url, headers={"Authorization": f"Bearer {seeded.token}"}, timeout=30) as http:
            readable = sum(1 for memory_id in written if http.get(f"/api/memories/{memory_id}").status_code == 200)
    for level in results:
        level["acknowledged"] = len(level["acknowledged"])
    return {"corpus": corpus, "levels": results, "written": len(written), "readable_after": readable}


def describe(result: dict[str, Any]) -> str:
    lines = [
        f"Corpus {result['corpus']} memories (synthetic, 10 scopes), one uvicorn process + worker + beat, hash embedder.",
        "",
        "| clients | duration | requests | req/s | errors | p50 ms | p95 ms | p99 ms | max ms |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for level in result["levels"]:
        a = level["all"]
        lines.append(
            f"| {level['clients']} | {level['seconds']} s | {level['requests']} | {level['rps']} | {level['errors']} "
            f"| {a['p50']} | {a['p95']} | {a['p99']} | {a['max']} |"
        )
    lines += ["", "Per operation (p50 / p95 / p99 ms, count):", ""]
    lines.append("| clients | " + " | ".join(name for name, _ in MIX) + " |")
    lines.append("| ---: |" + " --- |" * len(MIX))
    for level in result["levels"]:
        cells = [f"{o['p50']} / {o['p95']} / {o['p99']} ({o['n']})" for o in (level["ops"][name] for name, _ in MIX)]
        lines.append(f"| {level['clients']} | " + " | ".join(cells) + " |")
    errors = sum(level["errors"] for level in result["levels"])
    lines += [
        "",
        f"Errors: {errors}. Acknowledged writes: {result['written']}; readable afterwards by id: {result['readable_after']}.",
    ]
    if errors:
        lines.append("Statuses: " + "; ".join(json.dumps(level["statuses"]) for level in result["levels"]))
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clients", type=int, nargs="+", default=[16, 64])
    parser.add_argument("--seconds", type=float, default=60.0, help="duration of each level")
    parser.add_argument("--corpus", type=int, default=2000, help="memories written before the run")
    parser.add_argument("--phase", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.phase:
        emit(phase_load([int(c) for c in args.phase[3:]], float(args.phase[1]), int(args.phase[2])))
        return 0
    env = {"CORTEX_API_RATE": "1000000/min"}  # the load is one token: its budget is not what is measured
    [result] = drive(SCRIPT, STEP, [["load", str(args.seconds), str(args.corpus), *map(str, args.clients)]], env)
    body = describe(result)
    ok = all(level["errors"] == 0 for level in result["levels"]) and result["readable_after"] == result["written"]
    command = "make reliability RELIABILITY=r40_load.py"
    if args.clients != [16, 64] or args.seconds != 60.0 or args.corpus != 2000:
        clients = " ".join(map(str, args.clients))
        sizes = f"--clients {clients} --seconds {args.seconds:g} --corpus {args.corpus}"
        command = f".venv/bin/python bench/reliability/r40_load.py {sizes}"
    write_section("load", "Load", body, command=command)
    print(body)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())

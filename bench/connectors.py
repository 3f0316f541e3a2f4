"""Connector benchmarks: webhook answer latency under a burst, Slack backfill throughput (not a test).

    .venv/bin/python bench/connectors.py                                  # everything (starts embedded services)
    .venv/bin/python bench/connectors.py --deliveries 500 --concurrency 20 --channels 10 --embedders hash local

What it measures (docs/benchmarks.md has the numbers):

- **webhook**: Cortex's web process (uvicorn, as `make run` starts it) with a Celery worker on the
  `connectors` queue; a burst of N signed Slack `event_callback` deliveries (distinct event ids,
  distinct messages) posted to /api/webhooks/slack/<id> over `--concurrency` keep-alive
  connections at once (bench/loadgen.py). Answer latency p50/p95/max as the client saw it
  (signature check, Delivery row, enqueue, answer), first for deliveries sent one at a time,
  then for the burst; and how long after the burst began the worker had turned every delivery into a memory (drain time);
- **backfill**: a first sync of `--channels` channels × 50 messages (every 5th one a thread with two
  replies) from the loopback Slack workspace (slack-sdk's WebClient over HTTP to 127.0.0.1), pages run
  back to back through the framework's sync service as the worker runs them; items/s end to end,
  with the `hash` and the `local` embedder. In the same run, for the same texts:
  the **source alone** (fetch_page over the same workspace, nothing written) and the **write
  pipeline's ceiling** (memory_create_many in batches of the page size, no Slack at all).

Slack is outside this machine, so it is the same loopback workspace the tests use
(tests/support/slack_workspace.py on tests/support/stub_server.py); its answers cost a local HTTP
round trip, not Slack's real latency (typically 100–300 ms per call), so end-to-end figures are an
upper bound on what a real workspace allows. Each phase runs in a child process with its own
database on the embedded server (cortex_bench_connectors_<phase>), recreated per run.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "bench"), str(ROOT / "tests")]

import harness  # noqa: E402
from loadgen import post_burst, request_bytes  # noqa: E402
from recall import database_url, drop_database, ensure_database, loadavg, machine, percentiles  # noqa: E402

HOME = Path(os.environ.get("CORTEX_BENCH_HOME") or Path(tempfile.gettempdir()) / "cortex-bench-connectors").resolve()
PER_CHANNEL = 50
SEQUENTIAL = 50  # deliveries sent one at a time before the burst


# -- driver ----------------------------------------------------------------------------------------------
def run_phase(env: dict[str, str], *args: str) -> dict[str, Any]:
    return harness.run_phase(Path(__file__).resolve(), env, *args)


def drive(args: argparse.Namespace) -> int:
    from cortex_site.runner import embedded_services, ensure_dev_connector_key

    HOME.mkdir(parents=True, exist_ok=True)
    ensure_dev_connector_key(HOME)
    results: dict[str, Any] = {"machine": machine(), "started": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "phases": []}
    with embedded_services(HOME) as services:
        base = {**os.environ, **services}
        base.update(
            DJANGO_SETTINGS_MODULE="cortex_site.settings",
            CORTEX_HOME=str(HOME),
            SECRET_KEY=base.get("SECRET_KEY") or "bench-only-secret-key",
            CELERY_TASK_ALWAYS_EAGER="0",
            PYTHONUNBUFFERED="1",
            NO_PROXY="127.0.0.1,localhost",
            no_proxy="127.0.0.1,localhost",
        )
        if args.deliveries:
            env = {
                **base,
                "CORTEX_EMBEDDER": "hash",
                "DATABASE_URL": database_url(base["DATABASE_URL"], "cortex_bench_connectors_webhook"),
            }
            results["phases"].append(run_phase(env, "webhook", str(args.deliveries), str(args.concurrency)))
        for embedder in args.embedders if args.channels else []:
            env = {
                **base,
                "CORTEX_EMBEDDER": embedder,
                "DATABASE_URL": database_url(base["DATABASE_URL"], f"cortex_bench_connectors_{embedder}"),
            }
            results["phases"].append(run_phase(env, "backfill", embedder, str(args.channels)))
    output = Path(args.json or HOME / "results.json")
    output.write_text(json.dumps(results, indent=2))
    print(f"\nresults written to {output}")
    print(summary(results))
    return 0


def summary(results: dict[str, Any]) -> str:
    lines = [f"machine: {results['machine']}"]
    for phase in results["phases"]:
        if phase["phase"] == "webhook":
            ms = phase["answer_ms"]
            lines.append(
                f"webhook: one at a time ({phase['sequential']}): answer p50 {phase['sequential_answer_ms']['p50']:.1f} ms, "
                f"p95 {phase['sequential_answer_ms']['p95']:.1f} ms; "
                f"burst of {phase['deliveries']} signed deliveries, "
                f"{phase['concurrency']} at a time: answer p50 {ms['p50']:.1f} ms, "
                f"p95 {ms['p95']:.1f} ms, max {ms['max']:.1f} ms; statuses "
                f"{phase['statuses']}; burst sent in {phase['burst_s']:.2f} s; "
                f"worker drained all into memories {phase['drain_s']:.1f} "
                f"s after the burst began ({phase['memories']} memories); "
                f"load {phase['loadavg']}"
            )
        else:
            lines.append(
                f"backfill {phase['embedder']}: {phase['items']} conversations "
                f"({phase['messages']} messages) in {phase['seconds']:.1f} s "
                f"= {phase['items_per_s']:.1f} items/s end to end; source alone {phase['source_items_per_s']:.1f} items/s; "
                f"write pipeline ceiling {phase['pipeline_items_per_s']:.1f} "
                f"items/s (batches of {phase['page_size']}); load {phase['loadavg']}"
            )
    return "\n".join(lines)


# -- phases (children) -------------------------------------------------------------------------------------
def setup_django() -> None:
    drop_database()
    ensure_database()
    import django

    django.setup()
    from django.core.cache import cache
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    cache.clear()
    harness.purge_task_queues()


def make_workspace(channels: int) -> Any:
    """The loopback Slack workspace the tests use, with `channels` channels of PER_CHANNEL messages."""
    from support.slack_workspace import FakeSlack
    from support.stub_server import StubServer
    from synthetic import memory

    stub = StubServer()
    stub.start()
    slack = FakeSlack(stub)
    slack.install()
    for person in range(8):
        slack.add_user(f"U{person:08d}", f"Person {person}", f"person{person}@bench.test")
    n = 0
    for c in range(channels):
        channel = f"C{c:08d}"
        slack.add_channel(channel, f"team-{c}")
        for i in range(PER_CHANNEL):
            n += 1
            text = memory(20260101, n, allow_long=False).content[:600]
            ts = f"{1700000000 + n * 60}.000100"
            slack.post(channel, ts, text, user=f"U{n % 8:08d}")
            if i % 5 == 0:
                for r in (1, 2):
                    slack.reply(
                        channel, ts, f"{1700000000 + n * 60 + r}.000100", f"reply {r} to message {n}", user=f"U{(n + r) % 8:08d}"
                    )
    return slack


def make_connector(slack: Any, slug: str, channels: list[str]) -> tuple[Any, Any]:
    from support.slack_workspace import BOT_TOKEN, SIGNING_SECRET

    from connectors.services.connectors import connector_create
    from memories.access import Principal
    from memories.models import Membership
    from memories.services import tenancy

    org = tenancy.organization_create(slug=slug)
    admin = tenancy.member_add(organization=org, email=f"admin@{slug}.bench", clearance="Executive", role=Membership.Role.ADMIN)
    principal = Principal(Membership.objects.select_related("organization", "user").get(pk=admin.pk))
    created = connector_create(
        principal=principal,
        kind="slack",
        name="Bench Slack",
        config={"channels": channels, "api_url": slack.api_url},
        credentials={"bot_token": BOT_TOKEN, "signing_secret": SIGNING_SECRET},
    )
    return created.connector, principal


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def wait_http(url: str, timeout: float = 60.0) -> None:
    import httpx

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            httpx.get(url, timeout=2)
            return
        except httpx.HTTPError:
            time.sleep(0.2)
    raise SystemExit(f"{url} did not come up")


def phase_webhook(count: int, concurrency: int) -> dict[str, Any]:
    setup_django()
    from support.slack_workspace import fixture, sign
    from synthetic import memory

    from connectors.models import Delivery
    from cortex_site.runner import web_command, worker_command
    from memories.models import Memory

    slack = make_workspace(1)
    channel = "C00000000"
    connector, _ = make_connector(slack, "webhook-bench", [channel])
    port = free_port()
    # Production settings (DEBUG off) on loopback: web_command() reads HOST/PORT.
    os.environ.update(PORT=str(port), HOST="127.0.0.1", ALLOWED_HOSTS="127.0.0.1,localhost")
    env = dict(os.environ)
    logs = HOME / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    with (logs / "web.log").open("w") as web_log, (logs / "worker.log").open("w") as worker_log:
        # Each in a session of its own, as `make run` starts them (sessions share the CPU first
        # under the kernel's autogroup scheduling: cortex_site/celery.py, lower_priority).
        web = subprocess.Popen(web_command(), env=env, cwd=ROOT, stdout=web_log, stderr=subprocess.STDOUT, start_new_session=True)
        worker = subprocess.Popen(
            worker_command(), env=env, cwd=ROOT, stdout=worker_log, stderr=subprocess.STDOUT, start_new_session=True
        )
    try:
        url = f"http://127.0.0.1:{port}/api/webhooks/slack/{connector.pk}"
        wait_http(f"http://127.0.0.1:{port}/api/me")
        bodies = []
        for i in range(count + 10 + SEQUENTIAL):
            body = fixture("event_callback__message")
            ts = f"{1800000000 + i}.000100"
            body["event"].update(
                channel=channel,
                ts=ts,
                event_ts=ts,
                text=memory(20261201, i, allow_long=False).content[:600],
                user="U00000001",
            )
            body["event"].pop("blocks", None)
            body["event_id"] = f"EvBENCH{i:06d}"
            slack.post(channel, ts, body["event"]["text"], user="U00000001")
            bodies.append(json.dumps(body).encode())
        # Signed just before the burst (Slack signs each request with its time; bench/loadgen.py says
        # why the requests are built ahead).
        requests = [request_bytes(url, body, {"Content-Type": "application/json", **sign(body)}) for body in bodies]
        post_burst(url, requests[:10], 2)  # warm-up: first requests of the web processes
        # One at a time first: the answer's own cost, without queueing behind other deliveries.
        sequential = post_burst(url, requests[10 : 10 + SEQUENTIAL], 1)
        before = loadavg()
        started = time.perf_counter()
        outcomes = post_burst(url, requests[10 + SEQUENTIAL :], concurrency)
        burst = time.perf_counter() - started
        statuses: dict[str, int] = {}
        for _, status in outcomes:
            statuses[status] = statuses.get(status, 0) + 1
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            pending = Delivery.objects.filter(connector=connector, status=Delivery.Status.RECEIVED).count()
            if pending == 0:
                break
            time.sleep(0.2)
        drain = time.perf_counter() - started
        memories = Memory.objects.filter(organization_id=connector.organization_id, source="Slack").count()
        return {
            "phase": "webhook",
            "deliveries": count,
            "concurrency": concurrency,
            "answer_ms": percentiles([ms for ms, _ in outcomes]),
            "sequential": SEQUENTIAL,
            "sequential_answer_ms": percentiles([ms for ms, _ in sequential]),
            "statuses": statuses,
            "burst_s": round(burst, 2),
            "drain_s": round(drain, 1),
            "memories": memories,
            "processed": Delivery.objects.filter(connector=connector, status=Delivery.Status.PROCESSED).count(),
            "failed": Delivery.objects.filter(connector=connector, status=Delivery.Status.FAILED).count(),
            "deadlocks_in_web_log": (logs / "web.log").read_text().count("deadlock detected"),
            "deadlocks_in_worker_log": (logs / "worker.log").read_text().count("DeadlockDetected"),
            "loadavg": f"{before} → {loadavg()}",
        }
    finally:
        for process in (web, worker):
            process.terminate()
        for process in (web, worker):
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
        slack.stub.stop()


def phase_backfill(embedder_name: str, channels: int) -> dict[str, Any]:
    setup_django()
    from django.conf import settings

    from connectors.models import SyncRun
    from connectors.registry import source_for
    from connectors.services.sync import sync_run_page, sync_start
    from memories.embeddings.factory import get_embedder
    from memories.models import Memory
    from memories.services.memories import MemoryDraft, WriteResult, memory_create_many

    slack = make_workspace(channels)
    channel_ids = sorted(slack.channels)
    embedder = get_embedder()
    embedder.embed(["warm-up: load the model before the clock starts"])
    page_size = settings.CORTEX_CONNECTOR_PAGE_SIZE

    # The source alone: every page of the same first sync, nothing written.
    probe, _ = make_connector(slack, "source-only", channel_ids)
    source = source_for(probe)
    checkpoint: dict[str, Any] = {}
    fetched: list[Any] = []
    started = time.perf_counter()
    while True:
        page = source.fetch_page({**checkpoint}, limit=page_size, first_run_since=None)
        fetched.extend(page.items)
        checkpoint.update(page.checkpoint)
        if page.done:
            break
    source_s = time.perf_counter() - started

    # End to end: the framework's page task body (sync_run_page) back to back, as one worker runs a
    # run's pages. Post-write work (conflicts, entities) is only enqueued, as in production and in
    # bench/recall.py's ingest; no worker consumes it here. sync_start's own enqueue of page 0 goes
    # to the same idle queue.
    connector, _ = make_connector(slack, "backfill", channel_ids)
    run = sync_start(connector=connector, trigger=SyncRun.Trigger.MANUAL, backfill=True).run  # cap 1000, not 50
    before = loadavg()
    started = time.perf_counter()
    next_page: int | None = 0
    while next_page is not None:
        outcome = sync_run_page(run_id=run.pk, page=next_page)
        if outcome.retry_after is not None:
            raise SystemExit(f"the backfill was asked to wait: {outcome}")
        next_page = outcome.next_page
    seconds = time.perf_counter() - started
    run.refresh_from_db()
    assert run.status == SyncRun.Status.SUCCEEDED, (run.status, run.error)
    items = run.items_created

    # The write pipeline's ceiling: the same texts, as drafts, in batches of the page size, no Slack.
    _, ceiling_writer = make_connector(slack, "pipeline-only", channel_ids[:1])
    drafts = [
        MemoryDraft(
            content=item.content,
            title=item.title,
            source="Slack",
            source_url=item.source_url,
            author_name=item.author_name,
            category=item.category,
            tags=list(item.tags),
            valid_from=item.valid_from,
        )
        for item in fetched
    ]
    started = time.perf_counter()
    for start in range(0, len(drafts), page_size):
        outcomes = memory_create_many(principal=ceiling_writer, drafts=drafts[start : start + page_size])
        assert all(isinstance(o, WriteResult) and not o.deduplicated for o in outcomes)
    pipeline_s = time.perf_counter() - started
    stored = Memory.objects.filter(organization_id=connector.organization_id, source="Slack").count()
    assert stored == items == len(fetched), (stored, items, len(fetched))
    return {
        "phase": "backfill",
        "embedder": f"{embedder.name}:{embedder.model} ({embedder.dim})",
        "channels": channels,
        "items": items,
        "messages": sum(len(v) for v in slack.messages.values()) + sum(len(v) for v in slack.threads.values()),
        "mean_chars": round(sum(len(i.content) for i in fetched) / max(1, len(fetched))),
        "page_size": page_size,
        "pages": run.pages_done,
        "seconds": round(seconds, 2),
        "items_per_s": round(items / seconds, 1),
        "source_items_per_s": round(len(fetched) / source_s, 1),
        "slack_calls": len(slack.stub.received),
        "pipeline_items_per_s": round(len(drafts) / pipeline_s, 1),
        "loadavg": f"{before} → {loadavg()}",
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--deliveries", type=int, default=500, help="signed deliveries in the burst (0: skip)")
    parser.add_argument("--concurrency", type=int, default=20, help="deliveries in flight at once")
    parser.add_argument("--channels", type=int, default=10, help="channels of 50 messages to backfill (0: skip)")
    parser.add_argument("--embedders", nargs="+", default=["hash", "local"])
    parser.add_argument("--json", help="where to write results (default $CORTEX_BENCH_HOME/results.json)")
    parser.add_argument("--phase", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.phase:
        name, *rest = args.phase
        result = phase_webhook(int(rest[0]), int(rest[1])) if name == "webhook" else phase_backfill(rest[0], int(rest[1]))
        print("RESULT " + json.dumps(result), flush=True)
        return 0
    return drive(args)


if __name__ == "__main__":
    raise SystemExit(main())

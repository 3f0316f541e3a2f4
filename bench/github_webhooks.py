"""GitHub webhook benchmark: answer latency under a burst of signed merged-PR deliveries (not a test).

    .venv/bin/python bench/github_webhooks.py                        # 500 deliveries, 20 in flight (starts embedded services)
    .venv/bin/python bench/github_webhooks.py --deliveries 500 --concurrency 20
    .venv/bin/python bench/github_webhooks.py --web-concurrency 1               # one web process (default: one per CPU)
    .venv/bin/python bench/github_webhooks.py --without-worker                  # the answers alone (no worker draining)
    .venv/bin/python bench/github_webhooks.py --connection-per-delivery         # no keep-alive: a connection per delivery
    .venv/bin/python bench/github_webhooks.py --profile --deliveries 300        # no server: each part timed (webhook_profile.py)
    .venv/bin/python bench/github_webhooks.py --deliveries 3000 --kill-web-process-after 3   # a web process crashes mid-burst

Cortex's web process (uvicorn, as `make run` starts it) and a Celery worker on the `connectors`
queue; a burst of N `pull_request` closed-and-merged deliveries — the recorded payload
(tests/connectors/github/fixtures/pull_request__closed_merged.json) with a distinct number and
title each, a distinct X-GitHub-Delivery and a correct X-Hub-Signature-256 — posted to
/api/webhooks/github/<id> over `--concurrency` keep-alive connections at once (bench/loadgen.py;
each request built and signed before the burst, as GitHub signs on its own machines). Reported:
answer latency p50/p95/max as the client saw it (signature check, Delivery row, enqueue, answer — the
`webhook.accept` audit event is the worker's, counted at the end;
GitHub's limit is 10 s, the target p95 < 100 ms), and how long the worker took to turn every
delivery into a memory, fetching each PR's changed files with PyGithub from a loopback stub
(GitHub is outside this machine: its real latency is not in the drain figure). While the burst
runs, pg_stat_activity is sampled every 20 ms for sessions waiting on the audit-chain lock.
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import hmac
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "bench"), str(ROOT / "tests")]

import harness  # noqa: E402
from loadgen import post_burst, request_bytes  # noqa: E402
from recall import database_url, drop_database, ensure_database, loadavg, machine, percentiles  # noqa: E402

HOME = Path(os.environ.get("CORTEX_BENCH_HOME") or Path(tempfile.gettempdir()) / "cortex-bench-github").resolve()
FIXTURE = ROOT / "tests" / "connectors" / "github" / "fixtures" / "pull_request__closed_merged.json"
SECRET = "bench-webhook-secret"  # noqa: S105 - the loopback benchmark signs with its own throwaway secret
REPO = "robvanderleek/create-issue-branch"


def drive(args: argparse.Namespace) -> int:
    from cortex_site.runner import embedded_services, ensure_dev_connector_key

    HOME.mkdir(parents=True, exist_ok=True)
    ensure_dev_connector_key(HOME)
    with embedded_services(HOME) as services:
        env = {**os.environ, **services}
        env.update(
            DJANGO_SETTINGS_MODULE="cortex_site.settings",
            CORTEX_HOME=str(HOME),
            SECRET_KEY=env.get("SECRET_KEY") or "bench-only-secret-key",
            CELERY_TASK_ALWAYS_EAGER="0",
            CORTEX_EMBEDDER="hash",
            PYTHONUNBUFFERED="1",
            NO_PROXY="127.0.0.1,localhost",
            no_proxy="127.0.0.1,localhost",
        )
        env["DATABASE_URL"] = database_url(env["DATABASE_URL"], "cortex_bench_github")
        if args.web_concurrency is not None:
            env["WEB_CONCURRENCY"] = str(args.web_concurrency)
        if args.without_worker:
            env["BENCH_WITHOUT_WORKER"] = "1"
        if args.connection_per_delivery:
            env["BENCH_CONNECTION_PER_DELIVERY"] = "1"
        if args.kill_web_process_after is not None:
            env["BENCH_KILL_WEB_PROCESS_AFTER"] = str(args.kill_web_process_after)
        mode = "--profile-phase" if args.profile else "--phase"
        phase = [str(args.deliveries), str(args.concurrency)] + ([] if args.profile else [str(args.drain_timeout)])
        result = harness.run_phase(Path(__file__).resolve(), env, *phase, flag=mode)
    result["machine"] = machine()
    output = Path(args.json or HOME / ("profile.json" if args.profile else "results.json"))
    output.write_text(json.dumps(result, indent=2))
    print(f"\nresults written to {output}")
    if args.profile:
        return 0
    ms = result["answer_ms"]
    print(
        f"machine: {result['machine']}\n"
        f"web processes: {result['web_processes']}; "
        f"connections: {'one per delivery' if result['connection_per_delivery'] else 'keep-alive'}\n"
        f"github webhook: {result['deliveries']} signed merged-PR deliveries, {result['concurrency']} at a time: "
        f"answer p50 {ms['p50']:.1f} ms, p95 {ms['p95']:.1f} ms, max {ms['max']:.1f} ms "
        f"(p95 by fifth of the burst: {', '.join(f'{v:.0f}' for v in result['answer_p95_by_fifth'])} ms); "
        f"statuses {result['statuses']}; burst sent in {result['burst_s']:.2f} s; "
        + (
            f"worker turned all into memories {result['drain_s']:.1f} s after the burst began"
            if not result["undrained"]
            else f"{result['undrained']} deliveries not yet processed {result['drain_s']:.1f} s after the burst began"
        )
        + f" ({result['memories']} memories, {result['failed']} failed, "
        f"{result.get('webhook_accept_events', '?')} webhook.accept events); load {result['loadavg']}\n"
        f"during the burst: {result['during_burst']}"
        + (f"\nweb process killed: {result['killed']}" if result.get("killed") else "")
    )
    return 0


def setup(count: int) -> tuple[Any, Any, list[bytes], Any]:
    """A fresh database with one organization and its GitHub connector (its API on a loopback stub),
    and `count` + 10 signed-to-be merged-PR bodies: (organization, connector, bodies, stub)."""
    drop_database()
    ensure_database()
    import django

    django.setup()
    from django.core.cache import cache
    from django.core.management import call_command
    from support.stub_server import StubResponse, StubServer
    from synthetic import memory

    from connectors.services.connectors import connector_create
    from memories.access import Principal
    from memories.models import Membership
    from memories.services import tenancy

    call_command("migrate", verbosity=0)
    cache.clear()
    harness.purge_task_queues()
    stub = StubServer()
    stub.start()
    stub.route(
        "GET",
        rf"/repos/{REPO}/pulls/\d+/files",
        StubResponse(json=[{"filename": "README.md", "status": "modified", "additions": 2, "deletions": 1}]),
    )
    org = tenancy.organization_create(slug="github-bench")
    admin = tenancy.member_add(organization=org, email="admin@github.bench", clearance="Executive", role=Membership.Role.ADMIN)
    connector = connector_create(
        principal=Principal(Membership.objects.select_related("organization", "user").get(pk=admin.pk)),
        kind="github",
        name="Bench GitHub",
        config={"repositories": [REPO], "api_url": stub.url},
        credentials={"token": "bench-token-not-real", "webhook_secret": SECRET},
    ).connector
    recorded = json.loads(FIXTURE.read_text())
    bodies = []
    for i in range(count + 10):
        payload = copy.deepcopy(recorded)
        payload["pull_request"].update(
            number=1000 + i, title=f"Bench change {i}", body=memory(20261201, i, allow_long=False).content[:600]
        )
        bodies.append(json.dumps(payload).encode())
    return org, connector, bodies, stub


def signed_headers(body: bytes) -> dict[str, str]:
    return {
        "Content-Type": "application/json",
        "X-GitHub-Event": "pull_request",
        "X-GitHub-Delivery": str(uuid.uuid4()),
        "X-Hub-Signature-256": "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest(),
    }


class LockSampler(threading.Thread):
    """During the burst, every 20 ms: how many database sessions run a statement, and how many of
    them wait for an advisory lock (the organization's audit-chain lock, which the worker's writes
    take; answers took it too until their audit event moved to the worker)."""

    QUERY = (
        "SELECT count(*) FILTER (WHERE state = 'active'),"
        " count(*) FILTER (WHERE wait_event_type = 'Lock' AND wait_event = 'advisory')"
        " FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
    )

    def __init__(self, url: str) -> None:
        super().__init__(daemon=True)
        self.url = url
        self.samples: list[tuple[int, int]] = []
        self.done = threading.Event()

    def run(self) -> None:
        import psycopg

        with psycopg.connect(self.url, autocommit=True) as conn:
            while not self.done.wait(0.02):
                row = conn.execute(self.QUERY).fetchone()
                if row is not None:
                    self.samples.append((int(row[0]), int(row[1])))

    def stop(self) -> None:
        self.done.set()
        self.join(5)

    def summary(self) -> dict[str, Any]:
        n = len(self.samples) or 1
        return {
            "samples": len(self.samples),
            "mean_active_sessions": round(sum(a for a, _ in self.samples) / n, 2),
            "mean_waiting_for_audit_chain_lock": round(sum(w for _, w in self.samples) / n, 2),
            "share_of_samples_with_a_lock_wait": round(sum(1 for _, w in self.samples if w) / n, 3),
        }


class WebProcessKiller(threading.Thread):
    """`--kill-web-process-after S`: S seconds into the burst, SIGKILL one of the web server's
    processes (a crash, an out-of-memory kill) and time how long until its replacement is started on
    the dead one's socket (cortex_site/web_server.py). The answers say the rest: the requests the
    dead process held fail, and those reaching its socket wait for the replacement."""

    def __init__(self, server_pid: int, after: float) -> None:
        super().__init__(daemon=True)
        self.server_pid, self.after = server_pid, after
        self.result: dict[str, Any] = {}

    def _children(self) -> set[int]:
        """The web processes (multiprocessing's resource tracker is a child too)."""
        path = Path(f"/proc/{self.server_pid}/task/{self.server_pid}/children")
        children = set()
        for pid in path.read_text().split():
            try:
                if b"spawn_main" in Path(f"/proc/{pid}/cmdline").read_bytes():
                    children.add(int(pid))
            except FileNotFoundError:
                continue
        return children

    def run(self) -> None:
        if self.after < 0:
            return
        time.sleep(self.after)
        before = self._children()
        victim = min(before)
        os.kill(victim, signal.SIGKILL)
        killed = time.perf_counter()
        replacement = None
        while time.perf_counter() - killed < 60:
            if self._children() - before:
                replacement = time.perf_counter() - killed
                break
            time.sleep(0.01)
        self.result = {"pid": victim, "at_s": self.after, "replacement_started_after_s": replacement and round(replacement, 2)}

    def summary(self) -> dict[str, Any]:
        return self.result


def phase(count: int, concurrency: int, drain_timeout: float = 900) -> dict[str, Any]:
    org, connector, bodies, stub = setup(count)
    import httpx

    from audit.models import AuditEvent
    from connectors.models import Delivery
    from cortex_site.runner import web_command, worker_command
    from memories.models import Memory

    port = str(50000 + os.getpid() % 10000)
    os.environ.update(PORT=port, HOST="127.0.0.1", ALLOWED_HOSTS="127.0.0.1,localhost")
    logs = HOME / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    with (logs / "web.log").open("w") as web_log, (logs / "worker.log").open("w") as worker_log:
        # Each in a session of its own, as `make run` starts them: with the kernel's autogroup
        # scheduling, sessions share the CPU first (cortex_site/celery.py, lower_priority).
        web = subprocess.Popen(
            web_command(), env=dict(os.environ), cwd=ROOT, stdout=web_log, stderr=subprocess.STDOUT, start_new_session=True
        )
        worker = (
            None
            if os.environ.get("BENCH_WITHOUT_WORKER")
            else subprocess.Popen(
                worker_command(),
                env=dict(os.environ),
                cwd=ROOT,
                stdout=worker_log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        )
    try:
        url = f"http://127.0.0.1:{port}/api/webhooks/github/{connector.pk}"
        deadline = time.monotonic() + 180  # several web processes import Django at once
        while True:
            try:
                httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2)
                break
            except httpx.HTTPError:
                if time.monotonic() > deadline:
                    raise SystemExit("the web process did not come up") from None
                time.sleep(0.2)
        # Signed before the burst, as GitHub signs on its own machines (bench/loadgen.py says why).
        requests = [request_bytes(url, body, signed_headers(body)) for body in bodies]
        post_burst(url, requests[:10], 2)  # warm-up: first requests of the web processes
        if worker is not None:
            # The burst meets a worker already running, as a source's deliveries meet a deployed
            # Cortex: one that has started and processed the warm-up deliveries, not one still
            # importing its code on the cores the answers need.
            ready_by = time.monotonic() + 180
            while Delivery.objects.filter(connector=connector, status=Delivery.Status.RECEIVED).exists():
                if time.monotonic() > ready_by:
                    raise SystemExit("the worker did not process the warm-up deliveries")
                time.sleep(0.2)
        before = loadavg()
        sampler = LockSampler(os.environ["DATABASE_URL"])
        sampler.start()
        started = time.perf_counter()
        killer = WebProcessKiller(web.pid, float(os.environ.get("BENCH_KILL_WEB_PROCESS_AFTER") or -1))
        killer.start()
        outcomes = post_burst(url, requests[10:], concurrency, keep_alive=not os.environ.get("BENCH_CONNECTION_PER_DELIVERY"))
        burst = time.perf_counter() - started
        killer.join()
        sampler.stop()
        load_after_burst = loadavg()
        statuses: dict[str, int] = {}
        for _, status in outcomes:
            statuses[status] = statuses.get(status, 0) + 1
        deadline = time.monotonic() + (drain_timeout if worker is not None else 0)
        while Delivery.objects.filter(connector=connector, status=Delivery.Status.RECEIVED).exists():
            if time.monotonic() > deadline:
                break
            time.sleep(0.2)
        drain = time.perf_counter() - started
        return {
            "phase": "github_webhook",
            "deliveries": count,
            "concurrency": concurrency,
            "web_processes": web_command()[web_command().index("--workers") + 1],
            "worker": worker is not None,
            "connection_per_delivery": bool(os.environ.get("BENCH_CONNECTION_PER_DELIVERY")),
            "answer_ms": percentiles([ms for ms, _ in outcomes]),
            # Where the slow answers fall: the p95 of each fifth of the burst, in the order sent.
            "answer_p95_by_fifth": [
                percentiles([ms for ms, _ in outcomes[i * len(outcomes) // 5 : (i + 1) * len(outcomes) // 5]])["p95"]
                for i in range(5)
            ],
            "statuses": statuses,
            "burst_s": round(burst, 2),
            "drain_s": round(drain, 1),
            "undrained": Delivery.objects.filter(connector=connector, status=Delivery.Status.RECEIVED).count(),
            "memories": Memory.objects.filter(organization_id=org.pk, source="GitHub").count(),
            "failed": Delivery.objects.filter(connector=connector, status=Delivery.Status.FAILED).count(),
            "loadavg": f"{before} → {load_after_burst}",
            "loadavg_after_drain": loadavg(),
            "during_burst": sampler.summary(),
            "killed": killer.summary(),
            # Recorded by the worker as it processes each delivery (the answer writes none).
            "webhook_accept_events": AuditEvent.objects.filter(organization_id=org.pk, action="webhook.accept").count(),
            "finished": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        }
    finally:
        processes = [process for process in (web, worker) if process is not None]
        for process in processes:
            process.terminate()
        for process in processes:
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
        stub.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--deliveries", type=int, default=500, help="signed deliveries in the burst")
    parser.add_argument("--concurrency", type=int, default=20, help="deliveries in flight at once")
    parser.add_argument("--json", help="where to write results (default $CORTEX_BENCH_HOME/results.json)")
    parser.add_argument("--web-concurrency", type=int, help="web server processes (WEB_CONCURRENCY; default: as make run)")
    parser.add_argument(
        "--profile", action="store_true", help="no server: time each part of an answer in-process (bench/webhook_profile.py)"
    )
    parser.add_argument(
        "--drain-timeout", type=float, default=900, help="seconds to wait for the worker to process every delivery"
    )
    parser.add_argument(
        "--without-worker",
        action="store_true",
        help="no Celery worker: the answers alone, nothing draining on the same cores (a diagnosis, not the benchmark)",
    )
    parser.add_argument(
        "--connection-per-delivery",
        action="store_true",
        help="a new connection for each delivery instead of --concurrency keep-alive ones (bench/loadgen.py)",
    )
    parser.add_argument(
        "--kill-web-process-after",
        type=float,
        help="seconds into the burst: SIGKILL one web process and time its replacement (a crash, not the benchmark)",
    )
    parser.add_argument("--phase", nargs=3, help=argparse.SUPPRESS)
    parser.add_argument("--profile-phase", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.phase:
        print("RESULT " + json.dumps(phase(int(args.phase[0]), int(args.phase[1]), float(args.phase[2]))), flush=True)
        return 0
    if args.profile_phase:
        from webhook_profile import profile

        print("RESULT " + json.dumps(profile(int(args.profile_phase[0]))), flush=True)
        return 0
    return drive(args)


if __name__ == "__main__":
    raise SystemExit(main())

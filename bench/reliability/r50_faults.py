"""Faults, scripted and repeatable: what Cortex loses (nothing) when its parts fail under it.

    .venv/bin/python bench/reliability/r50_faults.py                    # every fault (section `faults`)
    .venv/bin/python bench/reliability/r50_faults.py --only postgres_stop redis_down

Each fault runs in a child with its own database on the step's embedded PostgreSQL + Redis and the
processes `make run` starts (uvicorn web, Celery worker, Celery beat; cortex_site.runner's commands):

- **worker_backfill** — a first Slack sync (the loopback workspace of tests/support, slack-sdk
  really calling it) runs on the worker; after its second page the worker's whole process group
  gets SIGKILL. A new worker starts; once the dead run's lease expires it is reaped (what beat's
  dispatcher does every minute) and the next run resumes from the checkpoint. Checked: every source
  item is exactly one memory, the stored checkpoint equals the source's final cursor.
- **worker_conflicts** — the 77 labelled conflict pairs (154 writes) while the worker runs conflict
  detection and entity extraction; SIGKILL after a fifth are done, then a new worker. Tasks it held
  are lost to the broker for its visibility timeout (an hour), so beat's post-write sweep must
  re-enqueue them. Checked: no memory left pending, and re-running every memory's post-write work
  afterwards adds no conflict, mention or relation (nothing was missing) — no pair twice.
- **postgres_stop** — clients writing and recalling over HTTP while PostgreSQL is stopped
  (`pg_ctl stop -m fast`, which also ends the sessions of requests in flight) and started again.
  Checked: answers during the outage are 503 SERVICE_UNAVAILABLE envelopes with a request id (no
  500), every acknowledged write is stored, every stored memory is whole (chunks + audit event), and
  the time from restart to the first successful answer, without touching the web process.
- **redis_down** — Redis shut down under web + worker + beat: writes and recall still answer; when
  Redis returns (same port), the sweep catches up conflicts and entities. Checked: every write 201,
  time until no memory is pending.
- **disk_full** — the database lives in a tablespace on a small tmpfs (mounted for the run; needs
  root), filled up by a file; writes must be refused with 507 STORAGE_FULL and nothing half-written,
  and succeed again once the file is removed.
"""

from __future__ import annotations

import argparse
import errno
import itertools
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from live import bench_module, drive, emit, live, quantiles, seed, setup_django, step_home, wait_until
from report import write_section

STEP = "faults"
SCRIPT = Path(__file__).resolve()
PAIRS = Path(__file__).resolve().parents[2] / "tests" / "memories" / "conflicts" / "labelled_pairs.json"
FAULTS = ("worker_backfill", "worker_conflicts", "postgres_stop", "redis_down", "disk_full")
STEP_ENV = {
    "CORTEX_CONNECTOR_PAGE_SIZE": "10",
    "CORTEX_CONNECTOR_LEASE_SECONDS": "30",  # its minimum: a dead run is taken over after 30 s
    "CORTEX_POST_WRITE_GRACE_SECONDS": "5",
    "CORTEX_POST_WRITE_SWEEP_SECONDS": "5",
    "CORTEX_API_RATE": "100000/min",
}


# -- worker killed mid-backfill ------------------------------------------------------------------------------
def phase_worker_backfill(channels: int) -> dict[str, Any]:
    setup_django()
    from connectors.models import Checkpoint, ConnectorItem, SyncRun
    from connectors.registry import source_for
    from connectors.services.schedule import reap_dead_runs
    from connectors.services.sync import sync_start
    from memories.models import Memory

    bench_connectors = bench_module("connectors")
    slack = bench_connectors.make_workspace(channels)
    channel_ids = sorted(slack.channels)
    probe, _ = bench_connectors.make_connector(slack, "probe", channel_ids)
    source = source_for(probe)
    checkpoint: dict[str, Any] = {}
    expected: set[str] = set()
    while True:  # the source alone: every item and the final cursor, nothing written
        page = source.fetch_page({**checkpoint}, limit=1000, first_run_since=None)
        expected |= {item.external_id for item in page.items}
        checkpoint.update(page.checkpoint)
        checkpoint = {k: v for k, v in checkpoint.items() if v is not None}
        if page.done:
            break
    connector, _ = bench_connectors.make_connector(slack, "backfill", channel_ids)
    try:
        with live("worker") as instance:
            run = sync_start(connector=connector, trigger=SyncRun.Trigger.MANUAL, backfill=True).run
            wait_until(lambda: SyncRun.objects.get(pk=run.pk).pages_done >= 2, 120, 0.02, "two pages of the backfill")
            instance.kill("worker")
            killed = SyncRun.objects.get(pk=run.pk)
            at_kill = {
                "pages_done": killed.pages_done,
                "status": killed.status,
                "memories": Memory.objects.filter(organization_id=connector.organization_id, source="Slack").count(),
            }
            instance.start("worker")
            reap_wait = wait_until(lambda: run.pk in reap_dead_runs(), 120, 1.0, "the dead run's lease to expire")
            runs = 1
            while True:
                runs += 1
                resumed = sync_start(connector=connector, trigger=SyncRun.Trigger.MANUAL, backfill=True).run
                wait_until(lambda pk=resumed.pk: SyncRun.objects.get(pk=pk).finished_at is not None, 300, 0.5, "the resumed run")
                stored = set(ConnectorItem.objects.filter(connector=connector).values_list("external_id", flat=True))
                if stored >= expected or runs > 6:
                    break
    finally:
        slack.stub.stop()
    org_memories = Memory.objects.filter(organization_id=connector.organization_id, source="Slack")
    items = ConnectorItem.objects.filter(connector=connector)
    saved = {c.stream: c.cursor for c in Checkpoint.objects.filter(connector=connector)}
    all_runs = list(SyncRun.objects.filter(connector=connector).order_by("created_at"))
    checks = {
        "every item stored": set(items.values_list("external_id", flat=True)) == expected,
        "one memory per item": org_memories.count() == len(expected) == items.exclude(memory=None).count(),
        "no memory twice": org_memories.values("content_hash").distinct().count() == org_memories.count(),
        "checkpoint equals the source's final cursor": saved == checkpoint,
        "last run succeeded": all_runs[-1].status == SyncRun.Status.SUCCEEDED,
    }
    return {
        "fault": "worker_backfill",
        "channels": channels,
        "source_items": len(expected),
        "at_kill": at_kill,
        "lease_wait_s": round(reap_wait, 1),
        "runs": [
            {"status": r.status, "pages": r.pages_done, "created": r.items_created, "updated": r.items_updated} for r in all_runs
        ],
        "memories": org_memories.count(),
        "checks": checks,
    }


# -- worker killed mid conflict detection --------------------------------------------------------------------
def phase_worker_conflicts() -> dict[str, Any]:
    setup_django()
    from django.db.models import Count

    from memories.models import Conflict, EntityMention, Memory, Relation
    from memories.services.memories import MemoryDraft, memory_create
    from memories.services.post_write import run_post_write

    seeded = seed("conflicts")
    pairs = json.loads(PAIRS.read_text())["pairs"]
    drafts = [
        MemoryDraft(title=p[side]["title"], content=p[side]["content"], scope="engineering")
        for side in ("existing", "new")
        for p in pairs
    ]
    org = seeded.organization.pk

    def active() -> Any:
        return Memory.objects.filter(organization_id=org, status=Memory.Status.ACTIVE)

    def done() -> int:
        return Memory.objects.filter(organization_id=org, post_write_pending=False).count()

    with live("worker", "beat") as instance:
        writer = threading.Thread(target=lambda: [memory_create(principal=seeded.principal, draft=d) for d in drafts])
        writer.start()
        wait_until(lambda: done() >= len(drafts) // 5, 300, 0.02, "a fifth of the post-write work")
        instance.kill("worker")
        at_kill = {"written": Memory.objects.filter(organization_id=org).count(), "post_write_done": done()}
        writer.join()
        killed_at = time.monotonic()
        instance.start("worker")
        catch_up = wait_until(lambda: not active().filter(post_write_pending=True).exists(), 300, 0.5, "no memory pending")
        catch_up_s = time.monotonic() - killed_at
        del catch_up
    counts = {
        "conflicts": Conflict.objects.filter(organization_id=org).count(),
        "mentions": EntityMention.objects.filter(memory__organization_id=org).count(),
        "relations": Relation.objects.filter(organization_id=org).count(),
    }
    # The oracle: every step is idempotent, so running them all again adds exactly what the fault lost.
    for memory_id in active().values_list("pk", flat=True):
        run_post_write(memory_id)
    again = {
        "conflicts": Conflict.objects.filter(organization_id=org).count(),
        "mentions": EntityMention.objects.filter(memory__organization_id=org).count(),
        "relations": Relation.objects.filter(organization_id=org).count(),
    }
    doubled = (
        EntityMention.objects.filter(memory__organization_id=org)
        .values("entity", "memory")
        .annotate(n=Count("id"))
        .filter(n__gt=1)
        .count()
    )
    checks = {
        "no memory left pending": not active().filter(post_write_pending=True).exists(),
        "re-running post-write adds nothing (nothing lost)": again == counts,
        "no mention twice": doubled == 0,
    }
    return {
        "fault": "worker_conflicts",
        "writes": len(drafts),
        "at_kill": at_kill,
        "catch_up_s": round(catch_up_s, 1),
        "counts": counts,
        "checks": checks,
    }


# -- clients over HTTP ------------------------------------------------------------------------------------------
class Clients:
    """Threads writing (unique idempotency keys) and recalling until stopped; every answer recorded."""

    def __init__(self, url: str, token: str, count: int, tag: str) -> None:
        self.url, self.token, self.count, self.tag = url, token, count, tag
        self.stop = threading.Event()
        self.records: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        self.serial = itertools.count()
        self.threads = [threading.Thread(target=self._loop, args=(i,)) for i in range(count)]
        self.t0 = time.monotonic()

    def _loop(self, index: int) -> None:
        import httpx

        client = httpx.Client(base_url=self.url, headers={"Authorization": f"Bearer {self.token}"}, timeout=30)
        while not self.stop.is_set():
            n = next(self.serial)
            write = n % 2 == 0
            key = f"{self.tag}-{n}"
            started = time.monotonic()
            try:
                if write:
                    answer = client.post(
                        "/api/memories",
                        json={
                            "title": f"Fault drill note {n}",
                            "content": f"Drill {self.tag} note {n}: Grace Hopper asked to rotate key K-{n} before INC-{n}.",
                            "scope": "engineering",
                            "idempotency_key": key,
                        },
                    )
                else:
                    answer = client.get("/api/recall", params={"q": f"rotate key K-{n - 1}"})
                status = answer.status_code
                body = answer.json() if answer.headers.get("content-type", "").startswith("application/json") else {}
                envelope_ok = status < 400 or (
                    bool(body.get("request_id")) and body.get("request_id") == answer.headers.get("x-request-id")
                )
                code = body.get("error_code", "") if status >= 400 else ""
            except httpx.HTTPError as error:
                status, code, envelope_ok = 0, type(error).__name__, False
                client = httpx.Client(base_url=self.url, headers={"Authorization": f"Bearer {self.token}"}, timeout=30)
            record = {
                "t": started - self.t0,
                "ms": (time.monotonic() - started) * 1000,
                "write": write,
                "key": key,
                "status": status,
                "code": code,
                "envelope": envelope_ok,
            }
            with self.lock:
                self.records.append(record)
        client.close()

    def __enter__(self) -> Clients:
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join()


def whole_memories(org: int) -> dict[str, int]:
    """Stored memories lacking chunks or their audit event (a half-written write) — must be 0."""
    from audit.models import AuditEvent
    from memories.models import Memory

    memories = Memory.objects.filter(organization_id=org)
    audited = set(AuditEvent.objects.filter(organization_id=org, action="memory.create").values_list("target_id", flat=True))
    without_chunks = memories.filter(chunks=None).count()
    without_audit = sum(1 for pk in memories.values_list("pk", flat=True) if str(pk) not in audited)
    return {"memories": memories.count(), "without_chunks": without_chunks, "without_audit_event": without_audit}


def phase_postgres_stop(clients: int, outage: float) -> dict[str, Any]:
    setup_django()
    from django.db import connection

    from cortex_site.embedded import EmbeddedPostgres
    from memories.models import Memory

    seeded = seed("pgstop")
    postgres = EmbeddedPostgres(step_home() / "pg")
    with live("web", "worker") as instance:
        connection.close()  # this process's own connection dies with the server too
        with Clients(instance.url, seeded.token, clients, "pg") as load:
            time.sleep(3)
            stopped_at = time.monotonic() - load.t0
            postgres.stop()
            time.sleep(outage)
            started_at = time.monotonic() - load.t0
            postgres.start()
            ready_at = time.monotonic() - load.t0
            time.sleep(6)
    records = load.records
    before = [r for r in records if r["t"] + r["ms"] / 1000 < stopped_at]
    during = [r for r in records if stopped_at <= r["t"] < started_at]
    after = [r for r in records if r["t"] >= started_at]
    first_ok = min((r["t"] + r["ms"] / 1000 for r in after if r["status"] in {200, 201}), default=None)
    acknowledged = {r["key"] for r in records if r["write"] and r["status"] in {200, 201}}
    refused = {r["key"] for r in records if r["write"] and r["status"] == 503}
    stored = set(
        Memory.objects.filter(organization_id=seeded.organization.pk, idempotency_key__startswith="pg-").values_list(
            "idempotency_key", flat=True
        )
    )
    failures = [r for r in records if r["status"] >= 400 or r["status"] == 0]
    whole = whole_memories(seeded.organization.pk)
    checks = {
        "all answers before the stop succeeded": all(r["status"] in {200, 201} for r in before),
        "every failure is a 503 SERVICE_UNAVAILABLE envelope with its request id": all(
            r["status"] == 503 and r["code"] == "SERVICE_UNAVAILABLE" and r["envelope"] for r in failures
        ),
        "no 500": not any(r["status"] == 500 for r in records),
        "every acknowledged write stored": acknowledged <= stored,
        "no half-written memory": whole["without_chunks"] == 0 and whole["without_audit_event"] == 0,
        "answers succeed again after the restart": first_ok is not None,
    }
    return {
        "fault": "postgres_stop",
        "clients": clients,
        "outage_s": outage,
        "requests": len(records),
        "statuses_during": dict(Counter(f"{r['status']} {r['code']}".strip() for r in during)),
        "statuses_all": dict(Counter(f"{r['status']} {r['code']}".strip() for r in records)),
        "answer_ms_during": quantiles([r["ms"] for r in during]),
        "recovery_s": None if first_ok is None else round(first_ok - started_at, 2),
        "postgres_start_s": round(ready_at - started_at, 2),
        "acknowledged_writes": len(acknowledged),
        "refused_writes": len(refused),
        "refused_but_stored": len(refused & stored),
        "whole": whole,
        "checks": checks,
    }


def _restart_redis() -> None:
    from cortex_site.embedded import EmbeddedRedis

    redis_server = EmbeddedRedis(step_home() / "redis")
    # Same configuration file, so the same port and password: the processes reconnect by themselves.
    subprocess.run([str(redis_server.executable), str(redis_server.data_dir / "redis.conf")], check=True, capture_output=True)
    redis_server._wait_ready()


def phase_redis_down(writes: int) -> dict[str, Any]:
    setup_django()
    import httpx

    from cortex_site.embedded import EmbeddedRedis
    from memories.models import EntityMention, Memory

    seeded = seed("redisdown")
    org = seeded.organization.pk
    pending = Memory.objects.filter(organization_id=org, status=Memory.Status.ACTIVE, post_write_pending=True)
    with live("web", "worker", "beat") as instance:
        client = httpx.Client(base_url=instance.url, headers={"Authorization": f"Bearer {seeded.token}"}, timeout=30)

        def write(n: int) -> tuple[int, float, str]:
            started = time.monotonic()
            answer = client.post(
                "/api/memories",
                json={"content": f"Ada Lovelace and Grace Hopper agreed on INC-{n}: ship build {n}.", "scope": "engineering"},
            )
            return answer.status_code, (time.monotonic() - started) * 1000, answer.json().get("id", "")

        warm = [write(n) for n in range(5)]
        wait_until(lambda: not pending.exists(), 120, 0.5, "the warm-up's post-write work")
        EmbeddedRedis(step_home() / "redis").stop()
        down = [write(n) for n in range(100, 100 + writes)]
        recalls = [client.get("/api/recall", params={"q": f"build {n}"}).status_code for n in range(100, 110)]
        pending_while_down = pending.count()
        _restart_redis()
        back_at = time.monotonic()
        catch_up = wait_until(lambda: not pending.exists(), 300, 0.5, "the sweep to catch up")
        survived = {name: process.poll() is None for name, process in instance.processes.items()}
        client.close()
    ids = [memory_id for _, _, memory_id in down if memory_id]
    with_mentions = EntityMention.objects.filter(memory_id__in=ids).values("memory").distinct().count()
    del back_at
    checks = {
        "every write while Redis was down answered 201": all(status == 201 for status, _, _ in down),
        "recall answered 200": all(status == 200 for status in recalls),
        "those memories were marked pending": pending_while_down == writes,
        "the sweep processed all of them": with_mentions == len(ids) == writes,
        "web, worker and beat survived": all(survived.values()),
    }
    return {
        "fault": "redis_down",
        "writes": writes,
        "warm_statuses": dict(Counter(status for status, _, _ in warm)),
        "write_ms_down": quantiles([ms for _, ms, _ in down]),
        "recall_statuses": dict(Counter(recalls)),
        "pending_while_down": pending_while_down,
        "catch_up_s": round(catch_up, 1),
        "checks": checks,
    }


def phase_disk_full(size_mb: int) -> dict[str, Any]:
    from urllib.parse import urlsplit

    import psycopg
    from recall import database_url

    from cortex_site.embedded import PG_SYSTEM_USER, EmbeddedPostgres

    if os.geteuid() != 0:
        return {"fault": "disk_full", "skipped": "needs root to mount a tmpfs for the tablespace", "checks": {}}
    volume = step_home() / "small-volume"
    volume.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_mb}m,mode=0755", "tmpfs", str(volume)], check=True)
    space = volume / "pg"
    space.mkdir(mode=0o700)
    postgres = EmbeddedPostgres(step_home() / "pg")
    if postgres.system_user:
        shutil.chown(space, PG_SYSTEM_USER, PG_SYSTEM_USER)
    url = os.environ["DATABASE_URL"]
    name = urlsplit(url).path.lstrip("/")
    admin_url = database_url(url, "postgres")
    filler = volume / "filler"
    try:
        with psycopg.connect(admin_url, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            admin.execute("DROP TABLESPACE IF EXISTS reliability_small")
            admin.execute(f"CREATE TABLESPACE reliability_small LOCATION '{space}'")
            admin.execute(f'CREATE DATABASE "{name}" TABLESPACE reliability_small')
        setup_django(fresh=False)
        import httpx

        seeded = seed("disk")
        with live("web") as instance:
            client = httpx.Client(base_url=instance.url, headers={"Authorization": f"Bearer {seeded.token}"}, timeout=30)
            serial = itertools.count()

            def write() -> dict[str, Any]:
                n = next(serial)
                body = " ".join(
                    f"Paragraph {i} of note {n}: the disk drill writes enough text to need new pages." for i in range(40)
                )
                answer = client.post("/api/memories", json={"title": f"Disk drill {n}", "content": body, "scope": "engineering"})
                data = answer.json()
                return {
                    "status": answer.status_code,
                    "code": data.get("error_code", ""),
                    "envelope": answer.status_code < 400 or data.get("request_id") == answer.headers.get("x-request-id"),
                }

            before = [write() for _ in range(5)]
            with filler.open("wb") as handle:  # fill the volume to the last byte
                try:
                    while True:
                        handle.write(b"\0" * (1 << 20))
                        handle.flush()
                except OSError as exc:
                    if exc.errno != errno.ENOSPC:
                        raise
            full = []
            for _ in range(200):
                full.append(write())
                if sum(1 for r in full[-10:] if r["status"] == 507) == 10:
                    break
            filler.unlink()
            after = [write() for _ in range(5)]
            client.close()
        whole = whole_memories(seeded.organization.pk)
    finally:
        from django.db import connections

        connections.close_all()
        with psycopg.connect(admin_url, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            admin.execute("DROP TABLESPACE IF EXISTS reliability_small")
        subprocess.run(["umount", str(volume)], check=False)
    refused = [r for r in full if r["status"] != 201]
    checks = {
        "writes before the volume filled succeeded": all(r["status"] == 201 for r in before),
        "writes on the full volume refused": len(refused) > 0,
        "every refusal is a 507 STORAGE_FULL envelope with its request id": all(
            r["status"] == 507 and r["code"] == "STORAGE_FULL" and r["envelope"] for r in refused
        ),
        "no half-written memory": whole["without_chunks"] == 0 and whole["without_audit_event"] == 0,
        "writes succeed again once space is freed": all(r["status"] == 201 for r in after),
    }
    return {
        "fault": "disk_full",
        "volume_mb": size_mb,
        "full_statuses": dict(Counter(f"{r['status']} {r['code']}".strip() for r in full)),
        "after_statuses": dict(Counter(r["status"] for r in after)),
        "whole": whole,
        "checks": checks,
    }


# -- report ------------------------------------------------------------------------------------------------------
def describe(result: dict[str, Any]) -> str:
    fault = result["fault"]
    if result.get("skipped"):
        return f"### {fault}\n\nNot run: {result['skipped']}."
    if fault == "worker_backfill":
        k = result["at_kill"]
        runs = "; ".join(
            f"{r['status']} ({r['pages']} pages, {r['created']} created, {r['updated']} updated)" for r in result["runs"]
        )
        figures = (
            f"{result['channels']} Slack channels, {result['source_items']} source items, pages of 10. "
            f"SIGKILL after page {k['pages_done']} ({k['memories']} memories stored); the dead run was reaped "
            f"{result['lease_wait_s']} s after the new worker started (lease 30 s). Runs: {runs}. "
            f"Memories at the end: {result['memories']}."
        )
    elif fault == "worker_conflicts":
        k, c = result["at_kill"], result["counts"]
        figures = (
            f"{result['writes']} writes (77 labelled pairs); SIGKILL with {k['written']} written and "
            f"{k['post_write_done']} processed. No memory pending {result['catch_up_s']} s after the kill "
            f"(sweep: grace 5 s, every 5 s). Conflicts {c['conflicts']}, mentions {c['mentions']}, relations {c['relations']}."
        )
    elif fault == "postgres_stop":
        figures = (
            f"{result['clients']} clients (half writes, half recalls), PostgreSQL stopped for {result['outage_s']} s: "
            f"{result['requests']} requests. During the outage: {result['statuses_during']} "
            f"(answer p50 {result['answer_ms_during']['p50']} ms, p99 {result['answer_ms_during']['p99']} ms). "
            f"First success {result['recovery_s']} s after the restart began (PostgreSQL itself took "
            f"{result['postgres_start_s']} s to accept connections). Writes acknowledged {result['acknowledged_writes']}, "
            f"refused {result['refused_writes']} (stored anyway — committed just before the stop, the answer failing after: "
            f"{result['refused_but_stored']}; a retry with the same idempotency_key returns it). "
            f"Memories {result['whole']['memories']}, without chunks {result['whole']['without_chunks']}, "
            f"without audit event {result['whole']['without_audit_event']}."
        )
    elif fault == "redis_down":
        figures = (
            f"{result['writes']} writes with Redis shut down: write p50 {result['write_ms_down']['p50']} ms, "
            f"p99 {result['write_ms_down']['p99']} ms; recall {result['recall_statuses']}; "
            f"{result['pending_while_down']} memories pending. Redis restarted: none pending after {result['catch_up_s']} s."
        )
    else:
        figures = (
            f"tablespace on a {result['volume_mb']} MB tmpfs filled by a file: writes {result['full_statuses']}; "
            f"after removing the file {result['after_statuses']}. Memories {result['whole']['memories']}, "
            f"without chunks {result['whole']['without_chunks']}, without audit event {result['whole']['without_audit_event']}."
        )
    checks = "\n".join(f"- {'pass' if ok else 'FAIL'}: {name}" for name, ok in result["checks"].items())
    return f"### {fault}\n\n{figures}\n\n{checks}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", nargs="+", choices=FAULTS, default=list(FAULTS))
    parser.add_argument("--channels", type=int, default=6, help="Slack channels of 50 messages in the backfill")
    parser.add_argument("--clients", type=int, default=8, help="HTTP clients during the PostgreSQL stop")
    parser.add_argument("--outage", type=float, default=4.0, help="seconds PostgreSQL stays stopped")
    parser.add_argument("--writes", type=int, default=30, help="writes while Redis is down")
    parser.add_argument("--volume-mb", type=int, default=80, help="size of the tmpfs holding the disk_full tablespace")
    parser.add_argument("--phase", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.phase:
        name, *rest = args.phase
        runners = {
            "worker_backfill": lambda: phase_worker_backfill(int(rest[0])),
            "worker_conflicts": phase_worker_conflicts,
            "postgres_stop": lambda: phase_postgres_stop(int(rest[0]), float(rest[1])),
            "redis_down": lambda: phase_redis_down(int(rest[0])),
            "disk_full": lambda: phase_disk_full(int(rest[0])),
        }
        emit(runners[name]())
        return 0
    arguments = {
        "worker_backfill": [str(args.channels)],
        "worker_conflicts": [],
        "postgres_stop": [str(args.clients), str(args.outage)],
        "redis_down": [str(args.writes)],
        "disk_full": [str(args.volume_mb)],
    }
    results = drive(SCRIPT, STEP, [[name, *arguments[name]] for name in args.only], STEP_ENV)
    failed = [r["fault"] for r in results if not all(r["checks"].values())]
    body = "\n\n".join(describe(r) for r in results)
    body += "\n\n" + (f"**Failed: {', '.join(failed)}.**" if failed else "Every check passed.")
    command = "make reliability RELIABILITY=r50_faults.py" + (
        "" if args.only == list(FAULTS) else f"  # --only {' '.join(args.only)}"
    )
    write_section("faults", "Faults", body, command=command)
    print(body)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())

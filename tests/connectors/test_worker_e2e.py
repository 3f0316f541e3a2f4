"""Connectors on a real Celery worker (`celery -A cortex_site worker -Q connectors,default`), on the
test database and the embedded Redis, against the loopback GitHub stub:

- Sync now through the API: 202, the pages run on the worker, the run is readable while and after;
- a worker killed mid-run: the next dispatch takes over the dead run and resumes from the
  checkpoint committed with the last page — nothing lost, nothing doubled.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest
from django.db import connection
from support.stub_server import StubResponse, StubServer

from connectors.models import Connector, SyncRun
from connectors.services.sync import sync_start
from cortex_site.celery import app
from memories.models import Memory

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

ROOT = Path(__file__).resolve().parents[2]
REPO = "robvanderleek/create-issue-branch"
LEASE_SECONDS = 30


def _test_database_url() -> str:
    parts = urlsplit(os.environ["DATABASE_URL"])
    return urlunsplit((parts.scheme, parts.netloc, f"/{connection.settings_dict['NAME']}", parts.query, parts.fragment))


class Worker:
    def __init__(self, log: Path) -> None:
        self.node = f"cortex-conn-{os.getpid()}-{time.monotonic_ns()}@localhost"
        env = {
            **os.environ,
            "DATABASE_URL": _test_database_url(),
            "CELERY_TASK_ALWAYS_EAGER": "0",
            "CORTEX_LLM": "none",
            "CORTEX_CONNECTOR_LEASE_SECONDS": str(LEASE_SECONDS),
            "CORTEX_CONNECTOR_PAGE_SIZE": "1",
        }
        self.log = log
        with log.open("ab") as output:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "celery", "-A", "cortex_site", "worker", "-Q", "connectors,default,conflicts",
                 "--concurrency", "2", "--loglevel", "INFO", "-n", self.node, "--without-gossip", "--without-mingle",
                 "--without-heartbeat"],
                env=env, cwd=ROOT, stdout=output, stderr=subprocess.STDOUT, start_new_session=True,
            )  # fmt: skip
        deadline = time.monotonic() + 60
        while not app.control.ping(destination=[self.node], timeout=0.5):
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the Celery worker did not start:\n{log.read_text()[-3000:]}")

    def kill(self) -> None:
        """As a crash or an OOM kill would: no chance to finish or acknowledge anything."""
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.kill()


@pytest.fixture
def start_worker(tmp_path: Path, settings: Any) -> Iterator[Callable[[], Worker]]:
    settings.CORTEX_CONNECTOR_LEASE_SECONDS = LEASE_SECONDS
    workers: list[Worker] = []
    previous = app.conf.task_always_eager
    app.conf.task_always_eager = False

    def start() -> Worker:
        workers.append(Worker(tmp_path / "worker.log"))
        return workers[-1]

    try:
        yield start
    finally:
        app.conf.task_always_eager = previous
        for worker in workers:
            worker.stop()
        # Tasks still queued for this test's runs must not reach the next test's worker.
        app.control.purge()


def _pull(number: int, merged_at: datetime, body: str) -> dict[str, Any]:
    from github_webhooks import github_json

    pull = github_json("pull_request__closed_merged.json")["pull_request"]
    stamp = merged_at.strftime("%Y-%m-%dT%H:%M:%SZ")
    pull.update(number=number, title=f"Change {number}", body=body, merged_at=stamp, closed_at=stamp, updated_at=stamp)
    return pull


BODIES = [
    "Move the nightly export job from cron to the Celery beat schedule.",
    "Teach the branch name generator about emoji in issue titles.",
    "Drop Node 12 from the test matrix; it reached end of life.",
    "Retry GitHub API calls on 502 with exponential backoff.",
]


def _serve(stub: StubServer, pulls: list[dict[str, Any]], *, slow: frozenset[int] = frozenset()) -> None:
    ordered = sorted(pulls, key=lambda p: p["updated_at"], reverse=True)
    stub.route("GET", f"/repos/{REPO}/pulls", StubResponse(json=ordered))
    for pull in pulls:
        delay = 30.0 if pull["number"] in slow else 0.0
        stub.route("GET", f"/repos/{REPO}/pulls/{pull['number']}", StubResponse(json=pull, delay=delay))
        stub.route("GET", f"/repos/{REPO}/pulls/{pull['number']}/files", StubResponse(json=[]))
    stub.route("GET", rf"/repos/{REPO}/pulls/\d+", StubResponse(status=404, json={"message": "Not Found"}))


def _wait_for(check: Callable[[], bool], *, timeout: float = 60, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


def test_sync_now_through_the_api_runs_on_the_worker(
    acme: dict[str, Any], api: Callable[..., Any], make_github: Callable[..., Connector], stub_server: StubServer,
    start_worker: Callable[[], Worker],
) -> None:  # fmt: skip
    now = datetime.now().astimezone()
    _serve(stub_server, [_pull(n, now - timedelta(hours=5 - n), BODIES[n]) for n in range(1, 4)])
    connector = make_github(acme["exec"], mode="poll", first_run_days=1)
    start_worker()
    admin = api(acme["exec"])

    response = admin.post(f"/api/connectors/{connector.pk}/sync", {})
    assert response.status_code == 202
    run_id = response.json()["run_id"]
    url = f"/api/connectors/{connector.pk}/runs/{run_id}"
    _wait_for(lambda: admin.get(url).json()["status"] in {"succeeded", "failed"}, what="the run to finish")

    run = admin.get(url).json()
    assert run["status"] == "succeeded", run
    assert (run["items_created"], run["progress_done"]) == (3, 3)
    assert sorted(Memory.objects.filter(source="GitHub", status="active").values_list("title", flat=True)) == [
        "Change 1", "Change 2", "Change 3",
    ]  # fmt: skip
    # One page per PR (page size 1 on the worker), each its own task.
    assert SyncRun.objects.get(pk=run_id).pages_done == 3
    assert admin.get(f"/api/connectors/{connector.pk}").json()["last_synced_at"] is not None


def test_a_worker_killed_mid_run_is_resumed_from_the_checkpoint_with_nothing_lost_or_doubled(
    acme: dict[str, Any], make_github: Callable[..., Connector], stub_server: StubServer, start_worker: Callable[[], Worker]
) -> None:
    now = datetime.now().astimezone()
    pulls = [_pull(n, now - timedelta(hours=5 - n), BODIES[n]) for n in range(1, 4)]
    _serve(stub_server, pulls, slow=frozenset({2}))  # the second page hangs: the worker dies in the middle of it
    connector = make_github(acme["exec"], mode="poll", first_run_days=1)
    worker = start_worker()
    run = sync_start(connector=connector, trigger=SyncRun.Trigger.MANUAL).run

    _wait_for(lambda: SyncRun.objects.get(pk=run.pk).pages_done == 1, what="the first page to commit")
    _wait_for(lambda: bool(stub_server.requests_to(f"/repos/{REPO}/pulls/2")), what="the second page to start")
    worker.kill()
    assert list(Memory.objects.filter(source="GitHub").values_list("title", flat=True)) == ["Change 1"]
    assert SyncRun.objects.get(pk=run.pk).status == SyncRun.Status.RUNNING  # nobody said it died

    # The source recovers; a new worker comes up; once the lease has run out, the next dispatch resumes.
    _serve(stub_server, pulls)
    start_worker()
    assert sync_start(connector=connector, trigger=SyncRun.Trigger.SCHEDULE).skipped  # the lease is still live
    SyncRun.objects.filter(pk=run.pk).update(heartbeat_at=datetime.now().astimezone() - timedelta(seconds=LEASE_SECONDS + 1))
    resumed = sync_start(connector=connector, trigger=SyncRun.Trigger.SCHEDULE).run
    _wait_for(lambda: SyncRun.objects.get(pk=resumed.pk).status in {"succeeded", "failed"}, what="the resumed run")

    dead, resumed = SyncRun.objects.get(pk=run.pk), SyncRun.objects.get(pk=resumed.pk)
    assert dead.status == SyncRun.Status.FAILED and "stopped" in dead.error
    assert resumed.status == SyncRun.Status.SUCCEEDED, resumed.error
    assert resumed.checkpoint_before == dead.checkpoint_after  # exactly where the dead run's last commit left it
    assert resumed.items_created == 2
    titles = sorted(Memory.objects.filter(source="GitHub").values_list("title", flat=True))
    assert titles == ["Change 1", "Change 2", "Change 3"]

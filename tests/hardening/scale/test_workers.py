"""Workers by queue: two real worker processes (the runner's own worker command) on one broker.

Each listens to the queues CORTEX_WORKER_QUEUES gives it; both share `conflicts`. Probe tasks
record every execution in the database, and the real post-write task of real memories is
counted in the workers' logs: every task runs exactly once, on a worker that listens to its queue.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest
from celery.signals import after_task_publish
from django.db import connection
from support import remember

from cortex_site import runner
from cortex_site.celery import app
from cortex_site.queues import TASK_QUEUES, UnknownQueueError, worker_queues
from memories.models import EntityMention, Memory

ROOT = Path(__file__).resolve().parents[3]
HERE = Path(__file__).resolve().parent
PROBES_PER_QUEUE = {"conflicts": 120, "default": 20, "connectors": 20}
WORKERS = {"alpha": "default,conflicts", "beta": "conflicts,connectors"}


# -- the worker's command and the routes (quick) ----------------------------------------------------


def test_the_worker_listens_to_every_queue_unless_told_otherwise(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CORTEX_WORKER_QUEUES", raising=False)
    command = runner.worker_command()
    assert command[command.index("-Q") + 1] == "default,connectors,conflicts"
    monkeypatch.setenv("CORTEX_WORKER_QUEUES", " conflicts, connectors ,conflicts")
    monkeypatch.setenv("CORTEX_WORKER_NAME", "post-write")
    command = runner.worker_command()
    assert command[command.index("-Q") + 1] == "conflicts,connectors"
    assert command[command.index("-n") + 1] == "post-write@%h"


def test_an_unknown_queue_is_refused_with_the_known_ones_named() -> None:
    with pytest.raises(UnknownQueueError, match=r"conflict.*the queues are default, connectors, conflicts"):
        worker_queues("default,conflict")


def test_tasks_are_routed_by_kind_of_work() -> None:
    def queue_of(task: str) -> str:
        return app.amqp.router.route({}, task)["queue"].name

    assert queue_of("memories.after_memory_write") == "conflicts"
    assert queue_of("connectors.sync_page") == "connectors"
    assert queue_of("connectors.dispatch_due") == "connectors"
    assert queue_of("memories.run_job") == "default"
    assert queue_of("audit.checkpoint_all") == "default"
    assert {queue.name for queue in app.conf.task_queues} == set(TASK_QUEUES)


# -- two real workers ---------------------------------------------------------------------------------


def _test_database_url(name: str) -> str:
    parts = urlsplit(os.environ["DATABASE_URL"])
    return urlunsplit((parts.scheme, parts.netloc, f"/{name}", parts.query, parts.fragment))


class Worker:
    def __init__(self, name: str, queues: str, database: str, log: Path) -> None:
        self.node = f"{name}-{os.getpid()}@localhost"
        self.log = log
        env = {
            **os.environ,
            "DATABASE_URL": _test_database_url(database),
            "CELERY_TASK_ALWAYS_EAGER": "0",
            "CORTEX_LLM": "none",
            "CORTEX_WORKER_QUEUES": queues,
            "CORTEX_WORKER_NAME": f"{name}-{os.getpid()}",
            "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]),
        }
        saved = {key: os.environ.get(key) for key in ("CORTEX_WORKER_QUEUES", "CORTEX_WORKER_NAME")}
        os.environ.update({key: env[key] for key in saved})
        try:
            command = runner.worker_command()
        finally:
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value
        command = [part.replace("%h", "localhost") for part in command]
        command += ["--include", "scale_probe", "--without-gossip", "--without-mingle", "--without-heartbeat"]
        with log.open("wb") as output:
            self.process = subprocess.Popen(
                command, env=env, cwd=ROOT, stdout=output, stderr=subprocess.STDOUT, start_new_session=True
            )

    def wait_ready(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while not app.control.ping(destination=[self.node], timeout=0.5):
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"worker {self.node} did not start:\n{self.log.read_text()[-3000:]}")

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()


@pytest.fixture
def workers(transactional_db: Any, tmp_path: Path) -> Iterator[dict[str, Worker]]:
    with connection.cursor() as cursor:
        cursor.execute(
            "CREATE TABLE scale_probe_execution (id bigserial PRIMARY KEY, task_id text NOT NULL, number int NOT NULL, "
            "worker text NOT NULL, queue text NOT NULL, backend int NOT NULL)"
        )
    app.control.purge()
    previous = app.conf.task_always_eager
    app.conf.task_always_eager = False
    database = connection.settings_dict["NAME"]
    started = {name: Worker(name, queues, database, tmp_path / f"{name}.log") for name, queues in WORKERS.items()}
    try:
        for worker in started.values():
            worker.wait_ready()
        yield started
    finally:
        app.conf.task_always_eager = previous
        for worker in started.values():
            worker.stop()
        app.control.purge()
        with connection.cursor() as cursor:
            cursor.execute("DROP TABLE IF EXISTS scale_probe_execution")


def _wait_for(check: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def _executions() -> list[tuple[str, int, str, str, int]]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT task_id, number, worker, queue, backend FROM scale_probe_execution")
        return list(cursor.fetchall())


@pytest.mark.slow
def test_two_workers_on_one_broker_run_every_task_exactly_once_on_a_worker_of_its_queue(
    workers: dict[str, Worker], make_org: Any, make_member: Any
) -> None:
    sent: dict[str, str] = {}
    for queue, count in PROBES_PER_QUEUE.items():
        for number in range(count):
            result = app.send_task("scale.probe", args=[number], queue=queue)
            sent[result.id] = queue
    total = sum(PROBES_PER_QUEUE.values())
    _wait_for(lambda: len(_executions()) >= total, 120, "the probe tasks")
    time.sleep(1.0)  # anything delivered twice would have run by now

    rows = _executions()
    assert len(rows) == total, "a task ran more than once"
    assert {row[0] for row in rows} == set(sent)
    ran_on = {name: {row[2] for row in rows if row[3] == name} for name in PROBES_PER_QUEUE}
    alpha, beta = workers["alpha"].node, workers["beta"].node
    assert ran_on["default"] == {alpha}
    assert ran_on["connectors"] == {beta}
    # The shared queue is really shared: both workers took some of it.
    assert ran_on["conflicts"] == {alpha, beta}
    # Each worker process kept its database connection from task to task (two processes a worker),
    # instead of a new backend — and its authentication — for each of the 160 tasks.
    backends = {name: {row[4] for row in rows if row[2] == worker.node} for name, worker in workers.items()}
    assert all(1 <= len(used) <= 2 for used in backends.values()), backends

    # Real post-write work (conflict detection, entity extraction) of real memories, on the shared queue.
    published: list[str] = []

    def record(headers: dict[str, Any] | None = None, routing_key: str = "", **_: Any) -> None:
        if headers and headers.get("task") == "memories.after_memory_write":
            published.append(headers["id"])
            assert routing_key == "conflicts"

    after_task_publish.connect(record, weak=False)
    try:
        member = make_member(make_org(), "Employee")
        memories = [remember(member, f"Ticket OPS-{n} tracks the Frankfurt failover drill with Dana Reyes.") for n in range(12)]
    finally:
        after_task_publish.disconnect(record)
    assert len(published) == len(memories)

    def finished() -> dict[str, int]:
        logs = workers["alpha"].log.read_text() + workers["beta"].log.read_text()
        done = re.findall(r"Task memories\.after_memory_write\[([0-9a-f-]+)\] (?:succeeded|raised|failed)", logs)
        return {task_id: done.count(task_id) for task_id in set(done)}

    _wait_for(lambda: set(finished()) >= set(published), 120, "the post-write tasks")
    time.sleep(1.0)
    assert all(finished()[task_id] == 1 for task_id in published), finished()
    ids = [memory.id for memory in memories]
    assert EntityMention.objects.filter(memory_id__in=ids).count() > 0
    pairs = list(EntityMention.objects.filter(memory_id__in=ids).values_list("entity_id", "memory_id"))
    assert len(pairs) == len(set(pairs))
    assert Memory.objects.filter(id__in=ids).count() == len(memories)

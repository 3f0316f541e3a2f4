"""End to end on a real Celery worker: the worker is `celery -A cortex_site worker`, started
here against the test database and the embedded Redis, and tasks travel through the broker.

- the labelled conflict pairs through the whole pipeline (local MiniLM embeddings, the 0.75
  candidate gate, the heuristic classifier), with precision and recall printed;
- contradicting memories by authors of different clearance: auto-resolution by authority,
  supersession and dissent;
- a duplicate from a second source; the manual-policy queue and a person's decision;
- decision extraction as a job (200 within `wait`, 202 and the job status URL otherwise);
- every task re-run changes nothing.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest
from celery.result import AsyncResult, allow_join_result
from celery.signals import after_task_publish
from django.db import connection
from django.utils import timezone
from meeting_transcripts import PLATFORM_SUMMARY, PLATFORM_SYNC

from audit.models import AuditEvent
from cortex_site.celery import app
from memories.embeddings.factory import get_embedder
from memories.models import Conflict, Job, Memory, Organization
from memories.services.memories import MemoryDraft, memory_create

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

ROOT = Path(__file__).resolve().parents[2]
PAIRS = json.loads((Path(__file__).parent / "conflicts" / "labelled_pairs.json").read_text())["pairs"]
TASK_TIMEOUT = 60


def _test_database_url(name: str) -> str:
    parts = urlsplit(os.environ["DATABASE_URL"])
    return urlunsplit((parts.scheme, parts.netloc, f"/{name}", parts.query, parts.fragment))


@pytest.fixture(scope="module")
def real_worker(django_db_setup: Any, django_db_blocker: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A Celery worker process on the test database; stopped (TERM, then KILL) after this module's
    tests — left running, it took the tasks later modules send on its queues (test_workers' probes)."""
    with django_db_blocker.unblock():
        database = connection.settings_dict["NAME"]
    node = f"cortex-e2e-{os.getpid()}@localhost"
    env = {**os.environ, "DATABASE_URL": _test_database_url(database), "CELERY_TASK_ALWAYS_EAGER": "0", "CORTEX_LLM": "none"}
    log = tmp_path_factory.mktemp("worker") / "worker.log"
    with log.open("wb") as output:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "cortex_site",
                "worker",
                "-Q",
                "default,conflicts",
                "--concurrency",
                "2",
                "--loglevel",
                "INFO",
                "-n",
                node,
                "--without-gossip",
                "--without-mingle",
                "--without-heartbeat",
            ],
            env=env,
            cwd=ROOT,
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + 45
        while not app.control.ping(destination=[node], timeout=0.5):
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the Celery worker did not start:\n{log.read_text()[-3000:]}")
        yield node
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()


@pytest.fixture
def published(real_worker: str) -> Iterator[list[str]]:
    """Route this test's tasks through the broker to the worker; collect the ids of what is sent."""
    sent: list[str] = []

    def remember(headers: dict[str, Any] | None = None, **_: Any) -> None:
        # A task sent without a result (the post-write work after a write) is never waited for by id:
        # its result stays PENDING for good, and its `post_write_pending` marker says when it is done.
        if headers and headers.get("id") and not headers.get("ignore_result"):
            sent.append(headers["id"])

    previous = app.conf.task_always_eager
    app.conf.task_always_eager = False
    after_task_publish.connect(remember, weak=False)
    try:
        yield sent
    finally:
        after_task_publish.disconnect(remember)
        app.conf.task_always_eager = previous


def drain(sent: list[str]) -> None:
    """Wait until the worker has done the post-write work of every memory (each clears its
    `post_write_pending` marker; the enqueue keeps no result to wait on), and any task sent with a
    result has finished."""
    deadline = time.monotonic() + TASK_TIMEOUT
    while Memory.objects.filter(post_write_pending=True, status="active").exists():
        if time.monotonic() > deadline:
            raise TimeoutError("the worker did not finish the post-write work in time")
        time.sleep(0.1)
    # This test is the client of a real worker, never inside a task: Celery's "join would block"
    # flag is process-global, and an eager task another thread of this process runs may hold it.
    # Tasks sent with a result (re-runs, jobs) are waited for; `published` leaves out the post-write
    # tasks, which store none (the marker above is what says they are done).
    with allow_join_result():
        for task_id in list(sent):
            result: AsyncResult[Any] = AsyncResult(task_id, app=app)
            settle = time.monotonic() + 5
            while not result.ready() and time.monotonic() < settle:
                time.sleep(0.1)
            if result.ready():
                result.get(timeout=TASK_TIMEOUT, propagate=True)


@pytest.fixture
def write(principal_of: Callable[..., Any]) -> Callable[..., Memory]:
    def write(membership: Any, content: str, **fields: Any) -> Memory:
        return memory_create(principal=principal_of(membership), draft=MemoryDraft(content=content, **fields)).memory

    return write


LIMIT_100 = "The public API rate limit is 100 requests per minute per API key."
LIMIT_250 = "The public API rate limit is 250 requests per minute per API key."


def test_contradicting_memories_by_authors_of_different_clearance_are_resolved_by_authority(
    acme: dict[str, Any], published: list[str], api: Any
) -> None:
    manager, employee = api(acme["manager"]), api(acme["employee"])
    older = manager.post(
        "/api/memories",
        {"title": "Public API rate limit", "content": LIMIT_100, "valid_from": (timezone.now() - timedelta(days=20)).isoformat()},
    ).json()
    drain(published)
    newer = employee.post("/api/memories", {"title": "Public API rate limit", "content": LIMIT_250}).json()
    drain(published)

    (conflict,) = manager.get("/api/conflicts", {"status": "all"}).json()["results"]
    assert (conflict["kind"], conflict["status"], conflict["resolution"]) == ("contradiction", "resolved", "keep_existing")
    assert conflict["resolved_by"] == {"type": "policy", "policy": "authority"}
    assert conflict["dissent"]["claim"] == LIMIT_250 and conflict["dissent"]["author_clearance"] == "Employee"
    detail = employee.get(f"/api/memories/{newer['id']}").json()
    assert detail["status"] == "superseded" and detail["superseded_by"] == older["id"]
    assert detail["conflicts"][0]["id"] == conflict["id"]
    assert [r["memory"]["id"] for r in manager.get("/api/recall", {"q": "public API rate limit"}).json()["results"]] == [
        older["id"]
    ]
    system_actions = set(AuditEvent.objects.filter(actor_kind="system").values_list("action", flat=True))
    assert {"conflict.detect", "conflict.resolve", "memory.supersede"} <= system_actions


def test_a_duplicate_from_a_second_source_is_folded_into_the_first(
    acme: dict[str, Any], published: list[str], write: Any
) -> None:
    first = write(
        acme["employee"],
        "The office Wi-Fi password rotates on the first Monday of each month.",
        title="Office Wi-Fi",
        source="Slack",
    )
    drain(published)
    second = write(
        acme["employee"],  # the same rung: between equals the first copy stays (a higher author's copy would win)
        "The office Wi-Fi password rotates on the first Monday of every month.",
        title="Office Wi-Fi",
        source="Gmail",
    )
    drain(published)

    conflict = Conflict.objects.get()
    assert (conflict.kind, conflict.resolution, conflict.existing_memory_id) == ("duplicate", "keep_existing", first.pk)
    second.refresh_from_db()
    assert second.status == "superseded" and second.superseded_by_id == first.pk
    assert conflict.dissent is not None and conflict.dissent["source"] == "Gmail"


def test_manual_policy_queues_the_conflict_until_a_person_decides(
    acme: dict[str, Any], published: list[str], write: Any, api: Any
) -> None:
    Organization.objects.filter(pk=acme["org"].pk).update(conflict_policy="manual")
    older = write(acme["manager"], LIMIT_100, title="Public API rate limit", valid_from=timezone.now() - timedelta(days=3))
    drain(published)
    newer = write(acme["employee"], LIMIT_250, title="Public API rate limit")
    drain(published)

    client = api(acme["manager"])
    (queued,) = client.get("/api/conflicts").json()["results"]
    assert (queued["status"], queued["resolution"]) == ("open", None)
    assert set(Memory.objects.values_list("status", flat=True)) == {"active"}
    decided = client.post(
        f"/api/conflicts/{queued['id']}/resolve", {"resolution": "keep_new", "note": "confirmed with the API team"}
    ).json()
    assert (decided["status"], decided["resolution"], decided["resolved_by"]["type"]) == ("resolved", "keep_new", "person")
    older.refresh_from_db()
    assert older.status == "superseded" and older.superseded_by_id == newer.pk
    assert AuditEvent.objects.filter(action="conflict.resolve", actor_user_id=acme["manager"].user_id).exists()


def test_decision_extraction_runs_as_a_job_on_the_worker(
    acme: dict[str, Any], published: list[str], api: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from memories.api import briefs as briefs_api

    client = api(acme["employee"])
    # The worker is already up (the `published` fixture waited for it), so it starts the job well
    # within the API's start grace and the answer comes within `wait`.
    monkeypatch.setattr(briefs_api, "START_GRACE_SECONDS", 60.0)
    answered = client.post("/api/memories/extract-decisions", {"summary": PLATFORM_SUMMARY, "transcript": PLATFORM_SYNC})
    assert answered.status_code == 200, answered.content
    assert len(answered.json()["decisions"]) == 4

    accepted = client.post("/api/memories/extract-decisions?wait=0", {"transcript": PLATFORM_SYNC})
    assert accepted.status_code == 202
    status = None
    deadline = time.monotonic() + TASK_TIMEOUT
    while status not in {"succeeded", "failed"} and time.monotonic() < deadline:
        body = client.get(accepted.json()["job_url"]).json()
        status = body["status"]
        assert status in {"queued", "running", "succeeded"}
        time.sleep(0.1)
    assert status == "succeeded" and body["progress"] == 100
    assert [d["source"] for d in body["result"]["decisions"]] == ["transcript"] * 3


def test_every_task_re_run_on_the_worker_changes_nothing(
    acme: dict[str, Any], published: list[str], write: Any, api: Any
) -> None:
    from memories.tasks import after_memory_write, run_job

    write(acme["manager"], LIMIT_100, title="Public API rate limit", valid_from=timezone.now() - timedelta(days=5))
    write(acme["employee"], LIMIT_250 + " @dana.w owns the acme/rate-limiter repository.", title="Public API rate limit")
    api(acme["employee"]).post("/api/memories/extract-decisions", {"summary": PLATFORM_SUMMARY})
    drain(published)

    def snapshot() -> Any:
        return (
            list(Conflict.objects.order_by("pk").values()),
            list(Memory.objects.order_by("pk").values("pk", "status", "superseded_by", "supersedes", "updated_at")),
            list(Job.objects.order_by("pk").values()),
            AuditEvent.objects.count(),
            sorted(Memory.objects.values_list("entity_mentions__entity__name", flat=True).exclude(entity_mentions=None)),
        )

    before = snapshot()
    for memory_id in Memory.objects.values_list("pk", flat=True):
        after_memory_write.delay(str(memory_id))
    for job_id in Job.objects.values_list("pk", flat=True):
        run_job.delay(str(job_id))
    drain(published)
    assert snapshot() == before


def test_the_labelled_pairs_through_the_whole_pipeline(
    published: list[str],
    make_org: Any,
    make_scope: Any,
    make_member: Any,
    write: Any,
    settings: Any,
    capsys: pytest.CaptureFixture[str],
) -> None:
    settings.CORTEX_EMBEDDER = "local"  # the real model decides which pairs are candidates (cosine > 0.75)
    get_embedder.cache_clear()
    try:
        now = timezone.now()
        written = []
        for number, pair in enumerate(PAIRS):
            # One organization per pair, so pairs on similar topics cannot meet each other.
            org = make_org(f"pairs-{number}")
            scopes = {side.get("scope") for side in (pair["existing"], pair["new"])} - {None}
            for slug in scopes:
                make_scope(org, slug)
            author = make_member(org, "Executive", grants=dict.fromkeys(scopes, True))
            sides = []
            for side in (pair["existing"], pair["new"]):
                until = now + timedelta(days=side["valid_until_days"]) if "valid_until_days" in side else None
                sides.append(
                    write(
                        author,
                        side["content"],
                        title=side["title"],
                        source=side["source"],
                        scope=side.get("scope"),
                        valid_from=now - timedelta(days=side["age_days"]),
                        valid_until=until,
                    )
                )
            written.append((pair, *sides))
        drain(published)
    finally:
        get_embedder.cache_clear()

    rows = []
    for pair, existing, new in written:
        conflict = Conflict.objects.filter(new_memory=new, existing_memory=existing).first()
        rows.append((pair["label"], conflict.kind if conflict else "none"))
    flagged = [(label, got) for label, got in rows if got != "none"]
    positives = [(label, got) for label, got in rows if label != "none"]
    precision = sum(1 for label, _ in flagged if label != "none") / max(1, len(flagged))
    recall = sum(1 for _, got in positives if got != "none") / max(1, len(positives))
    kind_recall = sum(1 for label, got in positives if label == got) / max(1, len(positives))
    missed = [p["id"] for (p, _e, _n), (label, got) in zip(written, rows, strict=True) if label != got]
    with capsys.disabled():
        print(
            f"\npipeline on {len(rows)} pairs (MiniLM gate > 0.75 + heuristic): precision {precision:.2f}, recall {recall:.2f}, "
            f"kind recall {kind_recall:.2f}; wrong or missed: {missed}"
        )
    assert precision >= 0.95
    assert recall >= 0.7

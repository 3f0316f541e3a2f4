"""A delivery's audit event is appended after its answer, exactly once.

The answer stores the Delivery and enqueues on commit, and writes no audit event (the
organization's audit-chain lock would make a burst of answers wait for one another). An accepted
delivery's `webhook.accept` is appended by the worker that processes it, an ignored one's
`webhook.ignore` by the batch step (`delivery_record_events`, on commit and in the beat sweep),
which also records accepted deliveries whose task was lost. A duplicate writes nothing.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection, transaction
from django.utils import timezone
from github_webhooks import github_fixture, post_github
from support.stub_server import StubResponse, StubServer

from audit.models import AuditEvent
from audit.services import verify_chain
from connectors.base import ParsedDelivery
from connectors.models import Connector, Delivery
from connectors.services.deliveries import delivery_accept, delivery_record_events
from connectors.tasks import process_delivery, record_delivery_events, sweep_deliveries

pytestmark = pytest.mark.django_db

REPO = "robvanderleek/create-issue-branch"
MERGED = "pull_request__closed_merged.json"
UNMERGED = "pull_request__closed_not_merged.json"  # on Codertocat/Hello-World


def _webhook_events(connector: Connector) -> list[AuditEvent]:
    return list(
        AuditEvent.objects.filter(organization_id=connector.organization_id, action__startswith="webhook.").order_by("id")
    )


@pytest.fixture
def github(make_github: Callable[..., Connector], acme: dict[str, Any], stub_server: StubServer) -> Connector:
    stub_server.route("GET", f"/repos/{REPO}/pulls/117/files", StubResponse(json=[]))
    stub_server.route("GET", f"/repos/{REPO}/pulls/111", StubResponse(status=404, json={"message": "Not Found"}))
    return make_github(acme["exec"], repositories=[REPO, "Codertocat/Hello-World"])


def test_the_answer_writes_no_audit_event_and_each_delivery_gets_exactly_one_afterwards(
    github: Connector, acme: dict[str, Any], django_capture_on_commit_callbacks: Any
) -> None:
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        accepted = post_github(github, github_fixture(MERGED), delivery="d-accept")
        ignored = post_github(github, github_fixture(UNMERGED), delivery="d-ignore")
        again = post_github(github, github_fixture(MERGED), delivery="d-accept")
    assert (accepted.status_code, ignored.status_code, again.status_code) == (200, 202, 200)
    assert again.json()["duplicate"] is True
    # The answers wrote their deliveries and nothing in the audit chain.
    assert _webhook_events(github) == []
    assert not AuditEvent.objects.filter(organization=acme["org"], target_type="delivery").exists()
    assert set(Delivery.objects.filter(connector=github).values_list("audited", flat=True)) == {False}
    assert len(callbacks) == 2  # the worker's task, the batch step (the duplicate enqueues nothing)

    for callback in callbacks:  # what the answers left for after their commit: the worker, the batch step
        callback()

    accept_delivery = Delivery.objects.get(connector=github, delivery_id="d-accept")
    ignore_delivery = Delivery.objects.get(connector=github, delivery_id="d-ignore")
    assert accept_delivery.status == Delivery.Status.PROCESSED and accept_delivery.audited
    assert ignore_delivery.status == Delivery.Status.IGNORED and ignore_delivery.audited
    events = _webhook_events(github)
    assert sorted((e.action, e.target_id) for e in events) == sorted(
        [("webhook.accept", str(accept_delivery.pk)), ("webhook.ignore", str(ignore_delivery.pk))]
    )
    by_target = {e.target_id: e for e in events}
    accept = by_target[str(accept_delivery.pk)]
    # The event says what the answer saw: the received time, the answer's request id and address.
    assert accept.details == {
        "kind": "github",
        "event": "pull_request.closed",
        "delivery_id": "d-accept",
        "received_at": accept_delivery.received_at.isoformat(),
    }
    assert accept.request_id and accept.request_id == accept_delivery.request_id
    assert accept.ip == "127.0.0.1" and accept.actor_label == "github webhook"
    assert accept.actor_connector_id == str(github.pk)
    ignore = by_target[str(ignore_delivery.pk)]
    assert "without being merged" in ignore.details["reason"]
    assert ignore.details["received_at"] == ignore_delivery.received_at.isoformat()
    # The worker appended it with its run's events: after the memory's, before the run's end.
    memory_event = AuditEvent.objects.get(organization=acme["org"], action="memory.create")
    finish = AuditEvent.objects.get(organization=acme["org"], action="connector.sync_finish")
    assert memory_event.pk < accept.pk < finish.pk

    # Running everything again records nothing twice.
    assert delivery_record_events(batch_size=100, grace_seconds=0) == 0
    process_delivery.apply(args=(str(accept_delivery.pk),))
    assert sweep_deliveries.apply().get() == {"recorded": 0, "enqueued": 0}
    assert [e.pk for e in _webhook_events(github)] == [e.pk for e in events]
    assert verify_chain(acme["org"]).ok


def _accept(connector: Connector, *, ignored: bool, via: str = "") -> Delivery:
    parsed = ParsedDelivery(
        delivery_id=str(uuid.uuid4()),
        event="pull_request.closed",
        payload={"number": 1},
        ignored=ignored,
        reason="Not a merged pull request." if ignored else "",
    )
    delivery, _action, _reason = delivery_accept(connector=connector, parsed=parsed, via=via)
    return delivery


def test_the_batch_step_records_ignored_deliveries_at_once_accepted_ones_after_the_grace_and_none_twice(
    github: Connector, acme: dict[str, Any], django_capture_on_commit_callbacks: Any
) -> None:
    with django_capture_on_commit_callbacks(execute=False):  # no worker, no on-commit batch step
        ignored = [_accept(github, ignored=True) for _ in range(3)]
        waiting = _accept(github, ignored=False)
    assert _webhook_events(github) == []

    # Bounded, oldest first; an accepted delivery within the grace period is its worker's to record.
    assert delivery_record_events(batch_size=2, grace_seconds=300) == 2
    assert delivery_record_events(batch_size=10, grace_seconds=300) == 1
    assert delivery_record_events(batch_size=10, grace_seconds=300) == 0
    assert [(e.action, e.target_id) for e in _webhook_events(github)] == [
        ("webhook.ignore", str(delivery.pk)) for delivery in ignored
    ]
    # Past it, its task was lost: the batch step records it, once.
    Delivery.objects.filter(pk=waiting.pk).update(received_at=timezone.now() - timedelta(minutes=10))
    assert delivery_record_events(batch_size=10, grace_seconds=300) == 1
    assert delivery_record_events(batch_size=10, grace_seconds=0) == 0
    [accept] = [e for e in _webhook_events(github) if e.action == "webhook.accept"]
    assert accept.target_id == str(waiting.pk)
    # The worker that finally gets it records nothing more.
    process_delivery.apply(args=(str(waiting.pk),))
    assert Delivery.objects.get(pk=waiting.pk).status != Delivery.Status.RECEIVED
    assert len(_webhook_events(github)) == 4
    assert verify_chain(acme["org"]).ok


def test_socket_mode_deliveries_keep_how_they_came(
    github: Connector, acme: dict[str, Any], django_capture_on_commit_callbacks: Any
) -> None:
    with django_capture_on_commit_callbacks(execute=False):
        webhook = _accept(github, ignored=True)
        socket = _accept(github, ignored=True, via="socket_mode")
    assert delivery_record_events(batch_size=10, grace_seconds=300) == 2
    events = {e.target_id: e for e in _webhook_events(github)}
    assert events[str(webhook.pk)].actor_label == "github webhook" and "via" not in events[str(webhook.pk)].details
    assert events[str(socket.pk)].actor_label == "github socket mode"
    assert events[str(socket.pk)].details["via"] == "socket_mode"
    assert verify_chain(acme["org"]).ok


@pytest.mark.django_db(transaction=True)
def test_the_batch_step_leaves_a_delivery_a_worker_holds_to_that_worker(
    make_github: Callable[..., Connector], acme: dict[str, Any]
) -> None:
    connector = make_github(acme["exec"])
    delivery = Delivery.objects.create(
        organization_id=connector.organization_id, connector=connector, delivery_id="held", event="pull_request.closed"
    )
    Delivery.objects.filter(pk=delivery.pk).update(received_at=timezone.now() - timedelta(minutes=10))
    locked, release = threading.Event(), threading.Event()

    def worker() -> None:  # holds the row lock as `delivery_process` does while it works
        try:
            with transaction.atomic():
                Delivery.objects.select_for_update().get(pk=delivery.pk)
                locked.set()
                release.wait(10)
        finally:
            connection.close()

    thread = threading.Thread(target=worker)
    thread.start()
    try:
        assert locked.wait(10)
        # Skipped, not waited for: the worker records it under that lock (or a later run does).
        started = time.monotonic()
        assert delivery_record_events(batch_size=10, grace_seconds=0) == 0
        assert time.monotonic() - started < 5
    finally:
        release.set()
        thread.join(10)
    assert delivery_record_events(batch_size=10, grace_seconds=0) == 1
    assert [e.target_id for e in _webhook_events(connector)] == [str(delivery.pk)]


def test_a_burst_of_ignored_deliveries_enqueues_one_audit_step_and_the_next_after_it_read(
    github: Connector, acme: dict[str, Any], django_capture_on_commit_callbacks: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from celery.signals import before_task_publish

    from cortex_site.celery import app

    published: list[str] = []

    def count(sender: str | None = None, **_: Any) -> None:
        if sender == "connectors.record_delivery_events":
            published.append(sender)

    # Through the real broker, with no worker: what the answers enqueue stays queued.
    monkeypatch.setitem(app.conf, "task_always_eager", False)
    before_task_publish.connect(count, weak=False)
    try:
        with django_capture_on_commit_callbacks(execute=True):
            burst = [_accept(github, ignored=True) for _ in range(5)]
        assert len(published) == 1
        # The worker's task clears the flag before it reads, and records the whole burst.
        assert record_delivery_events.apply().get() == 5
        assert sorted(e.target_id for e in _webhook_events(github)) == sorted(str(d.pk) for d in burst)
        # A delivery after that read enqueues the next step.
        with django_capture_on_commit_callbacks(execute=True):
            later = _accept(github, ignored=True)
        assert len(published) == 2
        assert record_delivery_events.apply().get() == 1
        assert [e.target_id for e in _webhook_events(github)][-1] == str(later.pk)
    finally:
        before_task_publish.disconnect(count)
        app.control.purge()
    assert verify_chain(acme["org"]).ok

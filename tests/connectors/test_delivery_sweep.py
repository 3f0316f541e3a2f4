"""A webhook answered while Redis is down loses nothing: the delivery is stored and answered, and the
delivery sweep (beat) hands it to the worker once the broker is back. Its audit event, which the
worker would have recorded, is recorded by the sweep meanwhile.

"Down" is real, as in tests/hardening/faults/test_redis_down.py: the broker URL points at a loopback
port nobody listens on, so kombu fails to connect exactly as with a stopped server.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.test import override_settings
from django.utils import timezone
from github_webhooks import github_fixture, post_github
from support.stub_server import StubResponse, StubServer

from audit.models import AuditEvent
from audit.services import verify_chain
from connectors.models import Connector, Delivery
from connectors.services.deliveries import delivery_sweep
from connectors.tasks import process_delivery, sweep_deliveries
from cortex_site.celery import app
from cortex_site.embedded import free_port
from memories.models import Memory

pytestmark = pytest.mark.django_db

REPO = "robvanderleek/create-issue-branch"
MERGED = "pull_request__closed_merged.json"
UNMERGED = "pull_request__closed_not_merged.json"  # on Codertocat/Hello-World


def _reset_broker_pools() -> None:
    # Celery keeps its broker pools once made; a new broker URL needs new ones.
    app._pool = None  # type: ignore[attr-defined]
    app.amqp._producer_pool = None  # type: ignore[attr-defined]


@pytest.fixture
def broker_down() -> Iterator[Callable[[], None]]:
    """The broker unreachable until the returned function is called (Redis is back)."""
    dead = f"redis://127.0.0.1:{free_port()}/0"
    was_eager, live_broker = app.conf.task_always_eager, app.conf.broker_url
    app.conf.update(task_always_eager=False, broker_url=dead)
    _reset_broker_pools()

    def back() -> None:
        app.conf.update(task_always_eager=was_eager, broker_url=live_broker)
        _reset_broker_pools()

    yield back
    if app.conf.broker_url == dead:
        back()


def _memories(connector: Connector) -> int:
    return Memory.objects.filter(organization_id=connector.organization_id, source="GitHub").count()


def test_a_delivery_answered_while_the_broker_is_down_is_processed_once_it_is_back(
    post_github: Callable[..., Any],
    acme: dict[str, Any],
    make_github: Callable[..., Connector],
    stub_server: StubServer,
    broker_down: Callable[[], None],
) -> None:
    stub_server.route("GET", f"/repos/{REPO}/pulls/117/files", StubResponse(json=[]))
    stub_server.route("GET", f"/repos/{REPO}/pulls/111", StubResponse(status=404, json={"message": "Not Found"}))
    connector = make_github(acme["exec"])

    # The on-commit enqueue really runs and fails on the broker: the answer is still the success
    # GitHub needs (a retry of it would only be deduplicated), and the delivery is stored.
    response = post_github(connector, github_fixture(MERGED), delivery="d-down")
    assert response.status_code == 200, response.content
    delivery = Delivery.objects.get(connector=connector, delivery_id="d-down")
    assert (delivery.status, delivery.attempts) == (Delivery.Status.RECEIVED, 0)
    assert _memories(connector) == 0
    # Not yet: within the grace period the on-commit task may still be on its way.
    assert delivery_sweep(batch_size=10, grace_seconds=300) == []
    # Past it, while the broker is still down: the sweep stops and the delivery waits.
    assert delivery_sweep(batch_size=10, grace_seconds=0) == []

    broker_down()  # Redis is back (tasks run in-process, as the test settings say)
    assert delivery_sweep(batch_size=10, grace_seconds=0) == [str(delivery.pk)]
    delivery.refresh_from_db()
    assert delivery.status == Delivery.Status.PROCESSED
    assert _memories(connector) == 1
    # Nothing left to sweep, and the task run again (a late duplicate) changes nothing.
    assert delivery_sweep(batch_size=10, grace_seconds=0) == []
    process_delivery.apply(args=(str(delivery.pk),))
    assert _memories(connector) == 1


def test_the_sweep_takes_only_deliveries_never_attempted_oldest_first_and_bounded(
    acme: dict[str, Any], make_github: Callable[..., Connector]
) -> None:
    connector = make_github(acme["exec"])
    now = timezone.now()

    def stored(status: str, *, minutes_ago: int, attempts: int = 0) -> Delivery:
        delivery = Delivery.objects.create(
            organization_id=connector.organization_id,
            connector=connector,
            delivery_id=str(uuid.uuid4()),
            event="pull_request.closed",
            status=status,
            attempts=attempts,
        )
        Delivery.objects.filter(pk=delivery.pk).update(received_at=now - timedelta(minutes=minutes_ago))
        return delivery

    oldest = stored(Delivery.Status.RECEIVED, minutes_ago=30)
    older = stored(Delivery.Status.RECEIVED, minutes_ago=20)
    stored(Delivery.Status.RECEIVED, minutes_ago=1)  # within the grace period
    stored(Delivery.Status.RECEIVED, minutes_ago=40, attempts=1)  # a worker has it: its retry is scheduled
    stored(Delivery.Status.PROCESSED, minutes_ago=50)
    stored(Delivery.Status.IGNORED, minutes_ago=50)
    # Each swept delivery is processed in-process as it is enqueued (the test settings), so it is
    # no longer `received` for the next sweep; an empty payload makes no memory.
    assert delivery_sweep(batch_size=1, grace_seconds=300) == [str(oldest.pk)]
    assert delivery_sweep(batch_size=10, grace_seconds=300) == [str(older.pk)]
    assert delivery_sweep(batch_size=10, grace_seconds=300) == []


def _webhook_events(connector: Connector) -> list[AuditEvent]:
    return list(
        AuditEvent.objects.filter(organization_id=connector.organization_id, action__startswith="webhook.").order_by("id")
    )


@override_settings(CORTEX_DELIVERY_GRACE_SECONDS=0)
def test_a_delivery_whose_enqueue_failed_still_gets_its_event_through_the_sweep(
    acme: dict[str, Any],
    make_github: Callable[..., Connector],
    stub_server: StubServer,
    broker_down: Callable[[], None],
    django_capture_on_commit_callbacks: Any,
) -> None:
    stub_server.route("GET", f"/repos/{REPO}/pulls/117/files", StubResponse(json=[]))
    stub_server.route("GET", f"/repos/{REPO}/pulls/111", StubResponse(status=404, json={"message": "Not Found"}))
    github = make_github(acme["exec"], repositories=[REPO, "Codertocat/Hello-World"])
    with django_capture_on_commit_callbacks(execute=True):  # the on-commit enqueues really run, and fail
        assert post_github(github, github_fixture(MERGED), delivery="d-down").status_code == 200
        assert post_github(github, github_fixture(UNMERGED), delivery="d-down-ignored").status_code == 202
    assert _webhook_events(github) == []

    # Redis still down: the sweep cannot enqueue the accepted delivery, but records both events.
    assert sweep_deliveries.apply().get() == {"recorded": 2, "enqueued": 0}
    accepted = Delivery.objects.get(connector=github, delivery_id="d-down")
    assert accepted.status == Delivery.Status.RECEIVED and accepted.audited
    assert sorted(e.action for e in _webhook_events(github)) == ["webhook.accept", "webhook.ignore"]

    broker_down()  # Redis is back (tasks run in-process, as the test settings say)
    assert sweep_deliveries.apply().get() == {"recorded": 0, "enqueued": 1}
    assert Delivery.objects.get(pk=accepted.pk).status == Delivery.Status.PROCESSED
    assert sorted(e.action for e in _webhook_events(github)) == ["webhook.accept", "webhook.ignore"]
    assert verify_chain(acme["org"]).ok

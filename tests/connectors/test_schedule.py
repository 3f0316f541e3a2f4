"""The schedule: due connectors get one run, busy ones none, dead runs are taken over and resumed;
the cron endpoint runs the same dispatcher for one organization with its secret."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.utils import timezone
from support import assert_envelope, principal
from support.stub_server import StubResponse

from audit.models import AuditEvent
from connectors.models import Checkpoint, Connector, SyncRun
from connectors.presenters import schedule_text
from connectors.selectors import lease
from connectors.services.connectors import connector_create
from connectors.services.schedule import dispatch_due
from memories.models import Membership

GMAIL = {"config": {"label": "team"}, "credentials": {"client_id": "c", "client_secret": "s", "refresh_token": "r"}}


@pytest.fixture
def gmail(db: Any) -> Callable[..., Connector]:
    def make(admin: Membership, name: str = "Team inbox", **fields: Any) -> Connector:
        return connector_create(principal=principal(admin), kind="gmail", name=name, **{**GMAIL, **fields}).connector

    return make


def open_runs(connector: Connector) -> list[SyncRun]:
    return list(SyncRun.objects.filter(connector=connector, status__in=["queued", "running"]))


@pytest.mark.django_db
def test_a_due_connector_gets_one_scheduled_run_and_its_next_slot_is_booked(acme: dict[str, Any], gmail: Any) -> None:
    inbox = gmail(acme["exec"])
    report = dispatch_due()
    run = SyncRun.objects.get(connector=inbox)
    assert report.started == [run.pk] and run.trigger == SyncRun.Trigger.SCHEDULE and run.cap == 8
    inbox.refresh_from_db()
    assert inbox.next_sync_at is not None and inbox.next_sync_at > timezone.now() + timedelta(minutes=14)
    assert dispatch_due().started == []  # not due again until its interval has passed
    assert AuditEvent.objects.filter(action="connector.sync_start", target_id=str(run.pk)).exists()


@pytest.mark.django_db
def test_connectors_not_due_paused_in_error_or_webhook_only_are_left_alone(acme: dict[str, Any], gmail: Any) -> None:
    later = gmail(acme["exec"], name="Later")
    Connector.objects.filter(pk=later.pk).update(next_sync_at=timezone.now() + timedelta(minutes=3))
    paused = gmail(acme["exec"], name="Paused")
    Connector.objects.filter(pk=paused.pk).update(status=Connector.Status.PAUSED)
    broken = gmail(acme["exec"], name="Broken")
    Connector.objects.filter(pk=broken.pk).update(status=Connector.Status.ERROR, last_error="Reconnect the account.")
    hook = connector_create(
        principal=principal(acme["exec"]), kind="github", name="Firmware PRs", config={"repositories": ["acme/firmware"]}
    ).connector
    assert dispatch_due().started == []
    assert not SyncRun.objects.exists()
    assert {c.name for c in (later, paused, broken, hook)} == {"Later", "Paused", "Broken", "Firmware PRs"}


@pytest.mark.django_db
def test_a_connector_busy_with_a_live_run_gets_no_second_one(acme: dict[str, Any], gmail: Any) -> None:
    inbox = gmail(acme["exec"])
    first = dispatch_due().started
    SyncRun.objects.filter(pk=first[0]).update(status=SyncRun.Status.RUNNING, heartbeat_at=timezone.now())
    Connector.objects.filter(pk=inbox.pk).update(next_sync_at=timezone.now() - timedelta(seconds=1))  # its slot came again
    report = dispatch_due()
    assert report.started == [] and report.busy == [inbox.pk]
    assert [r.pk for r in open_runs(inbox)] == first
    skipped = SyncRun.objects.get(connector=inbox, status=SyncRun.Status.SKIPPED)
    assert skipped.trigger == SyncRun.Trigger.SCHEDULE and str(first[0]) in skipped.error
    assert dispatch_due().busy == []  # its slot is booked: not skipped again every minute


@pytest.mark.django_db
def test_a_dead_run_is_failed_and_the_next_run_resumes_from_the_saved_checkpoint(acme: dict[str, Any], gmail: Any) -> None:
    inbox = gmail(acme["exec"])
    dead = SyncRun.objects.get(pk=dispatch_due().started[0])
    # The worker saved a page (checkpoint with it), then was killed: its heartbeat stops.
    Checkpoint.objects.create(
        organization_id=inbox.organization_id, connector=inbox, stream="history", cursor={"historyId": "4242"}
    )
    stale = timezone.now() - lease() - timedelta(seconds=5)
    SyncRun.objects.filter(pk=dead.pk).update(
        status=SyncRun.Status.RUNNING, started_at=stale, heartbeat_at=stale, progress_done=8
    )
    Connector.objects.filter(pk=inbox.pk).update(next_sync_at=timezone.now())
    report = dispatch_due()
    dead.refresh_from_db()
    assert report.reaped == [dead.pk] and dead.status == SyncRun.Status.FAILED and "next run continues" in dead.error
    resumed = SyncRun.objects.get(pk=report.started[0])
    assert resumed.checkpoint_before == {"history": {"historyId": "4242"}}
    assert [r.pk for r in open_runs(inbox)] == [resumed.pk]
    assert AuditEvent.objects.filter(action="connector.sync_finish", details__run_id=str(dead.pk), outcome="error").exists()


@pytest.mark.django_db
def test_a_run_that_beats_again_before_it_is_reaped_keeps_going(acme: dict[str, Any], gmail: Any) -> None:
    inbox = gmail(acme["exec"])
    run_id = dispatch_due().started[0]
    SyncRun.objects.filter(pk=run_id).update(status=SyncRun.Status.RUNNING, heartbeat_at=timezone.now() - timedelta(seconds=10))
    Connector.objects.filter(pk=inbox.pk).update(next_sync_at=timezone.now())
    assert dispatch_due().reaped == []
    assert SyncRun.objects.get(pk=run_id).status == SyncRun.Status.RUNNING


@pytest.mark.django_db
def test_backfill_next_run_raises_the_cap_of_the_scheduled_run(acme: dict[str, Any], gmail: Any) -> None:
    inbox = gmail(acme["exec"])
    Connector.objects.filter(pk=inbox.pk).update(backfill_next_run=True)
    run = SyncRun.objects.get(pk=dispatch_due().started[0])
    assert run.trigger == SyncRun.Trigger.BACKFILL and run.cap is not None and run.cap > 8


@pytest.mark.django_db
def test_one_organization_is_dispatched_alone(acme: dict[str, Any], outsider: Membership, gmail: Any) -> None:
    ours, theirs = gmail(acme["exec"]), gmail(outsider, name="Globex inbox")
    report = dispatch_due(organization_id=acme["org"].pk)
    assert [SyncRun.objects.get(pk=pk).connector_id for pk in report.started] == [ours.pk]
    assert not SyncRun.objects.filter(connector=theirs).exists()


@pytest.mark.django_db(transaction=True)
def test_concurrent_dispatchers_never_start_two_runs_of_one_connector(acme: dict[str, Any], gmail: Any, stub_server: Any) -> None:
    # The runs really start (tasks run eagerly on commit in tests): Google's token endpoint, at the
    # loopback stub, refuses the refresh token, so each run ends at once with a permanent error.
    stub_server.route("POST", "/token", StubResponse(status=400, json={"error": "invalid_grant"}))
    credentials = {**GMAIL["credentials"], "token_uri": f"{stub_server.url}/token"}
    config = {"label": "team", "api_url": stub_server.url}
    inboxes = [gmail(acme["exec"], name=f"Inbox {n}", config=config, credentials=credentials) for n in range(4)]
    barrier = threading.Barrier(4)
    errors: list[BaseException] = []

    def dispatch() -> None:
        try:
            barrier.wait()
            dispatch_due()
        except BaseException as exc:  # noqa: BLE001 - reported to the test thread below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=dispatch) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not errors, errors
    for inbox in inboxes:
        runs = list(SyncRun.objects.filter(connector=inbox).values_list("trigger", flat=True))
        assert runs == [SyncRun.Trigger.SCHEDULE], (inbox.name, runs)  # one run, and not even a skipped second
    assert len(stub_server.received) >= 4 and all(r.path == "/token" for r in stub_server.received)


@pytest.mark.django_db
def test_the_card_line_says_cap_next_run_and_what_is_left(acme: dict[str, Any], gmail: Any) -> None:
    inbox = gmail(acme["exec"], per_run_cap=5)
    now = timezone.now()
    inbox.next_sync_at = now + timedelta(minutes=10, seconds=40)
    last = SyncRun(connector=inbox, status=SyncRun.Status.SUCCEEDED, cap=5, progress_done=5, progress_total=28, created_at=now)
    assert schedule_text(inbox, None, last, now) == "5 per run · next run in 11 min · about 23 left"
    # A run that ended before its cap read everything there was: its earlier hint is not "left".
    short = SyncRun(connector=inbox, status=SyncRun.Status.SUCCEEDED, cap=5, progress_done=3, progress_total=9, created_at=now)
    assert schedule_text(inbox, None, short, now) == "5 per run · next run in 11 min"
    assert schedule_text(inbox, None, None, now) == "5 per run · next run in 11 min"
    inbox.next_sync_at = now - timedelta(seconds=5)
    assert schedule_text(inbox, None, None, now) == "5 per run · next run within a minute"
    inbox.status = Connector.Status.PAUSED
    assert schedule_text(inbox, None, last, now) == "5 per run · paused · about 23 left"


# -- POST /api/cron/connectors ------------------------------------------------------------------------


@pytest.fixture
def cron_secrets(settings: Any) -> dict[str, str]:
    settings.CORTEX_CRON_SECRETS = {"acme": "acme-cron-secret-0123456789", "globex": "globex-cron-secret-9876543210"}
    return dict(settings.CORTEX_CRON_SECRETS)


def cron(organization: str, secret: str | None) -> Any:
    headers = {"Authorization": f"Bearer {secret}"} if secret is not None else {}
    return Client().post(f"/api/cron/connectors?organization={organization}", headers=headers)


@pytest.mark.django_db
def test_the_cron_endpoint_runs_the_dispatcher_once_for_its_organization(
    acme: dict[str, Any], outsider: Membership, gmail: Any, cron_secrets: dict[str, str]
) -> None:
    ours, theirs = gmail(acme["exec"]), gmail(outsider, name="Globex inbox")
    response = cron("acme", cron_secrets["acme"])
    assert response.status_code == 200
    body = response.json()
    assert body["started"] == [str(SyncRun.objects.get(connector=ours).pk)] and body["busy"] == [] and body["reaped"] == []
    assert not SyncRun.objects.filter(connector=theirs).exists()
    event = AuditEvent.objects.get(action="connector.cron_dispatch")
    assert event.organization_id == acme["org"].pk and event.details["started"] == 1
    assert cron_secrets["acme"] not in str(AuditEvent.objects.values_list("details", flat=True))


@pytest.mark.django_db
def test_the_cron_endpoint_refuses_a_wrong_missing_or_foreign_secret_alike_and_changes_nothing(
    acme: dict[str, Any], outsider: Membership, gmail: Any, cron_secrets: dict[str, str]
) -> None:
    gmail(acme["exec"])
    answers = [
        cron("acme", "not-the-secret"),
        cron("acme", None),
        cron("acme", cron_secrets["globex"]),  # another organization's secret
        cron("nowhere", cron_secrets["acme"]),  # an unknown organization
        cron("", cron_secrets["acme"]),
    ]
    messages = {assert_envelope(r, 401, "INVALID_CRON_SECRET")["message"] for r in answers}
    assert len(messages) == 1  # one refusal: nothing tells which part was wrong
    assert not SyncRun.objects.exists()
    refusals = AuditEvent.objects.filter(action="connector.cron_reject", outcome="denied")
    assert refusals.count() == 5 and refusals.filter(organization_id=acme["org"].pk).count() == 3


@pytest.mark.django_db
def test_an_organization_without_a_cron_secret_cannot_be_dispatched(acme: dict[str, Any], gmail: Any, settings: Any) -> None:
    settings.CORTEX_CRON_SECRETS = {}
    gmail(acme["exec"])
    assert_envelope(cron("acme", ""), 401, "INVALID_CRON_SECRET")
    assert_envelope(cron("acme", "anything"), 401, "INVALID_CRON_SECRET")
    assert not SyncRun.objects.exists()


@pytest.mark.django_db
def test_an_api_token_is_not_a_cron_secret(
    acme: dict[str, Any], make_token: Any, gmail: Any, cron_secrets: dict[str, str]
) -> None:
    gmail(acme["exec"])
    assert_envelope(cron("acme", make_token(acme["exec"])), 401, "INVALID_CRON_SECRET")
    assert not SyncRun.objects.exists()


@pytest.mark.django_db
def test_the_openapi_schema_documents_the_cron_endpoint_and_its_refusal(acme: dict[str, Any]) -> None:
    schema = Client().get("/api/schema/?format=json").json()
    operation = schema["paths"]["/api/cron/connectors"]["post"]
    assert {"200", "401"} <= set(operation["responses"])
    assert any(p["name"] == "organization" and p["required"] for p in operation["parameters"])


@pytest.mark.django_db
def test_beat_runs_the_dispatcher_every_minute_through_its_task(acme: dict[str, Any], gmail: Any, settings: Any) -> None:
    from connectors.tasks import dispatch_due as task

    entry = next(e for e in settings.CELERY_BEAT_SCHEDULE.values() if e["task"] == "connectors.dispatch_due")
    assert entry["schedule"] == 60.0
    inbox = gmail(acme["exec"])
    answer = task.apply().get(disable_sync_subtasks=False)
    assert answer["started"] == [str(SyncRun.objects.get(connector=inbox).pk)]

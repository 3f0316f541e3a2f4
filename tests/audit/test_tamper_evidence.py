"""Closing the gaps in tamper evidence: TRUNCATE is refused, the chain head is anchored by signed
checkpoints outside the table, and retention cuts the chain without breaking its proof."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta

import pytest
from django.db import DatabaseError, connection, transaction
from django.utils import timezone

from audit import tasks
from audit.models import AuditCheckpoint, AuditEvent
from audit.services import (
    Actor,
    EventSpec,
    RetentionResult,
    _event_digest,  # the chain's own digest, to forge an event that re-hashes
    checkpoint,
    enforce_retention,
    record,
    record_many,
    verify_and_checkpoint,
    verify_chain,
)
from memories.models import Organization

pytestmark = pytest.mark.django_db


@contextmanager
def triggers_disabled(table: str = "audit_auditevent") -> Iterator[None]:
    """What someone with owner access to the database could do behind Cortex's back."""
    with connection.cursor() as cursor:
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
        cursor.execute(f"ALTER TABLE {table} DISABLE TRIGGER USER")
    try:
        yield
    finally:
        with connection.cursor() as cursor:
            cursor.execute(f"ALTER TABLE {table} ENABLE TRIGGER USER")
            cursor.execute("SET CONSTRAINTS ALL DEFERRED")


def _events(org: Organization, n: int, action: str = "embedding.reembed.finish") -> list[AuditEvent]:
    return [record(action, organization=org, actor=Actor.cli(), details={"i": i}) for i in range(n)]


def _events_at(org: Organization, n: int, when: datetime) -> list[AuditEvent]:
    """Events written at `when` (the hash covers created_at, so they are written then, not aged afterwards)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("audit.services.timezone.now", lambda: when)
        return _events(org, n, "conflict.reopen")


def _org_since(make_org: Callable[..., Organization], days: int) -> Organization:
    """An organization created `days` ago (its own creation event is that old too)."""
    when = timezone.now() - timedelta(days=days)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("audit.services.timezone.now", lambda: when)
        return make_org()


def _as_a_fresh_database() -> None:
    """The next audit event gets id 1, as a new install's first one does (the table must be empty)."""
    if AuditEvent.objects.exists():
        pytest.fail("the test database holds audit events from outside this test")
    with connection.cursor() as cursor:
        cursor.execute("SELECT setval(pg_get_serial_sequence('audit_auditevent', 'id'), 1, false)")


@pytest.mark.parametrize("table", ["audit_auditevent", "audit_auditcheckpoint"])
def test_truncate_is_refused(make_org: Callable[..., Organization], table: str) -> None:
    org = make_org()
    _events(org, 2)
    verify_and_checkpoint(org)
    with pytest.raises(DatabaseError, match="TRUNCATE"), transaction.atomic(), connection.cursor() as cursor:
        # The test runner's connections may truncate (to flush between tests); a real connection may not.
        cursor.execute("SET LOCAL cortex.audit_allow_truncate = 'off'")
        cursor.execute(f"TRUNCATE {table} CASCADE")
    assert AuditEvent.objects.filter(organization=org).count() >= 2


def test_checkpoints_are_append_only(make_org: Callable[..., Organization]) -> None:
    org = make_org()
    _events(org, 1)
    verify_and_checkpoint(org)
    ckpt = AuditCheckpoint.objects.get(organization=org)
    with pytest.raises(DatabaseError, match="append-only"), transaction.atomic():
        AuditCheckpoint.objects.filter(pk=ckpt.pk).update(last_event_id=1)
    with pytest.raises(DatabaseError, match="append-only"), transaction.atomic():
        AuditCheckpoint.objects.filter(pk=ckpt.pk).delete()


def test_removing_the_newest_events_is_detected_after_a_checkpoint(make_org: Callable[..., Organization]) -> None:
    org = make_org()
    events = _events(org, 5)
    assert verify_and_checkpoint(org).ok  # verify signs the head it proved
    with triggers_disabled(), connection.cursor() as cursor:
        cursor.execute("DELETE FROM audit_auditevent WHERE id >= %s", [events[3].pk])
    report = verify_chain(org)
    assert not report.ok and report.first_broken == events[-1].pk
    assert "newest events were removed" in report.reason
    assert not checkpoint(org).ok  # and the periodic checkpoint refuses to sign the shortened chain


def test_removing_every_event_is_detected(make_org: Callable[..., Organization]) -> None:
    org = make_org()
    _events(org, 3)
    assert verify_and_checkpoint(org).ok
    with triggers_disabled(), connection.cursor() as cursor:
        cursor.execute("DELETE FROM audit_auditevent WHERE organization_id = %s", [org.pk])
    report = verify_chain(org)
    assert not report.ok and report.count == 0


def test_a_forged_checkpoint_is_detected(make_org: Callable[..., Organization]) -> None:
    org = make_org()
    events = _events(org, 3)
    assert verify_and_checkpoint(org).ok
    with triggers_disabled(), connection.cursor() as cursor:
        cursor.execute("DELETE FROM audit_auditevent WHERE id = %s", [events[-1].pk])
    with triggers_disabled("audit_auditcheckpoint"):
        # Point the checkpoint at the new last event; without the server key the signature cannot follow.
        AuditCheckpoint.objects.filter(organization=org).update(last_event_id=events[-2].pk, last_hash=events[-2].hash)
    report = verify_chain(org)
    assert not report.ok and "signature" in report.reason


def test_a_checkpoint_signed_with_another_key_does_not_verify(make_org: Callable[..., Organization], settings: object) -> None:
    org = make_org()
    _events(org, 2)
    assert verify_and_checkpoint(org).ok
    settings.CORTEX_AUDIT_KEY = "another-server-key"  # type: ignore[attr-defined]
    assert "signature" in verify_chain(org).reason


def test_the_periodic_checkpoint_is_incremental_and_signs_each_chain(make_org: Callable[..., Organization]) -> None:
    a, b = make_org(), make_org()
    _events(a, 2)
    _events(b, 1)
    assert tasks.checkpoint_all() == {"chains": Organization.objects.count() + 1, "broken": 0}
    head = AuditCheckpoint.objects.filter(organization=a, kind="head").latest("id")
    assert head.last_event_id == AuditEvent.objects.filter(organization=a).latest("id").pk
    _events(a, 2)
    tasks.checkpoint_all()
    newer = AuditCheckpoint.objects.filter(organization=a, kind="head").latest("id")
    assert newer.last_event_id > head.last_event_id and newer.event_count == head.event_count + 2
    assert verify_chain(a).ok and verify_chain(b).ok


def test_a_change_after_the_last_checkpoint_is_found_at_that_event(make_org: Callable[..., Organization]) -> None:
    org = make_org()
    _events(org, 2)
    checkpoint(org)
    later = _events(org, 3)
    with triggers_disabled(), connection.cursor() as cursor:
        cursor.execute("UPDATE audit_auditevent SET details = '{\"i\": 99}'::jsonb WHERE id = %s", [later[1].pk])
    report = checkpoint(org)
    assert not report.ok and report.first_broken == later[1].pk
    assert verify_chain(org).first_broken == later[1].pk


# -- retention ---------------------------------------------------------------------------------------------
def test_retention_removes_old_events_and_the_chain_still_verifies(make_org: Callable[..., Organization]) -> None:
    org = _org_since(make_org, 900)
    old = _events_at(org, 4, timezone.now() - timedelta(days=800))
    recent = _events(org, 3)
    total_before = AuditEvent.objects.filter(organization=org).count()
    result = enforce_retention(org)
    assert not result.more and result.removed >= len(old)
    remaining = set(AuditEvent.objects.filter(organization=org).values_list("pk", flat=True))
    assert not remaining & {e.pk for e in old} and {e.pk for e in recent} <= remaining
    cut = AuditCheckpoint.objects.get(organization=org, kind="retention")
    assert cut.last_event_id == max(e.pk for e in old)
    report = verify_chain(org)
    assert report.ok, report
    assert report.count == total_before + 1  # the removed ones still count, plus the audit.retention event
    assert AuditEvent.objects.filter(organization=org, action="audit.retention").exists()
    # Idempotent: nothing more is old enough.
    assert enforce_retention(org).removed == 0


def test_retention_runs_in_bounded_batches_and_the_task_re_enqueues(
    make_org: Callable[..., Organization], monkeypatch: pytest.MonkeyPatch, settings: object
) -> None:
    org = _org_since(make_org, 1100)
    _events_at(org, 7, timezone.now() - timedelta(days=1000))
    first = enforce_retention(org, batch_size=3)
    assert first.removed == 3 and first.more
    assert verify_chain(org).ok  # verifiable after each cut, not just at the end
    settings.CORTEX_AUDIT_RETENTION_BATCH = 3  # type: ignore[attr-defined]
    again: list[int] = []
    monkeypatch.setattr(tasks.enforce_retention, "apply_async", lambda **kw: again.append(1))
    tasks.enforce_retention()
    assert again == [1]  # more to do: it enqueued itself
    while enforce_retention(org, batch_size=3).removed:
        pass
    assert not AuditEvent.objects.filter(organization=org, action="conflict.reopen").exists()
    assert AuditCheckpoint.objects.filter(organization=org, kind="retention").count() >= 3
    assert verify_chain(org).ok


def test_retention_follows_each_organizations_own_period(make_org: Callable[..., Organization]) -> None:
    strict, default = _org_since(make_org, 90), _org_since(make_org, 90)
    Organization.objects.filter(pk=strict.pk).update(audit_retention_days=30)
    strict.refresh_from_db()
    s_old = _events_at(strict, 2, timezone.now() - timedelta(days=60))
    d_old = _events_at(default, 2, timezone.now() - timedelta(days=60))
    enforce_retention(strict)
    enforce_retention(default)
    assert not AuditEvent.objects.filter(pk__in=[e.pk for e in s_old]).exists()
    assert AuditEvent.objects.filter(pk__in=[e.pk for e in d_old]).count() == 2  # within two years
    assert verify_chain(strict).ok and verify_chain(default).ok


def test_retention_refuses_to_bless_a_tampered_prefix(make_org: Callable[..., Organization]) -> None:
    org = _org_since(make_org, 900)
    old = _events_at(org, 3, timezone.now() - timedelta(days=800))
    with triggers_disabled(), connection.cursor() as cursor:
        cursor.execute("UPDATE audit_auditevent SET action = 'test.forged' WHERE id = %s", [old[1].pk])
    result = enforce_retention(org)
    assert result.removed == 0 and str(old[1].pk) in result.refused
    assert AuditEvent.objects.filter(pk=old[0].pk).exists()
    assert verify_chain(org).first_broken == old[1].pk


def test_removing_old_events_without_the_retention_task_is_detected(make_org: Callable[..., Organization]) -> None:
    org = _org_since(make_org, 900)
    old = _events_at(org, 3, timezone.now() - timedelta(days=800))
    _events(org, 2)
    with triggers_disabled(), connection.cursor() as cursor:
        cursor.execute("DELETE FROM audit_auditevent WHERE organization_id = %s AND id <= %s", [org.pk, old[-1].pk])
    assert not verify_chain(org).ok


def test_delete_outside_the_retention_window_stays_refused(make_org: Callable[..., Organization]) -> None:
    org = make_org()
    events = _events(org, 2)
    with pytest.raises(DatabaseError, match="append-only"), transaction.atomic(), connection.cursor() as cursor:
        # Naming another chain, or a later id, in the purge setting does not open the table.
        cursor.execute("SELECT set_config('cortex.audit_purge', %s, true)", [f"{org.pk + 1}:{events[-1].pk}"])
        cursor.execute("DELETE FROM audit_auditevent WHERE id = %s", [events[0].pk])


@pytest.mark.django_db(transaction=True)
def test_concurrent_writers_and_checkpoints_leave_an_unbroken_anchored_chain(make_org: Callable[..., Organization]) -> None:
    org = make_org("busy-anchored")
    threads, per_thread = 4, 6
    start = threading.Barrier(threads + 1)
    errors: list[BaseException] = []

    def write(worker: int) -> None:
        try:
            start.wait()
            for i in range(per_thread):
                with transaction.atomic():
                    record("mcp.call", organization=org.pk, actor=Actor.system(f"w{worker}"), details={"i": i})
        except BaseException as exc:  # noqa: BLE001 - surfaced to the test thread below
            errors.append(exc)
        finally:
            connection.close()

    def sign() -> None:
        try:
            start.wait()
            for _ in range(5):
                if not checkpoint(org.pk).ok:
                    errors.append(AssertionError("a checkpoint found the chain broken"))
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)
        finally:
            connection.close()

    workers = [threading.Thread(target=write, args=(n,)) for n in range(threads)] + [threading.Thread(target=sign)]
    for thread in workers:
        thread.start()
    for thread in workers:
        thread.join(60)
    assert not errors, errors
    assert AuditEvent.objects.filter(organization=org, action="mcp.call").count() == threads * per_thread
    report = verify_and_checkpoint(org)
    assert report.ok and report.count == AuditEvent.objects.filter(organization=org).count()


def test_beat_signs_heads_every_ten_minutes_and_enforces_retention_hourly() -> None:
    from cortex_site.celery import app

    schedule = {entry["task"]: entry["schedule"] for entry in app.conf.beat_schedule.values()}
    assert schedule["audit.checkpoint_all"] == 600.0 and schedule["audit.enforce_retention"] == 3600.0
    assert {"audit.checkpoint_all", "audit.enforce_retention"} <= set(app.tasks)


def test_a_checkpoint_with_a_wrong_signature_reports_that_nothing_was_verified(make_org: Callable[..., Organization]) -> None:
    org = make_org()
    _events(org, 2)
    assert verify_and_checkpoint(org).ok
    with triggers_disabled("audit_auditcheckpoint"):
        AuditCheckpoint.objects.filter(organization=org).update(event_count=1)
    report = verify_chain(org)
    assert (report.ok, report.count, "signature" in report.reason) == (False, 0, True)


def test_retention_that_removes_every_event_lets_the_chain_go_on_from_the_cut(make_org: Callable[..., Organization]) -> None:
    org = _org_since(make_org, 900)
    _events_at(org, 3, timezone.now() - timedelta(days=800))
    result = enforce_retention(org)
    assert result.removed >= 3 and not result.more  # the organization's creation too: nothing of the chain is left
    # The retention event itself was the first to link to the cut instead of to an event; the next ones follow it.
    cut = AuditCheckpoint.objects.get(organization=org, kind="retention")
    (retention,) = AuditEvent.objects.filter(organization=org)
    assert retention.action == "audit.retention" and retention.prev_hash == cut.last_hash
    _events(org, 2)
    assert verify_chain(org).ok


@pytest.mark.parametrize("signed_before", [True, False], ids=["head-older-than-the-cut", "head-at-the-cut"])
def test_retention_past_or_at_the_signed_head_still_verifies(make_org: Callable[..., Organization], signed_before: bool) -> None:
    org = _org_since(make_org, 900)
    when = timezone.now() - timedelta(days=800)
    _events_at(org, 2, when)
    if signed_before:
        assert verify_and_checkpoint(org).ok
        _events_at(org, 2, when)  # more old events after the signed head: the cut lands beyond it
    else:
        _events_at(org, 2, when)
        assert verify_and_checkpoint(org).ok  # the head signed is the last old event: the cut lands on it
    enforce_retention(org)
    head = AuditCheckpoint.objects.filter(organization=org, kind="head").latest("id")
    cut = AuditCheckpoint.objects.get(organization=org, kind="retention")
    assert (head.last_event_id < cut.last_event_id) is signed_before and head.last_event_id <= cut.last_event_id
    assert verify_chain(org).ok


def test_the_first_event_of_a_fresh_database_is_verified_too(make_org: Callable[..., Organization]) -> None:
    # A new install's first organization writes event id 1: the walk must start before it, not at it.
    _as_a_fresh_database()
    org = make_org()
    first = AuditEvent.objects.filter(organization=org).earliest("id")
    assert first.pk == 1
    report = verify_chain(org)
    assert report.ok and report.count == AuditEvent.objects.filter(organization=org).count()
    periodic = checkpoint(org)  # the incremental walk starts before event 1 as well
    assert periodic.ok and periodic.count == report.count


# -- the periodic checkpoint, the explicit one and retention, at their edges (mutation-run survivors) ----------


def _heads(org: Organization) -> int:
    return AuditCheckpoint.objects.filter(organization=org, kind="head").count()


def test_the_periodic_checkpoint_counts_every_event_and_refuses_a_forged_start(make_org: Callable[..., Organization]) -> None:
    org = make_org()
    _events(org, 3)
    first = checkpoint(org)
    assert first.ok and first.count == AuditEvent.objects.filter(organization=org).count()  # from the genesis, all of them
    again = checkpoint(org)  # nothing appended since: verified, and no head to sign
    assert again.ok and again.head_id is None and _heads(org) == 1
    with triggers_disabled("audit_auditcheckpoint"):
        AuditCheckpoint.objects.filter(organization=org).update(event_count=1)
    forged = checkpoint(org)
    assert (forged.ok, forged.count, "signature" in forged.reason) == (False, 0, True)


def test_the_periodic_checkpoint_never_signs_a_broken_chain(make_org: Callable[..., Organization]) -> None:
    org = make_org()
    events = _events(org, 3)
    with triggers_disabled(), connection.cursor() as cursor:
        cursor.execute("UPDATE audit_auditevent SET details = '{\"i\": 42}'::jsonb WHERE id = %s", [events[1].pk])
    assert not checkpoint(org).ok
    assert _heads(org) == 0
    assert not verify_and_checkpoint(org).ok
    assert _heads(org) == 0


def test_an_explicit_checkpoint_signs_a_head_once_and_a_newer_one_again(make_org: Callable[..., Organization]) -> None:
    org = make_org()
    _events(org, 2)
    assert verify_and_checkpoint(org).ok and _heads(org) == 1
    assert verify_and_checkpoint(org).ok and _heads(org) == 1  # nothing new: the same head is not signed twice
    _events(org, 1)
    assert verify_and_checkpoint(org).ok and _heads(org) == 2


def test_retention_with_nothing_old_enough_removes_nothing_and_has_nothing_more(make_org: Callable[..., Organization]) -> None:
    org = make_org()
    _events(org, 2)
    assert enforce_retention(org) == RetentionResult(removed=0, more=False)


def test_retention_says_more_only_when_more_than_a_batch_is_old(make_org: Callable[..., Organization]) -> None:
    org = _org_since(make_org, 900)
    _events_at(org, 2, timezone.now() - timedelta(days=800))  # with the organization's own first events: 3 or more
    old = AuditEvent.objects.filter(organization=org).count()
    assert enforce_retention(org, batch_size=old) == RetentionResult(removed=old, more=False)
    org2 = _org_since(make_org, 900)
    _events_at(org2, 2, timezone.now() - timedelta(days=800))
    old2 = AuditEvent.objects.filter(organization=org2).count()
    assert enforce_retention(org2, batch_size=old2 - 1) == RetentionResult(removed=old2 - 1, more=True)


def test_retention_removes_a_thousand_at_a_time_unless_told(make_org: Callable[..., Organization]) -> None:
    org = _org_since(make_org, 900)
    when = timezone.now() - timedelta(days=800)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("audit.services.timezone.now", lambda: when)
        record_many([EventSpec("conflict.reopen", details={"i": i}) for i in range(1001)], organization=org, actor=Actor.cli())
    result = enforce_retention(org)
    assert (result.removed, result.more) == (1000, True)
    assert verify_chain(org).ok


@pytest.mark.parametrize("forged_link", ["0" * 64, "f" * 64], ids=["below", "above"])
def test_retention_refuses_a_prefix_whose_link_is_forged_either_way(
    make_org: Callable[..., Organization], forged_link: str
) -> None:
    org = _org_since(make_org, 900)
    old = _events_at(org, 3, timezone.now() - timedelta(days=800))
    # A forger who re-hashes the event they relinked: only the link itself gives it away.
    forged = AuditEvent.objects.get(pk=old[1].pk)
    forged.prev_hash = forged_link
    with triggers_disabled(), connection.cursor() as cursor:
        cursor.execute(
            "UPDATE audit_auditevent SET prev_hash = %s, hash = %s WHERE id = %s", [forged_link, _event_digest(forged), forged.pk]
        )
    result = enforce_retention(org)
    assert (result.removed, result.more) == (0, False) and f"event {old[1].pk} does not verify" in result.refused
    assert AuditEvent.objects.filter(pk=old[0].pk).exists()


def test_retention_refuses_to_go_on_from_a_forged_cut(make_org: Callable[..., Organization]) -> None:
    org = _org_since(make_org, 900)
    _events_at(org, 4, timezone.now() - timedelta(days=800))
    assert enforce_retention(org, batch_size=2).removed == 2
    with triggers_disabled("audit_auditcheckpoint"):
        AuditCheckpoint.objects.filter(organization=org, kind="retention").update(event_count=99)
    assert enforce_retention(org, batch_size=2) == RetentionResult(
        removed=0, more=False, refused="a checkpoint's signature is wrong"
    )


def test_the_periodic_checkpoint_goes_on_from_a_retention_cut(make_org: Callable[..., Organization]) -> None:
    org = _org_since(make_org, 900)
    _events_at(org, 3, timezone.now() - timedelta(days=800))
    assert enforce_retention(org).removed >= 3  # the cut is now the newest checkpoint, its event gone
    report = checkpoint(org)
    assert report.ok, report
    assert verify_chain(org).ok


def test_retention_on_a_fresh_database_starts_before_event_1(make_org: Callable[..., Organization]) -> None:
    _as_a_fresh_database()
    org = _org_since(make_org, 900)
    assert AuditEvent.objects.filter(organization=org).earliest("id").pk == 1
    _events_at(org, 2, timezone.now() - timedelta(days=800))
    result = enforce_retention(org)
    assert result.refused == "" and result.removed >= 3
    assert verify_chain(org).ok

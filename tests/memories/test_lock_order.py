"""The locks the lifecycle services take, and in what order, seen from another connection while a
service waits (real transactions on committed data, the service in a thread of its own).

Each lock is there for a reason a single-connection test cannot see: the audit chain before any
row (the order every audited write takes them in, so two writers never wait on each other in a
cycle), and a memory's row before reading what a change starts from (so two changes of one memory
apply one after the other, each from what the other left)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
import pytest
from django.db import connection
from psycopg import errors as pg_errors
from support import principal, remember

from audit.models import AuditEvent
from memories.models import Memory
from memories.services.memories import memory_patch, memory_redact
from memories.services.memories.lifecycle import memory_restore, memory_supersede_with_existing

pytestmark = pytest.mark.django_db(transaction=True)


def _connect() -> psycopg.Connection[Any]:
    settings = connection.settings_dict
    return psycopg.connect(
        dbname=settings["NAME"],
        user=settings["USER"],
        password=settings["PASSWORD"],
        host=settings["HOST"],
        port=settings["PORT"] or None,
        autocommit=True,
    )


@contextmanager
def _holding(sql: str, params: list[Any]) -> Iterator[psycopg.Connection[Any]]:
    """Another connection holding a lock (taken by `sql`) until the block ends, then committing."""
    holder = _connect()
    try:
        holder.execute("BEGIN")
        holder.execute(sql, params)
        yield holder
        holder.execute("COMMIT")
    finally:
        holder.close()


def _in_thread(call: Callable[[], Any]) -> tuple[threading.Thread, list[Any]]:
    result: list[Any] = []

    def run() -> None:
        try:
            result.append(call())
        except BaseException as exc:  # noqa: BLE001 - handed to the test's thread
            result.append(exc)
        finally:
            connection.close()

    thread = threading.Thread(target=run)
    thread.start()
    return thread, result


def _wait_until_blocked(probe: psycopg.Connection[Any], holder: psycopg.Connection[Any]) -> None:
    """Until a backend of the test database waits for a lock the holder has."""
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        row = probe.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE %s = ANY(pg_blocking_pids(pid))", [holder.info.backend_pid]
        ).fetchone()
        if row and row[0]:
            return
        time.sleep(0.02)
    raise AssertionError("the service never waited for the lock held")


def _row_locked(probe: psycopg.Connection[Any], table: str, pk: Any) -> bool:
    try:
        probe.execute(f"SELECT 1 FROM {table} WHERE id = %s FOR UPDATE NOWAIT", [pk])  # noqa: S608 - our table names
    except pg_errors.LockNotAvailable:
        return True
    return False


def _finish(thread: threading.Thread, result: list[Any]) -> Any:
    thread.join(30)
    assert result, "the service did not finish"
    if isinstance(result[0], BaseException):
        raise result[0]
    return result[0]


def test_superseding_with_an_existing_memory_takes_the_audit_chain_before_the_rows(acme: dict[str, Any]) -> None:
    # Unrelated contents: the (eager) post-write conflict check must not decide the pair first.
    loser = remember(acme["employee"], "Deploys need two approvals.", scope="engineering")
    winner = remember(acme["employee"], "Parking is free after 6pm.", scope="engineering")
    actor = principal(acme["exec"]).actor
    probe = _connect()
    try:
        with _holding("SELECT pg_advisory_xact_lock(7301, %s)", [acme["org"].pk]) as holder:
            thread, result = _in_thread(
                lambda: memory_supersede_with_existing(loser_id=loser.pk, winner_id=winner.pk, actor=actor, reason="newer")
            )
            _wait_until_blocked(probe, holder)
            # Waiting for the chain, it holds neither memory's row yet.
            assert not _row_locked(probe, "memories_memory", loser.pk)
            assert not _row_locked(probe, "memories_memory", winner.pk)
        _finish(thread, result)
    finally:
        probe.close()
    assert Memory.objects.get(pk=loser.pk).status == "superseded"


def test_a_restore_locks_the_memory_before_its_hold(acme: dict[str, Any]) -> None:
    memory = remember(acme["employee"], "The staging password is tangerine-42.", scope="engineering")
    memory_redact(principal=principal(acme["employee"]), memory_id=memory.pk, reason="a password")
    admin = principal(acme["exec"])
    probe = _connect()
    try:
        with _holding("SELECT 1 FROM memories_redactionhold WHERE memory_id = %s FOR UPDATE", [memory.pk]) as holder:
            thread, result = _in_thread(lambda: memory_restore(principal=admin, memory_id=memory.pk))
            _wait_until_blocked(probe, holder)
            assert _row_locked(probe, "memories_memory", memory.pk)  # a redaction or erasure of it waits meanwhile
        _finish(thread, result)
    finally:
        probe.close()
    assert Memory.objects.get(pk=memory.pk).status == "active"


def test_a_patch_starts_from_what_a_concurrent_change_left(acme: dict[str, Any]) -> None:
    memory = remember(acme["employee"], "Backups run nightly.", scope="engineering", tags=["ops"])
    author = principal(acme["employee"])
    probe = _connect()
    try:
        with _holding("SELECT 1 FROM memories_memory WHERE id = %s FOR UPDATE", [memory.pk]) as holder:
            thread, result = _in_thread(
                lambda: memory_patch(principal=author, memory_id=memory.pk, changes={"tags": ["backups"]})
            )
            _wait_until_blocked(probe, holder)
            holder.execute("UPDATE memories_memory SET tags = %s WHERE id = %s", [["storage"], memory.pk])
        _finish(thread, result)
    finally:
        probe.close()
    event = AuditEvent.objects.filter(action="memory.patch", target_id=str(memory.pk)).get()
    # It waited for the row, then read it: the change it records starts from the other writer's tags.
    assert event.details["changed"]["tags"] == {"from": ["storage"], "to": ["backups"]}
    assert Memory.objects.get(pk=memory.pk).tags == ["backups"]


def test_a_restore_whose_hold_ended_while_it_waited_is_refused_and_writes_nothing(acme: dict[str, Any]) -> None:
    from cortex_site.errors import Conflict

    memory = remember(acme["employee"], "The staging password is tangerine-42.", scope="engineering")
    memory_redact(principal=principal(acme["employee"]), memory_id=memory.pk, reason="a password")
    admin = principal(acme["exec"])
    probe = _connect()
    try:
        with _holding("SELECT 1 FROM memories_memory WHERE id = %s FOR UPDATE", [memory.pk]) as holder:
            thread, result = _in_thread(lambda: memory_restore(principal=admin, memory_id=memory.pk))
            _wait_until_blocked(probe, holder)
            # Meanwhile the hold ends (made final, or restored by another admin): what it held is gone.
            holder.execute("DELETE FROM memories_redactionhold WHERE memory_id = %s", [memory.pk])
        with pytest.raises(Conflict) as refused:
            _finish(thread, result)
    finally:
        probe.close()
    assert refused.value.error_code == "REDACTION_FINAL"
    stored = Memory.objects.get(pk=memory.pk)
    assert stored.status == "redacted" and "tangerine" not in stored.content
    assert not AuditEvent.objects.filter(action="memory.restore").exists()


def test_a_redaction_holds_what_a_concurrent_change_left(acme: dict[str, Any]) -> None:
    from memories.models import RedactionHold

    memory = remember(acme["employee"], "The staging password is tangerine-42.", scope="engineering")
    author = principal(acme["employee"])
    probe = _connect()
    try:
        with _holding("SELECT 1 FROM memories_memory WHERE id = %s FOR UPDATE", [memory.pk]) as holder:
            thread, result = _in_thread(lambda: memory_redact(principal=author, memory_id=memory.pk, reason="a password"))
            _wait_until_blocked(probe, holder)
            holder.execute("UPDATE memories_memory SET tags = %s WHERE id = %s", [["secrets"], memory.pk])
        _finish(thread, result)
    finally:
        probe.close()
    # It waited for the row, then read it: the restore would bring back the tags the other writer left.
    assert RedactionHold.objects.get(memory_id=memory.pk).tags == ["secrets"]


def test_an_erasure_records_what_the_memory_was_when_it_went(acme: dict[str, Any]) -> None:
    from memories.services.memories import memory_delete

    memory = remember(acme["employee"], "Old onboarding checklist.", scope="engineering")
    admin = principal(acme["exec"])
    probe = _connect()
    try:
        with _holding("SELECT 1 FROM memories_memory WHERE id = %s FOR UPDATE", [memory.pk]) as holder:
            thread, result = _in_thread(lambda: memory_delete(principal=admin, memory_id=memory.pk))
            _wait_until_blocked(probe, holder)
            holder.execute("UPDATE memories_memory SET status = 'superseded' WHERE id = %s", [memory.pk])
        _finish(thread, result)
    finally:
        probe.close()
    event = AuditEvent.objects.filter(action="memory.delete", target_id=str(memory.pk)).get()
    assert event.details["status"] == "superseded" and not Memory.objects.filter(pk=memory.pk).exists()


def test_making_holds_final_skips_one_a_restore_holds_and_does_not_wait_for_it(acme: dict[str, Any]) -> None:
    from datetime import timedelta

    from django.utils import timezone

    from memories.models import RedactionHold
    from memories.services.memories import redaction_holds_finalise

    author = principal(acme["employee"])
    memories = [remember(acme["employee"], f"Secret number {i}: {i * 7919}.", scope="engineering") for i in range(2)]
    for memory in memories:
        memory_redact(principal=author, memory_id=memory.pk, reason="old")
    RedactionHold.objects.update(held_until=timezone.now() - timedelta(hours=1))
    busy, free = memories
    with _holding("SELECT 1 FROM memories_redactionhold WHERE memory_id = %s FOR UPDATE", [busy.pk]):
        thread, result = _in_thread(lambda: redaction_holds_finalise(batch_size=10))
        thread.join(10)
        finished = not thread.is_alive()
    assert finished, "making holds final waited for a hold another transaction held"
    assert _finish(thread, result) == (1, False)
    assert list(RedactionHold.objects.values_list("memory_id", flat=True)) == [busy.pk]
    assert not RedactionHold.objects.filter(memory_id=free.pk).exists()

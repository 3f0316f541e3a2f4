"""The redaction hold: a redaction keeps the removed words for CORTEX_REDACTION_HOLD_DAYS so an
admin can restore it; an urgent one (the author or an admin) is final at once; a bounded periodic
task makes expired holds final. Nobody else restores, and no word of a redacted memory is searchable
while it is held."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone
from support import assert_envelope, principal, remember, signed_in

from audit.models import AuditEvent
from memories.models import Memory, MemoryChunk, RedactionHold
from memories.selectors.recall import RecallQuery, recall
from memories.services.memories import memory_redact
from memories.tasks import finalise_redaction_holds

pytestmark = pytest.mark.django_db

SECRET = "The staging database password is tangerine-42."


def test_a_held_redaction_is_out_of_search_and_an_admin_restores_it(acme: dict[str, Any], api: Any) -> None:
    memory = remember(acme["employee"], SECRET, scope="engineering", tags=["staging"])
    body = api(acme["employee"]).post(f"/api/memories/{memory.pk}/redact", {"reason": "maybe wrong"}).json()
    assert body["status"] == "redacted" and body["redaction"]["held_until"] is not None
    assert "tangerine" not in Memory.objects.get(pk=memory.pk).content
    assert not MemoryChunk.objects.filter(memory=memory).exists()
    hits = recall(principal(acme["exec"]), RecallQuery(query="staging database password", limit=5), audit=False).hits
    assert memory.pk not in {h.memory.pk for h in hits}
    # Only an admin restores: not the author, not a higher rung, not a read-only admin token.
    for membership in (acme["employee"], acme["manager"]):
        assert_envelope(api(membership).post(f"/api/memories/{memory.pk}/restore"), 403, "ADMIN_REQUIRED")
    assert_envelope(api(acme["exec"], read_only=True).post(f"/api/memories/{memory.pk}/restore"), 403, "TOKEN_READ_ONLY")
    assert Memory.objects.get(pk=memory.pk).status == "redacted"
    restored = api(acme["exec"]).post(f"/api/memories/{memory.pk}/restore")
    assert restored.status_code == 200 and restored.json()["content"] == SECRET and restored.json()["tags"] == ["staging"]
    assert restored.json()["status"] == "active" and not RedactionHold.objects.exists()
    hits = recall(principal(acme["exec"]), RecallQuery(query="staging database password", limit=5), audit=False).hits
    assert memory.pk in {h.memory.pk for h in hits}
    assert AuditEvent.objects.filter(action="memory.restore", target_id=str(memory.pk)).exists()


def test_an_urgent_redaction_is_final_at_once_and_only_the_author_or_an_admin_makes_it(acme: dict[str, Any], api: Any) -> None:
    memory = remember(acme["employee"], SECRET, scope="engineering")
    done = api(acme["employee"]).post(f"/api/memories/{memory.pk}/redact", {"reason": "a live password", "urgent": True})
    assert done.status_code == 200 and done.json()["redaction"]["held_until"] is None
    assert not RedactionHold.objects.exists()
    assert_envelope(api(acme["exec"]).post(f"/api/memories/{memory.pk}/restore"), 409, "REDACTION_FINAL")
    assert Memory.objects.get(pk=memory.pk).status == "redacted"


def test_expired_holds_are_made_final_in_bounded_batches(acme: dict[str, Any], settings: Any) -> None:
    memories = [remember(acme["employee"], f"Secret number {i}: {i * 7919}.", scope="engineering") for i in range(3)]
    for memory in memories:
        memory_redact(principal=principal(acme["employee"]), memory_id=memory.pk, reason="old")
    RedactionHold.objects.filter(memory_id__in=[m.pk for m in memories[:2]]).update(
        held_until=timezone.now() - timedelta(hours=1)
    )
    assert finalise_redaction_holds.apply(kwargs={"batch_size": 1}).get(disable_sync_subtasks=False) == 1
    assert RedactionHold.objects.count() == 2
    finalise_redaction_holds.apply(kwargs={"batch_size": 10}).get(disable_sync_subtasks=False)
    assert list(RedactionHold.objects.values_list("memory_id", flat=True)) == [memories[2].pk]  # not expired yet
    assert AuditEvent.objects.filter(action="memory.redaction_final").count() == 2
    assert finalise_redaction_holds.apply().get(disable_sync_subtasks=False) == 0  # nothing more to do: idempotent


def test_the_ui_offers_restore_to_admins_only_and_urgent_in_the_redact_form(acme: dict[str, Any]) -> None:
    memory = remember(acme["employee"], SECRET, scope="engineering")
    author = signed_in(acme["employee"])
    assert 'name="urgent"' in author.get(f"/memories/{memory.pk}/").content.decode()
    assert author.post(f"/memories/{memory.pk}/redact/", {"reason": "wrong"}).status_code == 302
    assert "/restore/" not in author.get(f"/memories/{memory.pk}/").content.decode()
    assert author.post(f"/memories/{memory.pk}/restore/").status_code == 403
    admin = signed_in(acme["exec"])
    assert f"/memories/{memory.pk}/restore/" in admin.get(f"/memories/{memory.pk}/").content.decode()
    assert admin.post(f"/memories/{memory.pk}/restore/").status_code == 302
    assert Memory.objects.get(pk=memory.pk).content == SECRET


def test_a_restored_memory_gets_its_post_write_work_again(
    acme: dict[str, Any], api: Any, django_capture_on_commit_callbacks: Any
) -> None:
    # Its chunks are new: conflicts and entities must run over them again, as after any write.
    memory = remember(acme["employee"], SECRET, scope="engineering", tags=["staging"])
    api(acme["employee"]).post(f"/api/memories/{memory.pk}/redact", {"reason": "maybe wrong"})
    with django_capture_on_commit_callbacks(execute=False):
        assert api(acme["exec"]).post(f"/api/memories/{memory.pk}/restore").status_code == 200
    # Pending until its work has run: were the broker down now, the sweep would still find it.
    assert Memory.objects.get(pk=memory.pk).post_write_pending is True
    api(acme["employee"]).post(f"/api/memories/{memory.pk}/redact", {"reason": "maybe wrong"})
    with django_capture_on_commit_callbacks(execute=True):
        assert api(acme["exec"]).post(f"/api/memories/{memory.pk}/restore").status_code == 200
    assert Memory.objects.get(pk=memory.pk).post_write_pending is False  # the (eager) worker ran it


def test_a_batch_of_expired_holds_says_whether_more_remain(acme: dict[str, Any]) -> None:
    from memories.services.memories import redaction_holds_finalise

    memories = [remember(acme["employee"], f"Secret number {i}: {i * 7919}.", scope="engineering") for i in range(3)]
    for memory in memories:
        memory_redact(principal=principal(acme["employee"]), memory_id=memory.pk, reason="old")
    RedactionHold.objects.update(held_until=timezone.now() - timedelta(hours=1))
    assert redaction_holds_finalise(batch_size=2) == (2, True)
    assert redaction_holds_finalise(batch_size=1) == (1, False)  # exactly a batch was left: nothing more
    assert redaction_holds_finalise(batch_size=1) == (0, False)
    assert not RedactionHold.objects.exists()
    finals = AuditEvent.objects.filter(action="memory.redaction_final")
    assert sorted(e.target_id for e in finals) == sorted(str(m.pk) for m in memories)
    assert all(e.details == {"hold_expired": True} and e.actor_label == "redaction hold" for e in finals)


def test_a_version_restored_as_superseded_stays_superseded_with_nothing_pending(
    acme: dict[str, Any], api: Any, django_capture_on_commit_callbacks: Any
) -> None:
    client = api(acme["employee"])
    old = remember(acme["employee"], SECRET, scope="engineering")
    client.post(f"/api/memories/{old.pk}/supersede", {"content": "The staging database password is in the vault."})
    assert client.post(f"/api/memories/{old.pk}/redact", {"reason": "a password"}).status_code == 200
    with django_capture_on_commit_callbacks(execute=True):
        restored = api(acme["exec"]).post(f"/api/memories/{old.pk}/restore")
    assert restored.status_code == 200 and restored.json()["status"] == "superseded"
    memory = Memory.objects.get(pk=old.pk)
    assert memory.content == SECRET and memory.post_write_pending is False
    assert not MemoryChunk.objects.filter(memory=memory, status="active").exists()


def test_with_no_hold_days_every_redaction_is_final_at_once(acme: dict[str, Any], api: Any, settings: Any) -> None:
    settings.CORTEX_REDACTION_HOLD_DAYS = 0
    memory = remember(acme["employee"], SECRET, scope="engineering")
    done = api(acme["employee"]).post(f"/api/memories/{memory.pk}/redact", {"reason": "a live password"})
    assert done.status_code == 200 and done.json()["redaction"]["held_until"] is None
    assert not RedactionHold.objects.exists()
    assert_envelope(api(acme["exec"]).post(f"/api/memories/{memory.pk}/restore"), 409, "REDACTION_FINAL")


def test_a_one_day_hold_is_a_hold(acme: dict[str, Any], api: Any, settings: Any) -> None:
    # The shortest hold there is: one day is still a hold an admin can restore from, not a final redaction.
    settings.CORTEX_REDACTION_HOLD_DAYS = 1
    memory = remember(acme["employee"], SECRET, scope="engineering")
    before = timezone.now()
    done = api(acme["employee"]).post(f"/api/memories/{memory.pk}/redact", {"reason": "maybe wrong"})
    assert done.status_code == 200 and done.json()["redaction"]["held_until"] is not None
    hold = RedactionHold.objects.get(memory=memory)
    assert before + timedelta(days=1) <= hold.held_until <= timezone.now() + timedelta(days=1)
    assert api(acme["exec"]).post(f"/api/memories/{memory.pk}/restore").status_code == 200

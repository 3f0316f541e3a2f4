"""Supersede, redact, delete and patch: their effects on the memory, its chunks, recall and the audit log."""

from __future__ import annotations

from typing import Any

import pytest
from support import assert_envelope

from audit.models import AuditEvent
from memories.models import Memory, MemoryChunk


def _remember(client: Any, **body: Any) -> dict[str, Any]:
    response = client.post("/api/memories", body)
    assert response.status_code == 201, response.content
    return response.json()


def _recall_ids(client: Any, query: str, **extra: Any) -> list[str]:
    response = client.post("/api/recall", {"query": query, **extra})
    assert response.status_code == 200, response.content
    return [hit["memory"]["id"] for hit in response.json()["results"]]


# -- supersede -------------------------------------------------------------------------------------
@pytest.mark.django_db
def test_supersede_creates_a_new_version_linked_both_ways(acme: dict[str, Any], api: Any) -> None:
    client = api(acme["employee"])
    old = _remember(
        client, title="Rate limit", content="The public API allows 100 requests per minute.", scope="engineering", tags=["api"]
    )
    response = client.post(f"/api/memories/{old['id']}/supersede", {"content": "The public API allows 250 requests per minute."})
    assert response.status_code == 201, response.content
    new = response.json()
    assert new["supersedes"] == old["id"]
    assert new["status"] == "active"
    assert new["title"] == "Rate limit"
    assert new["tags"] == ["api"] and new["scope"] == "engineering"
    old_now = client.get(f"/api/memories/{old['id']}").json()
    assert old_now["status"] == "superseded"
    assert old_now["superseded_by"] == new["id"]
    assert [h["id"] for h in old_now["history"]] == [old["id"], new["id"]]
    assert set(MemoryChunk.objects.filter(memory_id=old["id"]).values_list("status", flat=True)) == {"superseded"}
    assert _recall_ids(client, "public API requests per minute") == [new["id"]]
    actions = set(AuditEvent.objects.filter(target_id__in=[old["id"], new["id"]]).values_list("action", flat=True))
    assert {"memory.create", "memory.supersede"} <= actions


@pytest.mark.django_db
def test_superseding_twice_is_a_conflict(acme: dict[str, Any], api: Any) -> None:
    client = api(acme["employee"])
    old = _remember(client, content="Standup at 9:30.")
    assert client.post(f"/api/memories/{old['id']}/supersede", {"content": "Standup at 10:00."}).status_code == 201
    assert_envelope(
        client.post(f"/api/memories/{old['id']}/supersede", {"content": "Standup at 11:00."}), 409, "MEMORY_NOT_ACTIVE"
    )


@pytest.mark.django_db
def test_only_writers_can_supersede_and_outsiders_get_404(acme: dict[str, Any], outsider: Any, api: Any) -> None:
    memory = _remember(api(acme["employee"]), content="Engineering owns the dock firmware.", scope="engineering")
    assert_envelope(
        api(acme["contractor"]).post(f"/api/memories/{memory['id']}/supersede", {"content": "x"}), 403, "MEMORY_NOT_WRITABLE"
    )
    foreign = api(outsider).post(f"/api/memories/{memory['id']}/supersede", {"content": "x"})
    missing = api(outsider).post("/api/memories/00000000-0000-0000-0000-000000000000/supersede", {"content": "x"})
    assert assert_envelope(foreign, 404, "NOT_FOUND")["message"] == assert_envelope(missing, 404, "NOT_FOUND")["message"]
    assert Memory.objects.count() == 1


@pytest.mark.django_db
def test_supersede_into_an_unwritable_scope_is_refused_and_old_stays_active(acme: dict[str, Any], api: Any) -> None:
    client = api(acme["employee"])
    old = _remember(client, content="Quota is 10 robots per site.", scope="engineering")
    assert_envelope(client.post(f"/api/memories/{old['id']}/supersede", {"scope": "handbook"}), 403, "SCOPE_NOT_WRITABLE")
    assert Memory.objects.get(pk=old["id"]).status == "active"


# -- redact ----------------------------------------------------------------------------------------
@pytest.mark.django_db
def test_redact_replaces_content_deletes_chunks_and_keeps_provenance(acme: dict[str, Any], api: Any) -> None:
    client = api(acme["employee"])
    memory = _remember(
        client, title="Customer password", content="Initech admin password is hunter2.", scope="engineering", tags=["oops"]
    )
    response = client.post(f"/api/memories/{memory['id']}/redact", {"reason": "Contained a credential"})
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["status"] == "redacted"
    assert "hunter2" not in str(body)
    assert body["tags"] == []
    assert body["redaction"]["reason"] == "Contained a credential"
    assert body["redaction"]["redacted_by"] == acme["employee"].user.email
    assert not MemoryChunk.objects.filter(memory_id=memory["id"]).exists()
    assert _recall_ids(client, "Initech admin password") == []
    assert client.get("/api/memories").json()["results"] == []
    detail = client.get(f"/api/memories/{memory['id']}").json()
    assert detail["status"] == "redacted" and detail["chunk_count"] == 0
    event = AuditEvent.objects.get(action="memory.redact", target_id=memory["id"])
    assert event.details["reason"] == "Contained a credential"
    assert "hunter2" not in str(event.details)


@pytest.mark.django_db
def test_redact_requires_a_reason_and_happens_once(acme: dict[str, Any], api: Any) -> None:
    client = api(acme["employee"])
    memory = _remember(client, content="temp")
    assert_envelope(client.post(f"/api/memories/{memory['id']}/redact", {"reason": "  "}), 400, "REASON_REQUIRED")
    assert client.post(f"/api/memories/{memory['id']}/redact", {"reason": "dup"}).status_code == 200
    assert_envelope(client.post(f"/api/memories/{memory['id']}/redact", {"reason": "again"}), 409, "ALREADY_REDACTED")


@pytest.mark.django_db
def test_who_may_redact(acme: dict[str, Any], api: Any, outsider: Any) -> None:
    # Written by the manager in engineering; the contractor reads engineering but cannot write it.
    memory = _remember(api(acme["manager"]), content="Sprint goal: ship the dock API.", scope="engineering")
    assert_envelope(
        api(acme["contractor"]).post(f"/api/memories/{memory['id']}/redact", {"reason": "x"}), 403, "REDACTION_NOT_ALLOWED"
    )
    assert_envelope(api(outsider).post(f"/api/memories/{memory['id']}/redact", {"reason": "x"}), 404, "NOT_FOUND")
    # A writer of the scope who is not the author may not either (they may request it); the author may.
    assert_envelope(
        api(acme["employee"]).post(f"/api/memories/{memory['id']}/redact", {"reason": "x"}), 403, "REDACTION_NOT_ALLOWED"
    )
    assert api(acme["manager"]).post(f"/api/memories/{memory['id']}/redact", {"reason": "obsolete"}).status_code == 200


@pytest.mark.django_db
def test_author_may_redact_after_losing_write_access(acme: dict[str, Any], api: Any) -> None:
    from memories.models import Scope, ScopeGrant

    client = api(acme["employee"])
    memory = _remember(client, content="My own note in engineering.", scope="engineering")
    ScopeGrant.objects.filter(
        membership=acme["employee"], scope=Scope.objects.get(organization=acme["org"], slug="engineering")
    ).update(can_write=False)
    assert api(acme["employee"]).post(f"/api/memories/{memory['id']}/redact", {"reason": "mine"}).status_code == 200


# -- delete ----------------------------------------------------------------------------------------
@pytest.mark.django_db
def test_only_admins_delete_and_deletion_is_audited(acme: dict[str, Any], api: Any) -> None:
    memory = _remember(api(acme["employee"]), content="Erase me.", scope="engineering")
    assert_envelope(api(acme["employee"]).delete(f"/api/memories/{memory['id']}"), 403, "ADMIN_REQUIRED")
    assert Memory.objects.filter(pk=memory["id"]).exists()
    response = api(acme["exec"]).delete(f"/api/memories/{memory['id']}")
    assert response.status_code == 204
    assert not Memory.objects.filter(pk=memory["id"]).exists()
    assert not MemoryChunk.objects.filter(memory_id=memory["id"]).exists()
    event = AuditEvent.objects.get(action="memory.delete", target_id=memory["id"])
    assert "Erase me" not in str(event.details)
    assert_envelope(api(acme["exec"]).get(f"/api/memories/{memory['id']}"), 404)


@pytest.mark.django_db
def test_admin_without_access_to_the_scope_cannot_delete(acme: dict[str, Any], make_member: Any, api: Any) -> None:
    memory = _remember(api(acme["manager"]), content="Sales forecast.", scope="sales")
    admin_without_sales = make_member(acme["org"], "Executive", admin=True)
    assert_envelope(api(admin_without_sales).delete(f"/api/memories/{memory['id']}"), 404, "NOT_FOUND")


@pytest.mark.django_db
def test_deleting_a_superseded_version_unlinks_the_chain(acme: dict[str, Any], api: Any) -> None:
    client = api(acme["exec"])
    old = _remember(client, content="v1 of the plan")
    new = client.post(f"/api/memories/{old['id']}/supersede", {"content": "v2 of the plan"}).json()
    assert client.delete(f"/api/memories/{old['id']}").status_code == 204
    assert client.get(f"/api/memories/{new['id']}").json()["supersedes"] is None


# -- patch -------------------------------------------------------------------------------------------
@pytest.mark.django_db
def test_patch_changes_metadata_and_keeps_chunks_in_step(acme: dict[str, Any], make_member: Any, api: Any) -> None:
    client = api(acme["manager"])
    memory = _remember(client, title="Pricing", content="Pathfinder lists at $48,000 per unit.", scope="sales")
    response = client.patch(
        f"/api/memories/{memory['id']}", {"tags": ["pricing", "pathfinder"], "category": "policy", "clearance_min": "Manager"}
    )
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["tags"] == ["pricing", "pathfinder"] and body["category"] == "policy" and body["clearance_min"] == "Manager"
    chunk = MemoryChunk.objects.get(memory_id=memory["id"])
    assert chunk.tags == ["pricing", "pathfinder"] and chunk.category == "policy" and chunk.clearance_rank == 2
    # The new clearance applies to recall at once: an Employee granted sales no longer finds it, a Manager does.
    employee_with_sales = make_member(acme["org"], "Employee", grants={"sales": False})
    assert memory["id"] not in _recall_ids(api(employee_with_sales), "Pathfinder price")
    assert_envelope(api(employee_with_sales).get(f"/api/memories/{memory['id']}"), 404, "NOT_FOUND")
    assert memory["id"] in _recall_ids(client, "Pathfinder price")
    assert AuditEvent.objects.filter(action="memory.patch", target_id=memory["id"]).exists()


@pytest.mark.django_db
def test_patch_refuses_content_and_unknown_fields(acme: dict[str, Any], api: Any) -> None:
    client = api(acme["employee"])
    memory = _remember(client, content="original")
    assert_envelope(client.patch(f"/api/memories/{memory['id']}", {"content": "changed"}), 400, "VALIDATION_ERROR")
    assert Memory.objects.get(pk=memory["id"]).content == "original"


@pytest.mark.django_db
def test_patch_valid_until_expires_the_memory_from_lists_and_recall(acme: dict[str, Any], api: Any) -> None:
    client = api(acme["employee"])
    memory = _remember(client, content="Temporary VPN workaround: use the backup gateway.", valid_from="2025-01-01T00:00:00Z")
    assert memory["id"] in _recall_ids(client, "VPN workaround gateway")
    assert client.patch(f"/api/memories/{memory['id']}", {"valid_until": "2025-06-01T00:00:00Z"}).status_code == 200
    assert memory["id"] not in _recall_ids(client, "VPN workaround gateway")
    assert memory["id"] not in [m["id"] for m in client.get("/api/memories").json()["results"]]
    assert memory["id"] in _recall_ids(client, "VPN workaround gateway", as_of="2025-03-01T00:00:00Z")


@pytest.mark.django_db
def test_patch_clearance_above_own_is_refused(acme: dict[str, Any], api: Any) -> None:
    client = api(acme["employee"])
    memory = _remember(client, content="x", scope="engineering")
    assert_envelope(client.patch(f"/api/memories/{memory['id']}", {"clearance_min": "Executive"}), 403, "CLEARANCE_ABOVE_OWN")
    assert_envelope(api(acme["contractor"]).patch(f"/api/memories/{memory['id']}", {"tags": ["x"]}), 403, "MEMORY_NOT_WRITABLE")


@pytest.mark.django_db
def test_a_title_derived_from_the_content_follows_new_content_and_a_given_title_stays(acme: dict[str, Any], api: Any) -> None:
    client = api(acme["employee"])
    derived = _remember(client, content="Standups are at 9:30 on Mondays.\nBring blockers.")
    assert derived["title"] == "Standups are at 9:30 on Mondays."
    new = client.post(f"/api/memories/{derived['id']}/supersede", {"content": "Standups moved to 10:00.\nBring blockers."})
    assert new.status_code == 201 and new.json()["title"] == "Standups moved to 10:00."
    named = _remember(client, title="Standup time", content="Standups are at 9:30 on Tuesdays.")
    kept = client.post(f"/api/memories/{named['id']}/supersede", {"content": "Standups are at 11:00 on Tuesdays."})
    assert kept.status_code == 201 and kept.json()["title"] == "Standup time"
    # A given title stays whichever way it sorts beside the one the content would give.
    late = _remember(client, title="Zulu shift standups", content="Standups are at 9:30 on Wednesdays.")
    kept = client.post(f"/api/memories/{late['id']}/supersede", {"content": "Standups are at 11:00 on Wednesdays."})
    assert kept.status_code == 201 and kept.json()["title"] == "Zulu shift standups"
    # Only the tags change: the derived title is the same one derived again.
    tags_only = client.post(f"/api/memories/{new.json()['id']}/supersede", {"tags": ["ritual"]})
    assert tags_only.status_code == 201 and tags_only.json()["title"] == "Standups moved to 10:00."


@pytest.mark.django_db
def test_a_redaction_reason_of_exactly_1000_characters_is_accepted_and_one_more_is_not(acme: dict[str, Any], api: Any) -> None:
    client = api(acme["employee"])
    first, second = _remember(client, content="Temporary note one."), _remember(client, content="Temporary note two.")
    assert_envelope(client.post(f"/api/memories/{first['id']}/redact", {"reason": "r" * 1001}), 400, "REASON_TOO_LONG")
    assert client.get(f"/api/memories/{first['id']}").json()["status"] == "active"
    assert client.post(f"/api/memories/{second['id']}/redact", {"reason": "r" * 1000}).status_code == 200


@pytest.mark.django_db
def test_superseding_with_an_existing_memory_needs_two_distinct_active_memories_of_one_organization(
    acme: dict[str, Any], outsider: Any, api: Any
) -> None:
    from audit.services import Actor
    from cortex_site.errors import Conflict
    from memories.services.memories import memory_supersede_with_existing

    client = api(acme["employee"])
    loser, winner = _remember(client, content="Deploys on Tuesdays."), _remember(client, content="Deploys on Thursdays.")
    foreign = _remember(api(outsider), content="Deploys on Fridays.")
    missing = "00000000-0000-0000-0000-000000000001"
    # Another organization's memory on either side: its organization's id is the larger one as loser and as winner.
    pairs = ((missing, winner["id"]), (loser["id"], missing), (loser["id"], foreign["id"]), (foreign["id"], winner["id"]))
    for pair in (*pairs, (loser["id"], loser["id"])):
        with pytest.raises(Conflict) as refused:
            memory_supersede_with_existing(loser_id=pair[0], winner_id=pair[1], actor=Actor.system(), reason="test")
        assert refused.value.error_code == "MEMORY_NOT_ACTIVE"
    assert Memory.objects.filter(pk__in=[loser["id"], foreign["id"]], status="active").count() == 2
    memory_supersede_with_existing(loser_id=loser["id"], winner_id=winner["id"], actor=Actor.system(), reason="test")
    # Linked both ways: the loser forward to the winner, the winner (which superseded nothing yet) back to the loser.
    assert Memory.objects.get(pk=loser["id"]).superseded_by_id == Memory.objects.get(pk=winner["id"]).pk
    assert Memory.objects.get(pk=winner["id"]).supersedes_id == Memory.objects.get(pk=loser["id"]).pk
    # A winner that already supersedes a memory keeps that back link; the new loser still links forward to it.
    another = _remember(client, content="Deploys on Mondays.")
    memory_supersede_with_existing(loser_id=another["id"], winner_id=winner["id"], actor=Actor.system(), reason="test")
    assert Memory.objects.get(pk=another["id"]).superseded_by_id == Memory.objects.get(pk=winner["id"]).pk
    assert Memory.objects.get(pk=winner["id"]).supersedes_id == Memory.objects.get(pk=loser["id"]).pk


# -- accepting a proposed revision -----------------------------------------------------------------
@pytest.mark.django_db
def test_only_a_memory_still_proposed_is_activated(acme: dict[str, Any]) -> None:
    # The step that makes an accepted revision active: once, and never for a memory that is not a proposal.
    from support import principal, remember

    from audit.services import Actor
    from cortex_site.errors import Conflict
    from memories.services import tenancy
    from memories.services.memories import memory_supersede
    from memories.services.memories.lifecycle import memory_activate_proposal

    original = remember(acme["manager"], "Standups are at 9:30.", scope="engineering", clearance_min="Contractor")
    tenancy.grant_set(membership=acme["contractor"], scope=original.scope, can_write=True)
    proposal = memory_supersede(
        principal=principal(acme["contractor"]), memory_id=original.pk, changes={"content": "Standups are at 10."}
    ).memory
    assert proposal.status == "proposed"
    actor = principal(acme["manager"]).actor
    memory_activate_proposal(memory_id=proposal.pk, actor=actor, reason="agreed")
    proposal.refresh_from_db()
    assert proposal.status == "active"
    assert set(MemoryChunk.objects.filter(memory=proposal).values_list("status", flat=True)) == {"active"}
    assert AuditEvent.objects.filter(action="memory.accept_revision", target_id=str(proposal.pk)).count() == 1
    for memory_id in (proposal.pk, original.pk):  # accepted already; never a proposal
        with pytest.raises(Conflict) as refused:
            memory_activate_proposal(memory_id=memory_id, actor=Actor.system("test"), reason="again")
        assert refused.value.error_code == "MEMORY_NOT_PROPOSED"
    assert AuditEvent.objects.filter(action="memory.accept_revision").count() == 1


@pytest.mark.django_db
def test_only_an_active_memory_is_superseded(acme: dict[str, Any], api: Any) -> None:
    client = api(acme["employee"])
    first = _remember(client, content="Deploys happen on Tuesdays.", scope="engineering")
    second = client.post(f"/api/memories/{first['id']}/supersede", {"content": "Deploys happen on Thursdays."}).json()
    gone = _remember(client, content="The VPN password is in the vault.", scope="engineering")
    assert client.post(f"/api/memories/{gone['id']}/redact", {"reason": "wrong"}).status_code == 200
    for memory_id in (first["id"], gone["id"]):
        before = Memory.objects.count()
        response = client.post(f"/api/memories/{memory_id}/supersede", {"content": "Deploys happen on Fridays."})
        assert_envelope(response, 409, "MEMORY_NOT_ACTIVE")
        assert Memory.objects.count() == before
    assert Memory.objects.get(pk=second["id"]).status == "active"


@pytest.mark.django_db
def test_a_patched_tag_is_searchable_at_once(acme: dict[str, Any], api: Any) -> None:
    from django.db import connection

    client = api(acme["employee"])
    memory = _remember(client, title="Hangar", content="The hangar doors open at dawn.", scope="engineering")

    def matches(word: str) -> bool:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT bool_and(search_vector @@ to_tsquery('english', %s)) FROM memories_memorychunk WHERE memory_id = %s",
                [word, memory["id"]],
            )
            return bool(cursor.fetchone()[0])

    assert not matches("zeppelin")
    assert client.patch(f"/api/memories/{memory['id']}", {"tags": ["zeppelin"]}).status_code == 200
    assert matches("zeppelin") and matches("hangar")
    assert memory["id"] in _recall_ids(client, "zeppelin")


@pytest.mark.django_db
def test_a_superseded_memory_is_reinstated_once_and_only_from_the_version_that_replaced_it(acme: dict[str, Any]) -> None:
    # The undo of a conflict decided by superseding: only while the memory is still superseded by that version.
    from support import principal, remember

    from cortex_site.errors import Conflict
    from memories.services.memories.lifecycle import memory_reinstate, memory_supersede_with_existing

    actor = principal(acme["exec"]).actor
    loser = remember(acme["employee"], "The office closes at 6pm.", scope="engineering")
    winner = remember(acme["employee"], "The office closes at 7pm.", scope="engineering")
    other = remember(acme["employee"], "Parking is free after 6pm.", scope="engineering")
    memory_supersede_with_existing(loser_id=loser.pk, winner_id=winner.pk, actor=actor, reason="newer")
    loser.refresh_from_db()
    assert (loser.status, loser.superseded_by_id) == ("superseded", winner.pk)
    with pytest.raises(Conflict) as wrong:
        memory_reinstate(memory_id=loser.pk, superseded_by_id=other.pk, actor=actor, reason="undo")
    assert wrong.value.error_code == "MEMORY_NOT_SUPERSEDED"
    memory_reinstate(memory_id=loser.pk, superseded_by_id=winner.pk, actor=actor, reason="undo")
    loser.refresh_from_db()
    assert (loser.status, loser.superseded_by_id) == ("active", None)
    with pytest.raises(Conflict) as again:
        memory_reinstate(memory_id=loser.pk, superseded_by_id=winner.pk, actor=actor, reason="undo")
    assert again.value.error_code == "MEMORY_NOT_SUPERSEDED"


@pytest.mark.django_db
def test_either_of_two_memories_may_supersede_the_other_but_not_itself(acme: dict[str, Any]) -> None:
    from support import principal, remember

    from cortex_site.errors import Conflict
    from memories.services.memories.lifecycle import memory_supersede_with_existing

    actor = principal(acme["exec"]).actor
    pairs = [
        sorted(
            (
                remember(acme["employee"], f"Fact {i}a.", scope="engineering"),
                remember(acme["employee"], f"Fact {i}b.", scope="engineering"),
            ),
            key=lambda m: m.pk,
        )
        for i in range(2)
    ]
    # Whichever id is the larger: the loser's first in one pair, the winner's in the other.
    for loser, winner in (pairs[0], reversed(pairs[1])):
        memory_supersede_with_existing(loser_id=loser.pk, winner_id=winner.pk, actor=actor, reason="decided")
        loser.refresh_from_db()
        assert (loser.status, loser.superseded_by_id) == ("superseded", winner.pk)
    # A loser keeps its source item id: a re-sync of that item finds it retired, and does not bring it back as new.
    from support import imported

    synced = imported(acme["employee"], "Fact 3a.", scope="engineering", source="Notion", external_id="page-1")
    memory_supersede_with_existing(loser_id=synced.pk, winner_id=pairs[1][0].pk, actor=actor, reason="decided")
    synced.refresh_from_db()
    assert (synced.status, synced.external_id) == ("superseded", "page-1")
    # The winner must still be active: here it lost to another memory meanwhile.
    third = remember(acme["employee"], "Fact 2a.", scope="engineering")
    with pytest.raises(Conflict) as gone:
        memory_supersede_with_existing(loser_id=third.pk, winner_id=pairs[0][0].pk, actor=actor, reason="decided")
    assert gone.value.error_code == "MEMORY_NOT_ACTIVE"
    third.refresh_from_db()
    assert third.status == "active"
    alone = remember(acme["employee"], "Fact alone.", scope="engineering")
    with pytest.raises(Conflict) as itself:
        memory_supersede_with_existing(loser_id=alone.pk, winner_id=alone.pk, actor=actor, reason="decided")
    assert itself.value.error_code == "MEMORY_NOT_ACTIVE"


@pytest.mark.django_db
def test_a_redaction_removes_what_was_derived_from_the_memory(acme: dict[str, Any], api: Any) -> None:
    # The redaction hooks (conflict dissent and explanations, the entity graph) run inside the redaction.
    from memories.models import EntityMention
    from memories.services.entities import entities_extract
    from memories.services.memories.lifecycle import REDACTION_HOOKS, register_redaction_hook

    client = api(acme["employee"])
    memory = _remember(client, content="Priya Raman from Globex Corp approved the Q3 launch.", scope="engineering")
    assert entities_extract(memory["id"]) > 0
    assert EntityMention.objects.filter(memory_id=memory["id"]).exists()
    assert client.post(f"/api/memories/{memory['id']}/redact", {"reason": "personal data"}).status_code == 200
    assert not EntityMention.objects.filter(memory_id=memory["id"]).exists()
    # Registering a hook again (as AppConfig.ready() may) keeps it once.
    hooks = list(REDACTION_HOOKS)
    register_redaction_hook(hooks[0])
    assert hooks == REDACTION_HOOKS


@pytest.mark.django_db
def test_a_revision_of_an_earlier_version_is_refused_and_proposes_nothing(acme: dict[str, Any]) -> None:
    # A writer without authority over the author gets a proposal instead of a new version — but only of a
    # current memory: a proposal never retires what it revises, so nothing later would catch a stale one.
    from support import principal, remember

    from cortex_site.errors import Conflict
    from memories.services import tenancy
    from memories.services.memories import memory_supersede

    original = remember(acme["manager"], "Standups are at 9:30.", scope="engineering", clearance_min="Contractor")
    memory_supersede(principal=principal(acme["manager"]), memory_id=original.pk, changes={"content": "Standups are at 9:45."})
    tenancy.grant_set(membership=acme["contractor"], scope=original.scope, can_write=True)
    contractor = principal(acme["contractor"])
    assert contractor.can_propose_revision(Memory.objects.get(pk=original.pk))
    with pytest.raises(Conflict) as refused:
        memory_supersede(principal=contractor, memory_id=original.pk, changes={"content": "Standups are at 10."})
    assert refused.value.error_code == "MEMORY_NOT_ACTIVE"
    assert "only active memories can be superseded" in refused.value.message
    assert not Memory.objects.filter(status="proposed").exists()
    assert Memory.objects.filter(content="Standups are at 10.").count() == 0


@pytest.mark.django_db
def test_an_earlier_version_can_be_redacted_and_only_once(acme: dict[str, Any], api: Any) -> None:
    client = api(acme["employee"])
    old = _remember(client, content="The VPN key is k-1234.", scope="engineering")
    client.post(f"/api/memories/{old['id']}/supersede", {"content": "The VPN key is in the vault."})
    done = client.post(f"/api/memories/{old['id']}/redact", {"reason": "a key"})
    assert done.status_code == 200 and done.json()["status"] == "redacted"
    assert_envelope(client.post(f"/api/memories/{old['id']}/redact", {"reason": "a key"}), 409, "ALREADY_REDACTED")


@pytest.mark.django_db
def test_an_earlier_version_takes_metadata_changes_and_a_redacted_one_does_not(acme: dict[str, Any], api: Any) -> None:
    client = api(acme["employee"])
    old = _remember(client, content="Backups run nightly at 2am.", scope="engineering")
    client.post(f"/api/memories/{old['id']}/supersede", {"content": "Backups run nightly at 3am."})
    patched = client.patch(f"/api/memories/{old['id']}", {"tags": ["history"]})
    assert patched.status_code == 200 and patched.json()["tags"] == ["history"]
    client.post(f"/api/memories/{old['id']}/redact", {"reason": "wrong"})
    assert_envelope(client.patch(f"/api/memories/{old['id']}", {"tags": ["again"]}), 409, "MEMORY_REDACTED")

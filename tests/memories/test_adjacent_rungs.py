"""Clearance one rung apart: a member sees memories at their own rung and never one rung above — on
every path that reads, including the reads inside writes (deduplication, idempotency replay) and the
lifecycle actions that fetch the memory they change.

The other fixtures leave two or three rungs between reader and memory, so a comparison off by one
rung passes them; here every pair of neighbouring rungs of the default ladder (Contractor <
Employee < Manager < Executive) is checked, with both members granted write on the scope so only
clearance decides."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from support import assert_envelope, principal, remember

from audit.models import AuditEvent
from memories.access import could_supersede
from memories.models import Memory, Scope
from memories.selectors.memories import memory_for_history, readable_base, visible_memories
from memories.services import tenancy

LADDER = ["Contractor", "Employee", "Manager", "Executive"]
NEIGHBOURS = list(itertools.pairwise(LADDER))  # (lower, higher)


@pytest.fixture
def rungs(make_org: Any, make_scope: Any, make_member: Any) -> dict[str, Any]:
    """An organization with one non-admin writer of `team` at every rung (and an admin to change clearances)."""
    org = make_org()
    make_scope(org, "team")
    people = {rung: make_member(org, rung, grants={"team": True}) for rung in LADDER}
    return {"org": org, "admin": make_member(org, "Executive", admin=True, grants={"team": True}), **people}


def _post(client: Any, **body: Any) -> Any:
    return client.post("/api/memories", {"scope": "team", **body})


# -- the Principal itself --------------------------------------------------------------------------------
@pytest.mark.django_db
@pytest.mark.parametrize("rung", LADDER)
def test_a_member_reads_memories_up_to_their_own_rung_and_not_one_above(rung: str, rungs: dict[str, Any]) -> None:
    reader = principal(rungs[rung])
    mine = LADDER.index(rung)
    for other in LADDER:
        memory = remember(rungs["Executive"], f"A note at {other} level.", scope="team", clearance_min=other)
        visible = LADDER.index(other) <= mine
        assert reader.can_read_memory(memory) is visible, (rung, other)
        assert reader.can_read_memory(memory, history=True) is visible, (rung, other)
        assert reader.can_write_memory(memory) is visible, (rung, other)
        assert readable_base(reader).filter(pk=memory.pk).exists() is visible, (rung, other)
        assert visible_memories(reader).filter(pk=memory.pk).exists() is visible, (rung, other)


# -- reads inside writes: deduplication ---------------------------------------------------------------------
@pytest.mark.django_db
@pytest.mark.parametrize(("lower", "higher"), NEIGHBOURS)
def test_a_duplicate_one_rung_above_the_writer_is_not_returned(lower: str, higher: str, rungs: dict[str, Any], api: Any) -> None:
    hidden = _post(api(rungs[higher]), content="The dock recall starts on Monday.", clearance_min=higher)
    assert hidden.status_code == 201
    response = _post(api(rungs[lower]), content="The dock recall starts on Monday.")
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["deduplicated"] is False
    assert body["id"] != hidden.json()["id"]
    assert hidden.json()["id"] not in response.content.decode()
    assert Memory.objects.filter(content="The dock recall starts on Monday.").count() == 2


@pytest.mark.django_db
@pytest.mark.parametrize(("lower", "higher"), NEIGHBOURS)
def test_a_duplicate_at_the_writers_own_rung_is_returned(lower: str, higher: str, rungs: dict[str, Any], api: Any) -> None:
    first = _post(api(rungs[higher]), content="Standups move to 10:00.", clearance_min=lower)
    again = _post(api(rungs[lower]), content="Standups move to 10:00.")
    assert again.status_code == 200, again.content
    assert again.json()["deduplicated"] is True
    assert again.json()["id"] == first.json()["id"]
    assert Memory.objects.filter(content="Standups move to 10:00.").count() == 1


# -- reads inside writes: idempotency replay ------------------------------------------------------------------
@pytest.mark.django_db
@pytest.mark.parametrize(("lower", "higher"), NEIGHBOURS)
def test_replaying_a_key_for_a_memory_now_one_rung_above_is_refused(
    lower: str, higher: str, rungs: dict[str, Any], api: Any
) -> None:
    client = api(rungs[higher])
    first = _post(client, content="Budget for the pilot is approved.", clearance_min=higher, idempotency_key="pilot-1")
    assert first.status_code == 201
    tenancy.member_update(membership=rungs[higher], clearance=lower, by=principal(rungs["admin"]))
    replay = _post(client, content="Budget for the pilot is approved.", idempotency_key="pilot-1")
    assert_envelope(replay, 409, "IDEMPOTENCY_KEY_REUSED")
    assert first.json()["id"] not in replay.content.decode()
    assert Memory.objects.filter(idempotency_key="pilot-1").count() == 1


@pytest.mark.django_db
@pytest.mark.parametrize("rung", LADDER)
def test_replaying_a_key_for_a_memory_at_the_writers_own_rung_returns_it(rung: str, rungs: dict[str, Any], api: Any) -> None:
    client = api(rungs[rung])
    first = _post(client, content="Pilot kickoff on the 3rd.", clearance_min=rung, idempotency_key="kickoff")
    replay = _post(client, content="Pilot kickoff on the 3rd (retried).", idempotency_key="kickoff")
    assert replay.status_code == 200, replay.content
    assert replay.json()["id"] == first.json()["id"] and replay.json()["deduplicated"] is True


# -- reads and lifecycle actions on a memory one rung above --------------------------------------------------
@pytest.mark.django_db
@pytest.mark.parametrize(("lower", "higher"), NEIGHBOURS)
def test_a_memory_one_rung_above_is_not_found_on_every_path(lower: str, higher: str, rungs: dict[str, Any], api: Any) -> None:
    memory = remember(rungs[higher], "Quarterly targets for the robotics line.", scope="team", clearance_min=higher)
    reader = api(rungs[lower])
    assert_envelope(reader.get(f"/api/memories/{memory.pk}"), 404, "NOT_FOUND")
    assert str(memory.pk) not in reader.get("/api/memories", {"status": "all"}).content.decode()
    recalled = reader.post("/api/recall", {"query": "quarterly targets robotics line"})
    assert recalled.status_code == 200 and str(memory.pk) not in recalled.content.decode()
    assert_envelope(reader.post(f"/api/memories/{memory.pk}/supersede", {"content": "Changed."}), 404, "NOT_FOUND")
    assert_envelope(reader.patch(f"/api/memories/{memory.pk}", {"tags": ["x"]}), 404, "NOT_FOUND")
    assert_envelope(reader.post(f"/api/memories/{memory.pk}/redact", {"reason": "x"}), 404, "NOT_FOUND")
    assert_envelope(reader.post(f"/api/memories/{memory.pk}/redaction-requests", {"reason": "x"}), 404, "NOT_FOUND")
    with pytest.raises(Exception, match="not found"):
        memory_for_history(principal(rungs[lower]), memory.pk)
    memory.refresh_from_db()
    assert memory.status == "active" and memory.tags == [] and memory.content.startswith("Quarterly")
    # Nothing was done to it: besides its creation, its only events record the denials (by clearance,
    # once a minute per actor, rule and target), never a change.
    events = list(AuditEvent.objects.filter(target_id=memory.pk).order_by("created_at", "pk").values_list("action", "details"))
    assert [action for action, _ in events if action != "access.denied"] == ["memory.create"]
    assert [details["rule"] for action, details in events if action == "access.denied"] == ["clearance"]


@pytest.mark.django_db
@pytest.mark.parametrize(("lower", "higher"), NEIGHBOURS)
def test_a_memory_at_the_readers_own_rung_is_found_on_every_path(
    lower: str, higher: str, rungs: dict[str, Any], api: Any
) -> None:
    memory = remember(rungs[higher], "Quarterly targets for the robotics line.", scope="team", clearance_min=lower)
    reader = api(rungs[lower])
    assert reader.get(f"/api/memories/{memory.pk}").status_code == 200
    assert str(memory.pk) in reader.get("/api/memories").content.decode()
    recalled = reader.post("/api/recall", {"query": "quarterly targets robotics line"}).json()["results"]
    assert [hit["memory"]["id"] for hit in recalled][:1] == [str(memory.pk)]
    assert reader.patch(f"/api/memories/{memory.pk}", {"tags": ["targets"]}).status_code == 200
    assert memory_for_history(principal(rungs[lower]), memory.pk).pk == memory.pk


@pytest.mark.django_db
@pytest.mark.parametrize(("lower", "higher"), NEIGHBOURS)
def test_the_automatic_conflict_policy_never_lets_a_lower_rung_overrule_the_next(
    lower: str, higher: str, rungs: dict[str, Any]
) -> None:
    # Asked both ways: neither an ordering of ids nor anything but the rungs may decide who overrules.
    low = remember(rungs[lower], f"The {lower} says the launch is in May.", scope="team")
    high = remember(rungs[higher], f"The {higher} says the launch is in June.", scope="team")
    assert could_supersede(low, high) is False
    assert could_supersede(high, low) is True
    again = remember(rungs[lower], f"The {lower} now says the launch is in July.", scope="team")
    assert could_supersede(again, low) is True and could_supersede(low, again) is True  # one author


@pytest.mark.django_db
def test_an_author_who_left_still_supersedes_their_own_memory_whatever_its_rung(rungs: dict[str, Any]) -> None:
    # Once its author left, a memory speaks with its own clearance's rung (author_rank). Only the
    # same-author rule lets the author's later note, at a lower rung, replace their earlier one —
    # decided by who wrote both, whatever the order of anyone's ids.
    author = rungs["Manager"]
    earlier = remember(author, "The Manager's launch plan: May.", scope="team", clearance_min="Manager")
    later = remember(author, "The Manager's launch plan: June.", scope="team", clearance_min="Employee")
    someone_elses = remember(rungs["Executive"], "The Executive's launch plan: July.", scope="team", clearance_min="Manager")
    tenancy.member_remove(membership=author, by=principal(rungs["admin"]))
    assert could_supersede(later, earlier) is True
    assert could_supersede(earlier, later) is True
    # Not someone else's memory, whose author still holds a higher rung than the note's own.
    assert could_supersede(later, someone_elses) is False


@pytest.mark.django_db
def test_a_superseded_version_stays_writable_for_its_scopes_writers(rungs: dict[str, Any], api: Any) -> None:
    # Writing a memory asks the history read rule (superseded versions are read by id), not the list rule.
    client = api(rungs["Employee"])
    old = _post(client, content="Deploys need one approval.").json()
    assert client.post(f"/api/memories/{old['id']}/supersede", {"content": "Deploys need two approvals."}).status_code == 201
    superseded = Memory.objects.get(pk=old["id"])
    assert superseded.status == "superseded"
    assert principal(rungs["Employee"]).can_write_memory(superseded) is True
    assert principal(rungs["Contractor"]).can_write_memory(superseded) is True  # same rung as the memory (lowest)
    assert client.patch(f"/api/memories/{old['id']}", {"tags": ["history"]}).status_code == 200


@pytest.mark.django_db
def test_the_admin_role_does_not_lift_clearance_by_a_rung(rungs: dict[str, Any], make_member: Any, api: Any) -> None:
    manager_admin = make_member(rungs["org"], "Manager", admin=True, grants={"team": True})
    memory = remember(rungs["Executive"], "Board minutes, March.", scope="team", clearance_min="Executive")
    client = api(manager_admin)
    assert_envelope(client.get(f"/api/memories/{memory.pk}"), 404, "NOT_FOUND")
    assert_envelope(client.delete(f"/api/memories/{memory.pk}"), 404, "NOT_FOUND")
    assert Memory.objects.filter(pk=memory.pk).exists()
    assert Scope.objects.filter(organization=rungs["org"], slug="team").exists()

"""REST: /api/conflicts — list, detail, resolve, reopen — and conflicts in memory detail.

Every test has someone who must see nothing: a conflict exists for a caller only when both of
its memories are readable to them.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone
from support import assert_envelope

from audit.models import AuditEvent
from memories.models import Conflict, Memory, Organization

LIMIT_100 = "The public API rate limit is 100 requests per minute per API key."
LIMIT_250 = "The public API rate limit is 250 requests per minute per API key."


@pytest.fixture
def contradiction(acme: dict[str, Any], write: Any) -> dict[str, Any]:
    """Manager's memory wins by authority over the employee's newer, contradicting one (auto policy)."""
    existing = write(acme["manager"], LIMIT_100, title="Public API rate limit", valid_from=timezone.now() - timedelta(days=20))
    new = write(acme["employee"], LIMIT_250, title="Public API rate limit")
    return {"existing": existing, "new": new, "conflict": Conflict.objects.get()}


@pytest.fixture
def hidden_conflict(acme: dict[str, Any], write: Any) -> Conflict:
    """A conflict in the sales scope, which the employee and the contractor cannot read (manual policy: open)."""
    Organization.objects.filter(pk=acme["org"].pk).update(conflict_policy="manual")
    write(acme["manager"], "Sales commission for new logos is 10% of first-year revenue.", title="Commission", scope="sales")
    write(acme["exec"], "Sales commission for new logos is 12% of first-year revenue.", title="Commission", scope="sales")
    return Conflict.objects.get(existing_memory__scope__slug="sales")


def test_list_shows_the_conflict_with_both_memories_explanation_and_dissent(
    acme: dict[str, Any], contradiction: dict[str, Any], api: Any
) -> None:
    response = api(acme["manager"]).get("/api/conflicts", {"status": "all"})
    assert response.status_code == 200
    (item,) = response.json()["results"]
    assert item["id"] == str(contradiction["conflict"].pk)
    assert (item["kind"], item["status"], item["resolution"], item["classifier"]) == (
        "contradiction",
        "resolved",
        "keep_existing",
        "heuristic",
    )
    assert [m["role"] for m in item["memories"]] == ["new", "existing"]
    assert [m["id"] for m in item["memories"]] == [str(contradiction["new"].pk), str(contradiction["existing"].pk)]
    assert item["resolved_by"] == {"type": "policy", "policy": "authority"}
    assert item["dissent"]["claim"] == LIMIT_250
    assert 0.75 < item["similarity"] <= 1.0
    assert "100" in item["explanation"]
    assert response.json()["next"] is None


def test_status_and_kind_filters(
    acme: dict[str, Any], contradiction: dict[str, Any], hidden_conflict: Conflict, api: Any
) -> None:
    client = api(acme["exec"])
    assert [c["id"] for c in client.get("/api/conflicts").json()["results"]] == [str(hidden_conflict.pk)]  # default: open
    assert [c["id"] for c in client.get("/api/conflicts", {"status": "resolved"}).json()["results"]] == [
        str(contradiction["conflict"].pk)
    ]
    assert len(client.get("/api/conflicts", {"status": "all", "kind": "contradiction"}).json()["results"]) == 2
    assert client.get("/api/conflicts", {"status": "all", "kind": "duplicate"}).json()["results"] == []
    assert_envelope(client.get("/api/conflicts", {"status": "closed"}), 400, "INVALID_STATUS")
    assert_envelope(client.get("/api/conflicts", {"kind": "typo"}), 400, "INVALID_KIND")


def test_conflicts_whose_memories_the_caller_cannot_read_do_not_exist_for_them(
    acme: dict[str, Any], contradiction: dict[str, Any], hidden_conflict: Conflict, outsider: Any, api: Any
) -> None:
    employee = api(acme["employee"])
    listed = {c["id"] for c in employee.get("/api/conflicts", {"status": "all"}).json()["results"]}
    assert listed == {str(contradiction["conflict"].pk)}
    for path in (f"/api/conflicts/{hidden_conflict.pk}",):
        assert_envelope(employee.get(path), 404, "NOT_FOUND")
    assert_envelope(employee.post(f"/api/conflicts/{hidden_conflict.pk}/resolve", {"resolution": "keep_new"}), 404, "NOT_FOUND")
    assert_envelope(employee.post(f"/api/conflicts/{hidden_conflict.pk}/reopen", {}), 404, "NOT_FOUND")

    stranger = api(outsider)
    assert stranger.get("/api/conflicts", {"status": "all"}).json()["results"] == []
    assert_envelope(stranger.get(f"/api/conflicts/{contradiction['conflict'].pk}"), 404, "NOT_FOUND")
    assert_envelope(
        stranger.post(f"/api/conflicts/{contradiction['conflict'].pk}/resolve", {"resolution": "dismiss"}), 404, "NOT_FOUND"
    )
    assert_envelope(stranger.get("/api/conflicts/not-a-uuid"), 404, "NOT_FOUND")
    hidden_conflict.refresh_from_db()
    assert hidden_conflict.status == "open"


def test_a_token_narrowed_away_from_a_scope_does_not_see_its_conflicts(
    acme: dict[str, Any], hidden_conflict: Conflict, api: Any
) -> None:
    narrowed = api(acme["exec"], scope_slugs=["engineering"])
    assert narrowed.get("/api/conflicts").json()["results"] == []
    assert_envelope(narrowed.get(f"/api/conflicts/{hidden_conflict.pk}"), 404)


def test_a_person_re_decides_keep_new_and_the_memories_follow(
    acme: dict[str, Any], contradiction: dict[str, Any], api: Any
) -> None:
    conflict = contradiction["conflict"]
    response = api(acme["manager"]).post(
        f"/api/conflicts/{conflict.pk}/resolve", {"resolution": "keep_new", "note": "250 was agreed last week"}
    )
    assert response.status_code == 200, response.content
    body = response.json()
    assert (body["status"], body["resolution"], body["resolution_note"]) == ("resolved", "keep_new", "250 was agreed last week")
    assert body["resolved_by"]["type"] == "person" and body["resolved_by"]["id"] == str(acme["manager"].user_id)
    assert body["dissent"]["claim"] == LIMIT_100  # now the manager's old figure is the dissent
    new, existing = (Memory.objects.get(pk=contradiction[k].pk) for k in ("new", "existing"))
    assert new.status == "active" and new.superseded_by_id is None
    assert existing.status == "superseded" and existing.superseded_by_id == new.pk
    assert existing.chunks.filter(status="superseded").count() == existing.chunks.count()
    event = AuditEvent.objects.filter(action="conflict.resolve", actor_user_id=acme["manager"].user_id).get()
    assert event.details["resolution"] == "keep_new" and event.details["from"]["resolution"] == "keep_existing"
    assert AuditEvent.objects.filter(action="memory.reinstate", target_id=str(new.pk)).exists()


def test_keep_both_reinstates_and_dismiss_marks_dismissed(acme: dict[str, Any], contradiction: dict[str, Any], api: Any) -> None:
    client = api(acme["manager"])
    conflict = contradiction["conflict"]
    body = client.post(f"/api/conflicts/{conflict.pk}/resolve", {"resolution": "keep_both"}).json()
    assert (body["status"], body["resolution"], body["dissent"]) == ("resolved", "keep_both", None)
    assert set(Memory.objects.values_list("status", flat=True)) == {"active"}
    body = client.post(f"/api/conflicts/{conflict.pk}/resolve", {"resolution": "dismiss"}).json()
    assert (body["status"], body["resolution"]) == ("dismissed", "dismiss")
    assert set(Memory.objects.values_list("status", flat=True)) == {"active"}


def test_reopen_puts_a_decided_conflict_back_in_the_queue(acme: dict[str, Any], contradiction: dict[str, Any], api: Any) -> None:
    client = api(acme["manager"])
    conflict = contradiction["conflict"]
    body = client.post(f"/api/conflicts/{conflict.pk}/reopen", {"note": "needs the PM"}).json()
    assert (body["status"], body["resolution"], body["resolved_by"]) == ("open", None, None)
    assert str(conflict.pk) in {c["id"] for c in client.get("/api/conflicts").json()["results"]}
    assert_envelope(client.post(f"/api/conflicts/{conflict.pk}/reopen", {}), 409, "CONFLICT_ALREADY_OPEN")
    assert AuditEvent.objects.filter(action="conflict.reopen", target_id=str(conflict.pk)).exists()


def test_resolving_needs_write_access_to_every_memory_that_changes(
    acme: dict[str, Any], contradiction: dict[str, Any], api: Any
) -> None:
    conflict = contradiction["conflict"]
    # The contractor can read public-docs but it is all_members and writable; make them read-only via a token.
    assert_envelope(
        api(acme["employee"], read_only=True).post(f"/api/conflicts/{conflict.pk}/resolve", {"resolution": "keep_new"}),
        403,
        "TOKEN_READ_ONLY",
    )
    assert_envelope(
        api(acme["employee"]).post(f"/api/conflicts/{conflict.pk}/resolve", {"resolution": "later"}), 400, "VALIDATION_ERROR"
    )
    assert_envelope(
        api(acme["employee"]).post(f"/api/conflicts/{conflict.pk}/resolve", {"resolution": "keep_new", "extra": 1}), 400
    )
    conflict.refresh_from_db()
    assert conflict.resolution == "keep_existing"


def test_a_clearance_below_one_memory_hides_the_conflict(acme: dict[str, Any], write: Any, api: Any) -> None:
    Organization.objects.filter(pk=acme["org"].pk).update(conflict_policy="manual")
    write(acme["manager"], LIMIT_100, title="Public API rate limit", clearance_min="Manager")
    write(acme["employee"], LIMIT_250, title="Public API rate limit")
    conflict = Conflict.objects.get()
    assert api(acme["employee"]).get("/api/conflicts").json()["results"] == []
    assert_envelope(api(acme["employee"]).get(f"/api/conflicts/{conflict.pk}"), 404)
    assert [c["id"] for c in api(acme["manager"]).get("/api/conflicts").json()["results"]] == [str(conflict.pk)]


def test_memory_detail_lists_its_conflicts_from_its_own_side(
    acme: dict[str, Any], contradiction: dict[str, Any], api: Any
) -> None:
    body = api(acme["employee"]).get(f"/api/memories/{contradiction['new'].pk}").json()
    (summary,) = body["conflicts"]
    assert summary["id"] == str(contradiction["conflict"].pk)
    assert (summary["role"], summary["kind"], summary["status"]) == ("new", "contradiction", "resolved")
    assert summary["other"] == {"id": str(contradiction["existing"].pk), "title": "Public API rate limit", "status": "active"}

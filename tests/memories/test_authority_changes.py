"""Authority over changes: superseding someone else's memory (or proposing a revision), accepting
or declining a proposal, deciding and re-deciding a conflict, the automatic policy, provenance.

Table-driven over principals — the author (an Employee), a higher rung (Manager), a lower rung
(Contractor with write access), an admin (Executive), an outsider (another organization) and a
read-only token — on REST and the UI (MCP in tests/mcp/test_authority_tools.py). Whoever may not
make a change changes nothing.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone
from support import assert_envelope, imported, principal, remember, signed_in

from audit.models import AuditEvent
from memories.access import could_supersede
from memories.models import Conflict, Membership, Memory, MemoryChunk
from memories.selectors.recall import RecallQuery, recall
from memories.services.conflicts import conflict_resolve, policy_decision

pytestmark = pytest.mark.django_db

ORIGINAL = "Release freezes start on the 20th of December."
REVISED = "Release freezes start on the 15th of December."


@pytest.fixture
def people(acme: dict[str, Any], outsider: Membership, make_member: Any) -> dict[str, Membership]:
    return {
        "author": acme["employee"],
        "higher": acme["manager"],
        "lower": make_member(acme["org"], "Contractor", grants={"engineering": True}),
        "admin": acme["exec"],
        "outsider": outsider,
        "read_only": acme["manager"],
    }


def _client(api: Any, people: dict[str, Membership], who: str) -> Any:
    return api(people[who], read_only=True) if who == "read_only" else api(people[who])


# (who, REST status of a supersede, outcome)
SUPERSEDE = [
    ("author", 201, "superseded"),
    ("higher", 201, "superseded"),
    ("lower", 202, "proposed"),
    ("admin", 201, "superseded"),
    ("outsider", 404, "unchanged"),
    ("read_only", 403, "unchanged"),
]


@pytest.mark.parametrize(("who", "status", "outcome"), SUPERSEDE)
def test_rest_supersede_follows_authority_and_a_lower_rung_proposes(
    acme: dict[str, Any], api: Any, people: dict[str, Membership], who: str, status: int, outcome: str
) -> None:
    original = remember(acme["employee"], ORIGINAL, scope="engineering")
    response = _client(api, people, who).post(f"/api/memories/{original.pk}/supersede", {"content": REVISED})
    assert response.status_code == status, response.content
    original.refresh_from_db()
    if outcome == "superseded":
        assert original.status == "superseded" and response.json()["supersedes"] == str(original.pk)
        return
    assert original.status == "active" and original.superseded_by_id is None
    if outcome == "unchanged":
        assert Memory.objects.filter(organization=acme["org"]).count() == 1 and not Conflict.objects.exists()
        return
    body = response.json()
    assert body["memory"]["status"] == "proposed" and body["memory"]["content"] == REVISED
    assert body["proposal"]["kind"] == "revision" and body["proposal"]["status"] == "open"
    proposed = Memory.objects.get(pk=body["memory"]["id"])
    assert proposed.status == "proposed" and set(
        MemoryChunk.objects.filter(memory=proposed).values_list("status", flat=True)
    ) == {"proposed"}
    assert AuditEvent.objects.filter(action="memory.propose", target_id=str(proposed.pk)).exists()


def test_a_proposal_stays_out_of_recall_and_lists_and_is_read_only_by_its_proposer_and_deciders(
    acme: dict[str, Any], api: Any, people: dict[str, Membership]
) -> None:
    original = remember(acme["employee"], ORIGINAL, scope="engineering")
    body = api(people["lower"]).post(f"/api/memories/{original.pk}/supersede", {"content": REVISED}).json()
    proposal_id, conflict_id = body["memory"]["id"], body["proposal"]["id"]
    for who in ("author", "higher", "lower", "admin"):
        hits = recall(principal(people[who]), RecallQuery(query="release freeze December", limit=10), audit=False).hits
        assert [str(h.memory.pk) for h in hits] == [str(original.pk)], who
        listed = {m["id"] for m in api(people[who]).get("/api/memories", {"status": "all"}).json()["results"]}
        assert proposal_id not in listed, who
    # The proposer and those who may accept it read it; another Employee-rung writer does not.
    for who, visible in (("lower", True), ("author", True), ("higher", True), ("admin", True), ("outsider", False)):
        assert (api(people[who]).get(f"/api/memories/{proposal_id}").status_code == 200) is visible, who
        assert (api(people[who]).get(f"/api/conflicts/{conflict_id}").status_code == 200) is visible, who
    peer = Membership.objects.get(pk=people["lower"].pk)  # a second Contractor writer of engineering
    from memories.services import tenancy

    other = tenancy.member_add(organization=acme["org"], email="peer@example.test", clearance="Contractor", password=None)
    tenancy.grant_set(membership=other, scope=peer.grants.get().scope, can_write=True)
    assert api(other).get(f"/api/memories/{proposal_id}").status_code == 404
    assert api(other).get(f"/api/conflicts/{conflict_id}").status_code == 404


# (who, may accept the proposal)
ACCEPT = [("author", True), ("higher", True), ("lower", False), ("admin", True), ("outsider", False), ("read_only", False)]


@pytest.mark.parametrize(("who", "may"), ACCEPT)
def test_accepting_a_proposed_revision_needs_authority_over_the_original(
    acme: dict[str, Any], api: Any, people: dict[str, Membership], who: str, may: bool
) -> None:
    original = remember(acme["employee"], ORIGINAL, scope="engineering")
    body = api(people["lower"]).post(f"/api/memories/{original.pk}/supersede", {"content": REVISED}).json()
    conflict_id, proposal_id = body["proposal"]["id"], body["memory"]["id"]
    response = _client(api, people, who).post(f"/api/conflicts/{conflict_id}/resolve", {"resolution": "keep_new"})
    original.refresh_from_db()
    proposal = Memory.objects.get(pk=proposal_id)
    if may:
        assert response.status_code == 200 and response.json()["status"] == "resolved"
        assert proposal.status == "active" and original.status == "superseded" and original.superseded_by_id == proposal.pk
        assert AuditEvent.objects.filter(action="memory.accept_revision", target_id=proposal_id).exists()
        hits = recall(principal(people["author"]), RecallQuery(query="release freeze December", limit=5), audit=False).hits
        assert [str(h.memory.pk) for h in hits] == [proposal_id]
        return
    status, code = {"lower": (403, "CONFLICT_DECISION_NOT_ALLOWED"), "outsider": (404, "NOT_FOUND")}.get(
        who, (403, "TOKEN_READ_ONLY")
    )
    assert_envelope(response, status, code)
    assert proposal.status == "proposed" and original.status == "active"
    assert Conflict.objects.get(pk=conflict_id).status == "open"


def test_a_declined_proposal_stays_out_of_recall_and_the_decision_can_be_taken_again(
    acme: dict[str, Any], api: Any, people: dict[str, Membership]
) -> None:
    original = remember(acme["employee"], ORIGINAL, scope="engineering")
    body = api(people["lower"]).post(f"/api/memories/{original.pk}/supersede", {"content": REVISED}).json()
    conflict_id, proposal_id = body["proposal"]["id"], body["memory"]["id"]
    declined = api(people["author"]).post(f"/api/conflicts/{conflict_id}/resolve", {"resolution": "keep_existing", "note": "no"})
    assert declined.status_code == 200 and Memory.objects.get(pk=proposal_id).status == "proposed"
    assert_envelope(api(people["lower"]).post(f"/api/conflicts/{conflict_id}/reopen", {}), 403, "CONFLICT_DECISION_NOT_ALLOWED")
    assert api(people["higher"]).post(f"/api/conflicts/{conflict_id}/resolve", {"resolution": "keep_new"}).status_code == 200
    assert Memory.objects.get(pk=proposal_id).status == "active"
    assert Memory.objects.get(pk=original.pk).status == "superseded"


def test_ui_offers_propose_a_revision_below_the_authors_rung_and_accept_only_to_deciders(
    acme: dict[str, Any], people: dict[str, Membership]
) -> None:
    original = remember(acme["employee"], ORIGINAL, scope="engineering", title="Release freezes")
    lower = signed_in(people["lower"])
    page = lower.get(f"/memories/{original.pk}/").content.decode()
    assert "Propose a revision" in page and "Edit as new version" not in page
    assert "Edit as new version" in signed_in(people["higher"]).get(f"/memories/{original.pk}/").content.decode()
    response = lower.post(
        f"/memories/{original.pk}/edit/",
        {
            "title": "Release freezes",
            "content": REVISED,
            "scope": "engineering",
            "category": "note",
            "tags": "",
            "clearance_min": "Contractor",
        },
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    conflict = Conflict.objects.get(kind="revision")
    assert response["Location"] == f"/conflicts/{conflict.pk}/"
    conflict_page = lower.get(f"/conflicts/{conflict.pk}/").content.decode()
    assert "Accept revision" not in conflict_page and "decide-not-allowed" in conflict_page
    assert lower.post(f"/conflicts/{conflict.pk}/resolve/", {"resolution": "keep_new"}).status_code == 403
    assert Memory.objects.get(pk=original.pk).status == "active"
    author = signed_in(people["author"])
    assert "Accept revision" in author.get(f"/conflicts/{conflict.pk}/").content.decode()
    assert author.post(f"/conflicts/{conflict.pk}/resolve/", {"resolution": "keep_new"}).status_code == 302
    assert Memory.objects.get(pk=original.pk).status == "superseded"


# -- deciding a conflict ---------------------------------------------------------------------------
DECIDE = [("author", False), ("higher", True), ("lower", False), ("admin", True), ("outsider", False), ("read_only", False)]


def _contradiction(acme: dict[str, Any], people: dict[str, Membership]) -> Conflict:
    """The Manager's memory and the Employee's contradict each other in engineering (left open)."""
    existing = remember(people["higher"], "Deploys need two approvals.", scope="engineering")
    new = remember(people["author"], "Deploys need one approval.", scope="engineering")
    return Conflict.objects.create(
        organization=acme["org"], new_memory=new, existing_memory=existing, kind="contradiction", similarity=0.9, explanation="x"
    )


@pytest.mark.parametrize(("who", "may"), DECIDE)
def test_deciding_a_conflict_needs_authority_over_both_authors(
    acme: dict[str, Any], api: Any, people: dict[str, Membership], who: str, may: bool
) -> None:
    conflict = _contradiction(acme, people)
    response = _client(api, people, who).post(f"/api/conflicts/{conflict.pk}/resolve", {"resolution": "keep_new"})
    conflict.refresh_from_db()
    if may:
        assert response.status_code == 200 and conflict.status == "resolved" and conflict.dissent is not None
        again = _client(api, people, who).post(f"/api/conflicts/{conflict.pk}/resolve", {"resolution": "keep_existing"})
        assert again.status_code == 200 and Memory.objects.get(pk=conflict.existing_memory_id).status == "active"
        return
    status, code = {"outsider": (404, "NOT_FOUND"), "read_only": (403, "TOKEN_READ_ONLY")}.get(
        who, (403, "CONFLICT_DECISION_NOT_ALLOWED")
    )
    body = assert_envelope(response, status, code)
    if code == "CONFLICT_DECISION_NOT_ALLOWED":
        assert "admin" in body["message"] and "both" in body["message"]
    assert conflict.status == "open"
    assert {m.status for m in Memory.objects.filter(pk__in=[conflict.new_memory_id, conflict.existing_memory_id])} == {"active"}


def test_a_contractor_cannot_re_decide_what_an_executive_settled(
    acme: dict[str, Any], api: Any, people: dict[str, Membership]
) -> None:
    conflict = _contradiction(acme, people)
    conflict_resolve(principal=principal(people["admin"]), conflict_id=conflict.pk, resolution="keep_existing")
    for action, payload in (("resolve", {"resolution": "keep_new"}), ("reopen", {})):
        assert_envelope(api(people["lower"]).post(f"/api/conflicts/{conflict.pk}/{action}", payload), 403)
    conflict.refresh_from_db()
    assert (conflict.status, conflict.resolution) == ("resolved", "keep_existing")
    ui = signed_in(people["lower"])
    assert "decide-not-allowed" in ui.get(f"/conflicts/{conflict.pk}/").content.decode()
    assert ui.post(f"/conflicts/{conflict.pk}/reopen/").status_code == 403
    assert Conflict.objects.get(pk=conflict.pk).status == "resolved"


# -- the automatic policy --------------------------------------------------------------------------
def test_the_auto_policy_never_lets_a_lower_rung_supersede_a_higher_authors_memory(
    acme: dict[str, Any], people: dict[str, Membership]
) -> None:
    budget = remember(people["admin"], "The leadership offsite budget is $50,000.", scope="engineering")
    claim = remember(people["lower"], "The leadership offsite budget is now $500.", scope="engineering")
    conflict = Conflict.objects.create(
        organization=acme["org"], new_memory=claim, existing_memory=budget, kind="stale", similarity=0.9, explanation="x"
    )
    decision = policy_decision(conflict, outdated="existing")  # the classifier thinks the Executive's memory is stale
    assert decision.winner is None and "could not have superseded" in decision.note
    assert not could_supersede(claim, budget) and could_supersede(budget, claim)
    # The other way round (the higher authority's memory is the newer one) it is decided at once.
    assert policy_decision(conflict, outdated="new").winner == budget


# -- provenance ------------------------------------------------------------------------------------
def test_author_name_of_someone_else_is_refused_from_rest_and_accepted_from_imports_marked_as_given(
    acme: dict[str, Any], api: Any
) -> None:
    client = api(acme["employee"])
    body = assert_envelope(
        client.post("/api/memories", {"content": "I said it, not her.", "author_name": "Ada Lovelace"}),
        403,
        "AUTHOR_NAME_NOT_ALLOWED",
    )
    assert "imports" in body["message"]
    assert not Memory.objects.exists()
    own = client.post("/api/memories", {"content": "My own words.", "author_name": acme["employee"].user.display_name})
    assert own.status_code == 201 and own.json()["author"]["id"] == str(acme["employee"].user_id)
    assert own.json()["author"]["given_by"] is None
    memory = imported(acme["employee"], "Minutes from 2019.", author_name="Ada Lovelace")
    shown = client.get(f"/api/memories/{memory.pk}").json()["author"]
    assert shown == {"id": None, "name": "Ada Lovelace", "given_by": "import"}


def test_a_valid_from_in_the_future_is_refused_except_from_imports(acme: dict[str, Any], api: Any) -> None:
    client = api(acme["employee"])
    future = (timezone.now() + timedelta(days=365 * 70)).isoformat()
    assert_envelope(
        client.post("/api/memories", {"content": "Forever fresh.", "valid_from": future}), 422, "VALID_FROM_IN_FUTURE"
    )
    assert not Memory.objects.exists()
    skew = (timezone.now() + timedelta(minutes=2)).isoformat()
    assert client.post("/api/memories", {"content": "A slightly fast clock.", "valid_from": skew}).status_code == 201
    planned = imported(acme["employee"], "Effective next quarter.", valid_from=timezone.now() + timedelta(days=90))
    assert planned.valid_from > timezone.now()


def test_the_ui_form_cannot_assert_another_author(acme: dict[str, Any]) -> None:
    original = remember(acme["employee"], ORIGINAL, scope="engineering")
    assert original.author_id == acme["employee"].user_id and original.author_given_by == ""

"""Authority over redaction: the author, an admin or the connector that wrote a memory redact it;
every other reader may only request it, and the author or an admin decides the request.

Table-driven over principals (author, higher rung, lower rung, admin, outsider, read-only
token) and surfaces (REST, UI; MCP in tests/mcp/test_authority_tools.py). A principal who may
not change the memory changes nothing.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

import pytest
from support import assert_envelope, principal, remember, signed_in

from audit.models import AuditEvent
from cortex_site.errors import PermissionDenied
from memories.access import Principal
from memories.models import Membership, Memory, RedactionRequest
from memories.services.memories import MemoryDraft, memory_create, memory_redact

pytestmark = pytest.mark.django_db

# Who holds the memory (written by the Employee in engineering) and what each may do with it.
# (who, may redact, may request redaction, REST status of a redact, REST status of a request)
TABLE = [
    ("author", True, False, 200, 409),
    ("higher", False, True, 403, 201),  # the Manager writes engineering and outranks the author
    ("lower", False, True, 403, 201),  # the Contractor only reads engineering
    ("admin", True, False, 200, 409),
    ("outsider", False, False, 404, 404),
    ("read_only", False, False, 403, 403),  # the author's own read-only token
]


@pytest.fixture
def people(acme: dict[str, Any], outsider: Membership) -> dict[str, Membership]:
    return {
        "author": acme["employee"],
        "higher": acme["manager"],
        "lower": acme["contractor"],
        "admin": acme["exec"],
        "outsider": outsider,
        "read_only": acme["employee"],
    }


def _client(api: Any, people: dict[str, Membership], who: str) -> Any:
    return api(people[who], read_only=True) if who == "read_only" else api(people[who])


@pytest.mark.parametrize(("who", "may_redact", "may_request", "redact_status", "request_status"), TABLE)
def test_rest_redaction_follows_authority(
    acme: dict[str, Any],
    api: Any,
    people: dict[str, Membership],
    who: str,
    may_redact: bool,
    may_request: bool,
    redact_status: int,
    request_status: int,
) -> None:
    memory = remember(acme["employee"], "The dock firmware signing key lives in the vault.", scope="engineering")
    client = _client(api, people, who)
    response = client.post(f"/api/memories/{memory.pk}/redact", {"reason": "it names a secret"})
    if redact_status == 200:
        assert response.status_code == 200 and response.json()["status"] == "redacted"
        assert Memory.objects.get(pk=memory.pk).status == "redacted"
        return
    expected_code = {403: "REDACTION_NOT_ALLOWED" if who != "read_only" else "TOKEN_READ_ONLY", 404: "NOT_FOUND"}
    body = assert_envelope(response, redact_status, expected_code[redact_status])
    if redact_status == 403 and who != "read_only":
        assert "author" in body["message"] and "admin" in body["message"]  # a sentence naming the rule
    assert Memory.objects.get(pk=memory.pk).status == "active"  # nothing changed
    assert not AuditEvent.objects.filter(action="memory.redact").exists()

    asked = client.post(f"/api/memories/{memory.pk}/redaction-requests", {"reason": "it names a secret"})
    assert asked.status_code == request_status, asked.content
    assert RedactionRequest.objects.filter(memory=memory).count() == (1 if may_request else 0)
    if may_request:
        assert asked.json()["status"] == "open" and asked.json()["can_decide"] is False


@pytest.mark.parametrize("who", ["author", "higher", "lower", "admin", "outsider", "read_only"])
def test_only_the_author_or_an_admin_decides_a_request_over_rest(
    acme: dict[str, Any], api: Any, people: dict[str, Membership], who: str
) -> None:
    memory = remember(acme["employee"], "Customer Jane Roe's phone number is 555-0101.", scope="engineering")
    made = api(acme["contractor"]).post(f"/api/memories/{memory.pk}/redaction-requests", {"reason": "personal data"})
    assert made.status_code == 201
    request_id = made.json()["id"]
    response = _client(api, people, who).post(f"/api/redaction-requests/{request_id}/decide", {"decision": "approve"})
    stored = Memory.objects.get(pk=memory.pk)
    if who in {"author", "admin"}:
        assert response.status_code == 200 and response.json()["status"] == "approved"
        assert stored.status == "redacted" and stored.redaction_reason == "personal data"
        assert stored.redacted_by == people[who].user
        decided = AuditEvent.objects.get(action="redaction_request.decide")
        assert decided.details["decision"] == "approve" and decided.details["request"] == request_id
        return
    expected = {"higher": (404, "NOT_FOUND"), "lower": (404, "NOT_FOUND"), "outsider": (404, "NOT_FOUND")}
    # The manager and contractor did not ask (the contractor's request is theirs to see, not to decide).
    status, code = expected.get(who, (403, "TOKEN_READ_ONLY"))
    if who == "lower":
        status, code = 403, "REDACTION_NOT_ALLOWED"
    assert_envelope(response, status, code)
    assert stored.status == "active" and RedactionRequest.objects.get(pk=request_id).status == "open"


def test_the_queue_lists_requests_for_the_author_and_admins_and_the_requesters_own_only(
    acme: dict[str, Any], api: Any, outsider: Membership
) -> None:
    mine = remember(acme["employee"], "Onboarding checklist draft.", scope="engineering")
    theirs = remember(acme["manager"], "Sprint goal: ship the dock API.", scope="engineering")
    api(acme["contractor"]).post(f"/api/memories/{mine.pk}/redaction-requests", {"reason": "outdated and wrong"})
    api(acme["contractor"]).post(f"/api/memories/{theirs.pk}/redaction-requests", {"reason": "leaks a date"})

    def titles(membership: Membership) -> set[str]:
        response = api(membership).get("/api/redaction-requests")
        assert response.status_code == 200
        return {r["memory"]["title"] for r in response.json()["results"]}

    assert titles(acme["employee"]) == {"Onboarding checklist draft."}
    assert titles(acme["manager"]) == {"Sprint goal: ship the dock API."}
    assert titles(acme["contractor"]) == {"Onboarding checklist draft.", "Sprint goal: ship the dock API."}
    assert titles(acme["exec"]) == {"Onboarding checklist draft.", "Sprint goal: ship the dock API."}
    assert titles(outsider) == set()
    assert api(acme["employee"]).get("/api/redaction-requests?status=nope").status_code == 400


def test_declining_keeps_the_memory_and_a_decided_request_is_not_decided_again(acme: dict[str, Any], api: Any) -> None:
    memory = remember(acme["employee"], "Lunch is at noon on Fridays.", scope="engineering")
    request_id = api(acme["contractor"]).post(f"/api/memories/{memory.pk}/redaction-requests", {"reason": "trivial"}).json()["id"]
    assert_envelope(
        api(acme["contractor"]).post(f"/api/memories/{memory.pk}/redaction-requests", {"reason": "again"}),
        409,
        "REDACTION_REQUEST_OPEN",
    )
    declined = api(acme["employee"]).post(f"/api/redaction-requests/{request_id}/decide", {"decision": "decline", "note": "keep"})
    assert declined.status_code == 200 and declined.json()["status"] == "declined" and declined.json()["decision_note"] == "keep"
    assert Memory.objects.get(pk=memory.pk).status == "active"
    assert_envelope(
        api(acme["exec"]).post(f"/api/redaction-requests/{request_id}/decide", {"decision": "approve"}),
        409,
        "REDACTION_REQUEST_DECIDED",
    )
    assert_envelope(api(acme["exec"]).post(f"/api/redaction-requests/{request_id}/decide", {"decision": "maybe"}), 400)
    assert_envelope(api(acme["exec"]).post(f"/api/redaction-requests/{uuid.uuid4()}/decide", {"decision": "approve"}), 404)
    assert_envelope(
        api(acme["contractor"]).post(f"/api/memories/{memory.pk}/redaction-requests", {"reason": " "}), 400, "REASON_REQUIRED"
    )


def test_redacting_closes_open_requests(acme: dict[str, Any], api: Any) -> None:
    memory = remember(acme["employee"], "Wifi password is hunter2.", scope="engineering")
    api(acme["contractor"]).post(f"/api/memories/{memory.pk}/redaction-requests", {"reason": "a password"})
    api(acme["manager"]).post(f"/api/memories/{memory.pk}/redaction-requests", {"reason": "secret"})
    memory_redact(principal=principal(acme["employee"]), memory_id=memory.pk, reason="a password")
    assert set(RedactionRequest.objects.filter(memory=memory).values_list("status", flat=True)) == {"approved"}


# -- UI --------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("who", "may_redact", "may_request", "redact_status", "request_status"), TABLE)
def test_ui_offers_redact_or_request_redaction_by_authority(
    acme: dict[str, Any],
    people: dict[str, Membership],
    who: str,
    may_redact: bool,
    may_request: bool,
    redact_status: int,
    request_status: int,
) -> None:
    if who == "read_only":
        return  # a browser session is never a token; tokens are covered over REST and MCP
    memory = remember(acme["employee"], "Release train leaves every second Tuesday.", scope="engineering")
    client = signed_in(people[who])
    page = client.get(f"/memories/{memory.pk}/")
    if who == "outsider":
        assert page.status_code == 404
        assert client.post(f"/memories/{memory.pk}/redact/", {"reason": "x"}).status_code == 404
        assert client.post(f"/memories/{memory.pk}/request-redaction/", {"reason": "x"}).status_code == 404
        assert not RedactionRequest.objects.exists() and Memory.objects.get(pk=memory.pk).status == "active"
        return
    html = page.content.decode()
    assert ("redact-dialog" in html) is may_redact
    assert ("request-redaction-dialog" in html) is may_request
    if not may_redact:
        assert client.post(f"/memories/{memory.pk}/redact/", {"reason": "x"}).status_code == 403
        assert Memory.objects.get(pk=memory.pk).status == "active"
    if may_request:
        response = client.post(f"/memories/{memory.pk}/request-redaction/", {"reason": "out of date"})
        assert response.status_code == 302
        assert RedactionRequest.objects.get(memory=memory).requested_by == people[who].user
    else:
        assert client.post(f"/memories/{memory.pk}/request-redaction/", {"reason": "x"}).status_code == 403


def test_ui_queue_approves_for_the_author_and_refuses_others(acme: dict[str, Any], api: Any) -> None:
    memory = remember(acme["employee"], "Staging database dump link.", scope="engineering")
    request_id = api(acme["contractor"]).post(f"/api/memories/{memory.pk}/redaction-requests", {"reason": "data"}).json()["id"]
    queue = signed_in(acme["employee"]).get("/redaction-requests/").content.decode()
    assert "Staging database dump link." in queue and "Approve and redact" in queue
    requester_view = signed_in(acme["contractor"]).get("/redaction-requests/").content.decode()
    assert "Staging database dump link." in requester_view and "Approve and redact" not in requester_view
    assert (
        signed_in(acme["contractor"]).post(f"/redaction-requests/{request_id}/decide/", {"decision": "approve"}).status_code
        == 403
    )
    assert (
        signed_in(acme["manager"]).post(f"/redaction-requests/{request_id}/decide/", {"decision": "approve"}).status_code == 404
    )
    assert Memory.objects.get(pk=memory.pk).status == "active"
    done = signed_in(acme["employee"]).post(f"/redaction-requests/{request_id}/decide/", {"decision": "approve"})
    assert done.status_code == 302 and Memory.objects.get(pk=memory.pk).status == "redacted"


# -- connectors ------------------------------------------------------------------------------------
@dataclass
class InstalledConnector:
    pk: uuid.UUID
    kind: str
    name: str
    installed_by: Membership


def test_the_connector_redacts_what_a_connector_source_wrote_and_nothing_else(acme: dict[str, Any]) -> None:
    installer = Membership.objects.select_related("organization", "user").get(pk=acme["contractor"].pk)
    connector = Principal.as_connector(InstalledConnector(uuid.uuid4(), "github", "acme/dock", installer))
    from_github = memory_create(
        principal=principal(acme["employee"]),
        draft=MemoryDraft(content="PR 7 merged: dock retries.", scope="engineering", source="GitHub"),
    ).memory
    manual = remember(acme["employee"], "A note typed by a person.", scope="engineering")
    assert connector.can_redact(from_github) and not connector.can_redact(manual)
    memory_redact(principal=connector, memory_id=from_github.pk, reason="the PR was deleted upstream")
    with pytest.raises(PermissionDenied):
        memory_redact(principal=connector, memory_id=manual.pk, reason="no")
    assert Memory.objects.get(pk=manual.pk).status == "active"

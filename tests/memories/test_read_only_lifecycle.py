"""A read-only token changes nothing, on every lifecycle endpoint of the REST API.

The tokens belong to a person who may make the change — the Executive admin who wrote the memories,
or (to ask for a redaction) a reader who is neither author nor admin — so a refusal can only come
from the token being read-only: each case first sends the request with the read-only token (403
TOKEN_READ_ONLY, nothing changed, nothing audited as done), then the same request with that person's
ordinary token, which succeeds.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from support import assert_envelope, principal, remember

from audit.models import AuditEvent
from memories.models import Conflict, Memory, Organization, RedactionHold, RedactionRequest
from memories.services.conflicts import conflict_resolve
from memories.services.memories import memory_redact
from memories.services.redactions import redaction_request_create


@dataclass(frozen=True)
class Case:
    method: str
    path: str
    body: dict[str, Any] | None
    ok: int
    who: str = "exec"  # whose tokens send it: someone who may do it


def _state() -> tuple[Any, ...]:
    """Everything a lifecycle write could change, and the audit events of done (not refused) actions."""
    return (
        sorted(Memory.objects.values_list("id", "status", "title", "content", "tags", "category", "clearance_rank")),
        sorted(RedactionRequest.objects.values_list("id", "status")),
        sorted(RedactionHold.objects.values_list("memory_id", "held_until")),
        sorted(Conflict.objects.values_list("id", "status", "resolution")),
        AuditEvent.objects.filter(outcome=AuditEvent.Outcome.OK).exclude(action__in=["memory.read", "memory.list"]).count(),
    )


@pytest.fixture
def world(acme: dict[str, Any], django_capture_on_commit_callbacks: Any) -> dict[str, Any]:
    admin = acme["exec"]
    memory = remember(admin, "Robot fleet firmware is pinned to 4.2.", scope="engineering")
    redacted = remember(admin, "The staging VPN key is 3f9a.", scope="engineering")
    memory_redact(principal=principal(admin), memory_id=redacted.pk, reason="a credential")
    asked = remember(acme["manager"], "The deploy freeze starts on Thursdays.", scope="engineering")
    request = redaction_request_create(principal=principal(acme["employee"]), memory_id=memory.pk, reason="outdated")
    Organization.objects.filter(pk=acme["org"].pk).update(conflict_policy="manual")
    with django_capture_on_commit_callbacks(execute=True):
        remember(admin, "The public API allows 100 requests per minute.", title="API rate limit", scope="engineering")
    with django_capture_on_commit_callbacks(execute=True):
        remember(admin, "The public API allows 250 requests per minute.", title="API rate limit", scope="engineering")
    conflict = Conflict.objects.get(status=Conflict.Status.OPEN)
    return {"memory": memory, "redacted": redacted, "asked": asked, "request": request, "conflict": conflict, **acme}


CASES: dict[str, Callable[[dict[str, Any]], Case]] = {
    "remember": lambda w: Case("post", "/api/memories", {"content": "Firmware 4.3 ships in May.", "scope": "engineering"}, 201),
    "supersede": lambda w: Case("post", f"/api/memories/{w['memory'].pk}/supersede", {"content": "Pinned to 4.3."}, 201),
    "patch": lambda w: Case("patch", f"/api/memories/{w['memory'].pk}", {"tags": ["firmware"], "clearance_min": "Manager"}, 200),
    "redact": lambda w: Case("post", f"/api/memories/{w['memory'].pk}/redact", {"reason": "wrong"}, 200),
    "redact-urgent": lambda w: Case(
        "post", f"/api/memories/{w['memory'].pk}/redact", {"reason": "a secret", "urgent": True}, 200
    ),
    "restore": lambda w: Case("post", f"/api/memories/{w['redacted'].pk}/restore", {}, 200),
    "delete": lambda w: Case("delete", f"/api/memories/{w['memory'].pk}", None, 204),
    # Neither its author nor an admin: the employee may only ask.
    "request-redaction": lambda w: Case(
        "post", f"/api/memories/{w['asked'].pk}/redaction-requests", {"reason": "stale"}, 201, who="employee"
    ),
    "decide-redaction-request": lambda w: Case(
        "post", f"/api/redaction-requests/{w['request'].pk}/decide", {"decision": "decline", "note": "still true"}, 200
    ),
    "resolve-conflict": lambda w: Case("post", f"/api/conflicts/{w['conflict'].pk}/resolve", {"resolution": "keep_new"}, 200),
}


def _send(client: Any, case: Case) -> Any:
    send = getattr(client, case.method)
    return send(case.path) if case.body is None else send(case.path, case.body)


@pytest.mark.django_db
@pytest.mark.parametrize("name", sorted(CASES))
def test_a_read_only_token_changes_nothing_on_any_lifecycle_endpoint(name: str, world: dict[str, Any], api: Any) -> None:
    case = CASES[name](world)
    read_only, full = api(world[case.who], read_only=True), api(world[case.who])
    before = _state()
    assert_envelope(_send(read_only, case), 403, "TOKEN_READ_ONLY")
    assert _state() == before
    # The same person without the read-only flag may do it: the flag alone refused it.
    response = _send(full, case)
    assert response.status_code == case.ok, response.content
    assert _state() != before


@pytest.mark.django_db
def test_a_read_only_token_cannot_reopen_a_decided_conflict(world: dict[str, Any], api: Any) -> None:
    conflict = world["conflict"]
    conflict_resolve(principal=principal(world["exec"]), conflict_id=conflict.pk, resolution="keep_existing")
    read_only, full = api(world["exec"], read_only=True), api(world["exec"])
    before = _state()
    assert_envelope(read_only.post(f"/api/conflicts/{conflict.pk}/reopen", {}), 403, "TOKEN_READ_ONLY")
    assert _state() == before
    assert full.post(f"/api/conflicts/{conflict.pk}/reopen", {}).status_code == 200
    conflict.refresh_from_db()
    assert conflict.status == Conflict.Status.OPEN


@pytest.mark.django_db
def test_a_read_only_token_still_reads_what_its_holder_reads(world: dict[str, Any], api: Any) -> None:
    reader = api(world["exec"], read_only=True)
    assert reader.get(f"/api/memories/{world['memory'].pk}").status_code == 200
    assert reader.get(f"/api/conflicts/{world['conflict'].pk}").status_code == 200
    assert reader.post("/api/recall", {"query": "firmware pinned"}).status_code == 200

"""Reading redaction requests on behalf of a principal.

A request is visible to the reader who made it and to those who may decide it (the memory's
author and admins — `Principal.can_redact`), and only while the principal can read the memory
(any status, as in its history). Missing, foreign and forbidden requests are one NotFound.
"""

from __future__ import annotations

from typing import Any

from django.db.models import Q, QuerySet

from cortex_site.errors import Denial, NotFound, ValidationFailed
from memories.access import DenialRule, Principal, hidden, parse_id
from memories.models import RedactionRequest
from memories.selectors.memories import readable_base

STATUS_FILTERS = {"open", "approved", "declined", "all"}


def _base(principal: Principal) -> QuerySet[RedactionRequest]:
    readable = readable_base(principal).values("pk")
    return RedactionRequest.objects.filter(organization_id=principal.organization_id, memory_id__in=readable).select_related(
        "memory__scope", "memory__author", "requested_by", "decided_by"
    )


def _visible(principal: Principal, request: RedactionRequest) -> bool:
    if not principal.can_read_memory(request.memory, history=True):
        return False
    return request.requested_by_id == principal.user.pk or principal.can_redact(request.memory)


def redaction_requests(principal: Principal, *, status: str = "open") -> list[RedactionRequest]:
    """The review queue: requests the principal may decide, and its own, newest first (at most 500)."""
    if status not in STATUS_FILTERS:
        raise ValidationFailed(f"status must be one of {', '.join(sorted(STATUS_FILTERS))}.", error_code="INVALID_STATUS")
    requests = _base(principal)
    if status != "all":
        requests = requests.filter(status=status)
    if not principal.is_admin and principal.connector is None:
        # Narrowed in SQL to what the author rule can allow; the Principal has the last word per row.
        requests = requests.filter(Q(requested_by=principal.user) | Q(memory__author=principal.user))
    return [r for r in requests.order_by("-created_at", "-id")[:500] if _visible(principal, r)]


def redaction_request_for(principal: Principal, request_id: Any, *, for_update: bool = False) -> RedactionRequest:
    parsed = parse_id(request_id)
    if parsed is None:
        raise NotFound("Redaction request not found.")
    requests = _base(principal)
    if for_update:
        requests = requests.select_for_update(of=("self",))
    request = requests.filter(pk=parsed).first()
    if request is None or not _visible(principal, request):
        raise NotFound("Redaction request not found.", denial=_hidden_request(principal, parsed))
    return request


def _hidden_request(principal: Principal, request_id: Any) -> Denial | None:
    """Another organization's request; one whose memory the principal may not read (that memory's
    rule); or one it neither made nor may decide (someone else's)."""
    request = RedactionRequest.objects.filter(pk=request_id).select_related("memory__supersedes").first()
    if request is None:
        return None
    return hidden(principal, "redaction_request", request, principal.memory_denial_rule(request.memory) or DenialRule.OWNER)

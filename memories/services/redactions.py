"""Redaction requests: a reader who may not redact a memory asks those who may (its author,
admins) to do it; they approve (the memory is redacted, with the request's reason) or decline.
"""

from __future__ import annotations

from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone

from audit.services import record
from cortex_site.errors import Conflict, PermissionDenied, ValidationFailed
from memories.access import Principal
from memories.models import Memory, RedactionRequest
from memories.selectors.memories import memory_for_history
from memories.selectors.redactions import redaction_request_for
from memories.services.memories import memory_redact

DECISIONS = ("approve", "decline")


def _clean_reason(reason: str, *, name: str = "reason", required: bool = True) -> str:
    reason = (reason or "").strip()
    if required and not reason:
        raise ValidationFailed("Say why this memory should be redacted (reason).", error_code="REASON_REQUIRED")
    if len(reason) > 1000:
        raise ValidationFailed(f"The {name} is at most 1,000 characters.", error_code="REASON_TOO_LONG")
    return reason


def redaction_request_create(*, principal: Principal, memory_id: Any, reason: str) -> RedactionRequest:
    """Ask the memory's author and admins to redact it. For readers who may not redact it themselves
    (those who may are told to redact instead); one open request per reader and memory."""
    reason = _clean_reason(reason)
    if principal.read_only:
        raise PermissionDenied("This token is read-only.", error_code="TOKEN_READ_ONLY")
    with transaction.atomic():
        memory = memory_for_history(principal, memory_id, for_update=True)
        if memory.status == Memory.Status.REDACTED:
            raise Conflict("This memory is already redacted.", error_code="ALREADY_REDACTED")
        if principal.can_redact(memory):
            raise Conflict("You can redact this memory yourself; no request is needed.", error_code="REDACTION_ALLOWED")
        try:
            with transaction.atomic():
                request = RedactionRequest.objects.create(
                    organization_id=principal.organization_id, memory=memory, requested_by=principal.user, reason=reason
                )
        except IntegrityError:
            raise Conflict(
                "You already asked for this memory to be redacted; the request is open.", error_code="REDACTION_REQUEST_OPEN"
            ) from None
        record(
            "redaction_request.create",
            organization=principal.organization_id,
            actor=principal.actor,
            target_type="memory",
            target_id=memory.pk,
            details={"request": str(request.pk), "reason": reason},
        )
    return redaction_request_for(principal, request.pk)


def redaction_request_decide(*, principal: Principal, request_id: Any, decision: str, note: str = "") -> RedactionRequest:
    """Approve (the memory is redacted with the request's reason) or decline an open request.

    Only those who may redact the memory decide (REDACTION_NOT_ALLOWED otherwise; the requester
    sees their own request but cannot decide it). A decided request is not decided again.
    """
    if decision not in DECISIONS:
        raise ValidationFailed("decision is approve or decline.", error_code="INVALID_DECISION")
    note = _clean_reason(note, name="note", required=False)
    if principal.read_only:
        raise PermissionDenied("This token is read-only.", error_code="TOKEN_READ_ONLY")
    with transaction.atomic():
        request = redaction_request_for(principal, request_id, for_update=True)
        if not principal.can_redact(request.memory):
            raise PermissionDenied(
                "Only the memory's author, an admin, or the connector that wrote it can decide a redaction request.",
                error_code="REDACTION_NOT_ALLOWED",
            )
        if request.status != RedactionRequest.Status.OPEN:
            raise Conflict(f"This request was already {request.status}.", error_code="REDACTION_REQUEST_DECIDED")
        if decision == "approve":
            memory_redact(principal=principal, memory_id=request.memory_id, reason=request.reason)  # closes open requests
            RedactionRequest.objects.filter(pk=request.pk).update(decision_note=note)
        else:
            RedactionRequest.objects.filter(pk=request.pk).update(
                status=RedactionRequest.Status.DECLINED, decided_by=principal.user, decided_at=timezone.now(), decision_note=note
            )
        record(
            "redaction_request.decide",
            organization=principal.organization_id,
            actor=principal.actor,
            target_type="memory",
            target_id=request.memory_id,
            details={"request": str(request.pk), "decision": decision, "note": note[:500]},
        )
    return redaction_request_for(principal, request.pk)

"""Reading the audit log on behalf of a Principal: admins of the organization only (404 for everyone else).

Reads of the log are themselves audited by the interfaces (`audit.read`, `audit.export`, `audit.verify`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from django.db.models import Q, QuerySet

from audit.models import AuditEvent
from cortex_site.errors import NotFound, ValidationFailed
from cortex_site.moments import parse_moment

if TYPE_CHECKING:
    from memories.access import Principal
    from memories.models import Memory

READ_ACTIONS = ("memory.read", "memory.recall")


def _require_audit_reader(principal: Principal) -> None:
    # Not 403: the log's existence is nobody else's business, like a foreign object.
    if not principal.is_admin:
        raise NotFound("Not found.")


@dataclass(frozen=True)
class AuditFilters:
    actor: str | None = None  # an email / label fragment, or a user id
    action: str | None = None  # exact, or a prefix ending with "." ("member." for every member action)
    target: str | None = None  # "type:id", "type", or an id
    since: datetime | None = None
    until: datetime | None = None
    outcome: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if v not in (None, "")}


def parse_filters(params: Any) -> AuditFilters:
    """Filters from query parameters; a bad value is a 400 naming it, never a silently wider result."""

    def moment(name: str) -> datetime | None:
        raw = (params.get(name) or "").strip()
        if not raw:
            return None
        try:
            return parse_moment(raw)
        except ValueError:
            raise ValidationFailed(
                f"{name} must be an ISO date or date-time.", error_code="INVALID_DATE", details={name: raw}
            ) from None

    outcome = (params.get("outcome") or "").strip() or None
    if outcome is not None and outcome not in AuditEvent.Outcome.values:
        raise ValidationFailed(
            f"outcome must be one of {', '.join(AuditEvent.Outcome.values)}.",
            error_code="INVALID_OUTCOME",
            details={"outcome": outcome},
        )
    return AuditFilters(
        actor=(params.get("actor") or "").strip() or None,
        action=(params.get("action") or "").strip() or None,
        target=(params.get("target") or "").strip() or None,
        since=moment("since"),
        until=moment("until"),
        outcome=outcome,
    )


def audit_events(principal: Principal, filters: AuditFilters) -> QuerySet[AuditEvent]:
    """The organization's events matching the filters, newest first."""
    _require_audit_reader(principal)
    events = AuditEvent.objects.filter(organization_id=principal.organization_id)
    if filters.actor:
        match = Q(actor_label__icontains=filters.actor)
        try:
            import uuid

            match |= Q(actor_user_id=uuid.UUID(filters.actor)) | Q(actor_token_id=uuid.UUID(filters.actor))
        except ValueError:
            pass
        events = events.filter(match)
    if filters.action:
        events = (
            events.filter(action__startswith=filters.action)
            if filters.action.endswith(".")
            else events.filter(action=filters.action)
        )
    if filters.target:
        kind, _, ident = filters.target.partition(":")
        if ident:
            events = events.filter(target_type=kind, target_id=ident)
        else:
            events = events.filter(Q(target_type=kind) | Q(target_id=kind))
    if filters.since:
        events = events.filter(created_at__gte=filters.since)
    if filters.until:
        events = events.filter(created_at__lt=filters.until)
    if filters.outcome:
        events = events.filter(outcome=filters.outcome)
    return events.order_by("-id")


def audit_event(principal: Principal, event_id: Any) -> AuditEvent:
    _require_audit_reader(principal)
    try:
        pk = int(event_id)
    except (TypeError, ValueError):
        raise NotFound("Not found.") from None
    event = AuditEvent.objects.filter(organization_id=principal.organization_id, pk=pk).first()
    if event is None:
        raise NotFound("Not found.")
    return event


def can_see_readers(principal: Principal, memory: Memory) -> bool:
    """ "Who read this" is for the memory's author and the organization's admins (who may read the memory)."""
    return principal.can_read_memory(memory, history=True) and (principal.is_admin or memory.author_id == principal.user.pk)


def memory_readers(principal: Principal, memory: Memory, *, limit: int = 50) -> list[AuditEvent]:
    """Who opened or recalled this memory, newest first (recall events name what they returned)."""
    if not can_see_readers(principal, memory):
        raise NotFound("Not found.")
    ident = str(memory.pk)
    events = AuditEvent.objects.filter(organization_id=principal.organization_id).filter(
        Q(action="memory.read", target_type="memory", target_id=ident)
        | Q(action="memory.recall", details__contains={"results": [ident]})
    )
    return list(events.order_by("-id")[:limit])


def present_event(event: AuditEvent) -> dict[str, Any]:
    """The REST / export shape of one event."""
    return {
        "id": event.pk,
        "created_at": event.created_at.isoformat(),
        "actor": {
            "kind": event.actor_kind,
            "label": event.actor_label,
            "user_id": str(event.actor_user_id) if event.actor_user_id else None,
            "token_id": str(event.actor_token_id) if event.actor_token_id else None,
            "connector_id": event.actor_connector_id or None,
        },
        "action": event.action,
        "target": {"type": event.target_type, "id": event.target_id},
        "outcome": event.outcome,
        "request_id": event.request_id,
        "ip": event.ip,
        "details": event.details,
        "prev_hash": event.prev_hash,
        "hash": event.hash,
    }

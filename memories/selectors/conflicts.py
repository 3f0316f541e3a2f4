"""Reading conflicts on behalf of a principal: a conflict is visible only when both of its
memories are (organization, readable scope, clearance — any status, as in a memory's history).

Missing, foreign and half-visible conflicts all raise NotFound: a conflict must not reveal
that a memory the caller cannot read exists, let alone what it says.
"""

from __future__ import annotations

from typing import Any

from django.db.models import Q, QuerySet

from cortex_site.errors import Denial, NotFound, ValidationFailed
from memories.access import Principal, hidden, parse_id
from memories.models import Conflict, Memory

STATUS_FILTERS = {"open", "resolved", "dismissed", "all"}
KINDS = {k.value for k in Conflict.Kind}


def _readable(principal: Principal, prefix: str) -> Q:
    return Q(
        **{
            f"{prefix}__organization_id": principal.organization_id,
            f"{prefix}__scope_id__in": principal.readable_scope_ids,
            f"{prefix}__clearance_rank__lte": principal.clearance_rank,
        }
    )


def _base(principal: Principal) -> QuerySet[Conflict]:
    return (
        Conflict.objects.filter(organization_id=principal.organization_id)
        .filter(_readable(principal, "new_memory") & _readable(principal, "existing_memory"))
        .select_related(
            "new_memory__scope", "new_memory__author", "existing_memory__scope", "existing_memory__author", "resolved_by_user"
        )
    )


def _both_readable(principal: Principal, conflict: Conflict) -> bool:
    # Defence in depth: the Principal has the last word on each memory.
    return principal.can_read_memory(conflict.new_memory, history=True) and principal.can_read_memory(
        conflict.existing_memory, history=True
    )


def visible_conflicts(principal: Principal, *, status: str = "open", kind: str | None = None) -> QuerySet[Conflict]:
    """Conflicts the principal may see, newest first."""
    if status not in STATUS_FILTERS:
        raise ValidationFailed(f"status must be one of {', '.join(sorted(STATUS_FILTERS))}.", error_code="INVALID_STATUS")
    conflicts = _base(principal)
    if status != "all":
        conflicts = conflicts.filter(status=status)
    if kind:
        if kind not in KINDS:
            raise ValidationFailed(f"kind must be one of {', '.join(sorted(KINDS))}.", error_code="INVALID_KIND")
        conflicts = conflicts.filter(kind=kind)
    return conflicts.order_by("-created_at", "-id")


def checked(principal: Principal, conflicts: Any) -> list[Conflict]:
    """The conflicts of a page, re-checked one by one against the principal."""
    return [c for c in conflicts if _both_readable(principal, c)]


def conflict_for(principal: Principal, conflict_id: Any, *, for_update: bool = False) -> Conflict:
    """One conflict the principal may see (NotFound otherwise)."""
    parsed = parse_id(conflict_id)
    if parsed is None:
        raise NotFound("Conflict not found.")
    conflicts = _base(principal)
    if for_update:
        conflicts = conflicts.select_for_update(of=("self",))
    conflict = conflicts.filter(pk=parsed).first()
    if conflict is None or not _both_readable(principal, conflict):
        raise NotFound("Conflict not found.", denial=_hidden_conflict(principal, parsed))
    return conflict


def _hidden_conflict(principal: Principal, conflict_id: Any) -> Denial | None:
    """The owner and rule of a conflict the principal may not see: another organization's, or the
    rule that hides the first of its memories the principal may not read."""
    conflict = Conflict.objects.filter(pk=conflict_id).select_related("new_memory", "existing_memory").first()
    if conflict is None:
        return None
    rules = (principal.memory_denial_rule(m) for m in (conflict.new_memory, conflict.existing_memory))
    return hidden(principal, "conflict", conflict, next((r for r in rules if r is not None), None))


def memory_conflicts(principal: Principal, memory: Memory) -> list[Conflict]:
    """Conflicts a memory takes part in whose other memory the principal may also read."""
    conflicts = _base(principal).filter(Q(new_memory=memory) | Q(existing_memory=memory)).order_by("-created_at", "-id")
    return checked(principal, conflicts[:50])


def open_conflict_count(principal: Principal, memory: Memory) -> int:
    return sum(1 for c in memory_conflicts(principal, memory) if c.status == Conflict.Status.OPEN)

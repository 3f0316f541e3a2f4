"""People decide: resolve (keep new, keep existing, keep both, dismiss), re-open; and a redacted
memory's words are scrubbed from the conflicts that quote it.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from audit.services import record
from cortex_site.errors import Conflict as StateConflict
from cortex_site.errors import PermissionDenied, ValidationFailed
from memories.access import Principal
from memories.models import Conflict, Memory
from memories.selectors.conflicts import conflict_for
from memories.services.conflicts.policy import dissent_of
from memories.services.memories import memory_activate_proposal, memory_reinstate, memory_supersede_with_existing

RESOLUTIONS = {r.value for r in Conflict.Resolution}


def conflict_resolve(*, principal: Principal, conflict_id: Any, resolution: str, note: str = "") -> Conflict:
    """A person decides (or re-decides) a conflict; the memories follow the decision.

    keep_new / keep_existing: the other memory becomes superseded by the kept one (a memory a
    previous decision superseded is reinstated first); keep_both / dismiss: both are active.
    The caller must read both memories (else NotFound) and write every memory whose status
    changes. Raises Conflict(409) when a memory changed outside this conflict meanwhile.
    """
    if resolution not in RESOLUTIONS:
        raise ValidationFailed(f"resolution must be one of {', '.join(sorted(RESOLUTIONS))}.", error_code="INVALID_RESOLUTION")
    note = (note or "").strip()
    if len(note) > 2000:
        raise ValidationFailed("The note is at most 2,000 characters.", error_code="NOTE_TOO_LONG")
    if principal.read_only:
        raise PermissionDenied("This token is read-only.", error_code="TOKEN_READ_ONLY")
    with transaction.atomic():
        conflict = conflict_for(principal, conflict_id, for_update=True)
        _require_decide(principal, conflict)
        new, existing = conflict.new_memory, conflict.existing_memory
        keep: tuple[Memory, Memory] | None = None
        if resolution == Conflict.Resolution.KEEP_NEW:
            keep = (new, existing)
        elif resolution == Conflict.Resolution.KEEP_EXISTING:
            keep = (existing, new)
        changes = _changes_for(new, existing, keep)
        for memory in {m for step in changes for m in step[1:]}:
            if not principal.can_write_memory(memory):
                raise PermissionDenied(
                    f"You cannot change “{memory.title}”: its scope is not writable for you.", error_code="MEMORY_NOT_WRITABLE"
                )
        before = {"status": conflict.status, "resolution": conflict.resolution}
        actor = principal.actor
        for action, memory, other in changes:
            if action == "activate":
                memory_activate_proposal(
                    memory_id=memory.pk, actor=actor, reason=f"conflict:{resolution}", details={"conflict": str(conflict.pk)}
                )
            elif action == "reinstate":
                memory_reinstate(
                    memory_id=memory.pk,
                    superseded_by_id=other.pk,
                    actor=actor,
                    reason=f"conflict:{resolution}",
                    details={"conflict": str(conflict.pk)},
                )
            else:
                memory_supersede_with_existing(
                    loser_id=memory.pk,
                    winner_id=other.pk,
                    actor=actor,
                    reason=f"conflict:{resolution}",
                    details={"conflict": str(conflict.pk)},
                )
        loser = keep[1] if keep else None
        Conflict.objects.filter(pk=conflict.pk).update(
            status=Conflict.Status.DISMISSED if resolution == Conflict.Resolution.DISMISS else Conflict.Status.RESOLVED,
            resolution=resolution,
            resolved_by_user=principal.user,
            resolved_by_policy="",
            resolution_note=note,
            dissent=dissent_of(loser) if loser is not None else None,
            resolved_at=timezone.now(),
        )
        record(
            "conflict.resolve",
            organization=principal.organization_id,
            actor=actor,
            target_type="conflict",
            target_id=conflict.pk,
            details={
                "from": before,
                "resolution": resolution,
                "note": note[:500],
                "memory_changes": [[a, str(m.pk)] for a, m, _ in changes],
            },
        )
    return conflict_for(principal, conflict_id)


def _changes_for(new: Memory, existing: Memory, keep: tuple[Memory, Memory] | None) -> list[tuple[str, Memory, Memory]]:
    """The lifecycle steps that bring both memories to the decided state, in a safe order."""
    steps: list[tuple[str, Memory, Memory]] = []
    wanted_active = {new.pk, existing.pk} if keep is None else {keep[0].pk}
    for memory, other in ((new, existing), (existing, new)):
        if memory.pk in wanted_active and memory.status != Memory.Status.ACTIVE:
            if memory.status == Memory.Status.SUPERSEDED and memory.superseded_by_id == other.pk:
                steps.append(("reinstate", memory, other))
            elif memory.status == Memory.Status.PROPOSED:
                steps.append(("activate", memory, other))  # an accepted revision
            else:
                raise StateConflict(
                    f"“{memory.title}” is {memory.status} for another reason; it cannot be kept from here.",
                    error_code="MEMORY_NOT_ACTIVE",
                )
    if keep is not None and keep[1].status == Memory.Status.ACTIVE:
        # A loser that is already superseded or redacted stays as it is; a declined proposal stays proposed.
        steps.append(("supersede", keep[1], keep[0]))
    return steps


def conflict_reopen(*, principal: Principal, conflict_id: Any, note: str = "") -> Conflict:
    """Put a decided conflict back in the queue. The memories stay as they are until someone decides."""
    if principal.read_only:
        raise PermissionDenied("This token is read-only.", error_code="TOKEN_READ_ONLY")
    with transaction.atomic():
        conflict = conflict_for(principal, conflict_id, for_update=True)
        _require_decide(principal, conflict)
        if conflict.status == Conflict.Status.OPEN:
            raise StateConflict("This conflict is already open.", error_code="CONFLICT_ALREADY_OPEN")
        before = {"status": conflict.status, "resolution": conflict.resolution}
        Conflict.objects.filter(pk=conflict.pk).update(
            status=Conflict.Status.OPEN,
            resolution="",
            resolved_by_user=None,
            resolved_by_policy="",
            resolution_note=(note or "").strip()[:2000],
            resolved_at=None,
        )
        record(
            "conflict.reopen",
            organization=principal.organization_id,
            actor=principal.actor,
            target_type="conflict",
            target_id=conflict.pk,
            details={"from": before},
        )
    return conflict_for(principal, conflict_id)


def _require_decide(principal: Principal, conflict: Conflict) -> None:
    if principal.read_only:
        raise PermissionDenied("This token is read-only.", error_code="TOKEN_READ_ONLY")
    if not principal.can_decide(conflict):  # conflict_for found it: only authority can forbid it now
        raise PermissionDenied(
            "Only an admin, or a member whose clearance is at least that of both memories' authors, can decide this conflict.",
            error_code="CONFLICT_DECISION_NOT_ALLOWED",
        )


def conflicts_scrub_memory(memory_id: Any) -> None:
    """A redacted memory's words must not survive in conflicts: drop its dissent and the quoting explanation."""
    Conflict.objects.filter(dissent__memory_id=str(memory_id)).update(dissent={"memory_id": str(memory_id), "redacted": True})
    Conflict.objects.filter(Q(new_memory_id=memory_id) | Q(existing_memory_id=memory_id)).update(
        explanation="[The explanation was removed because one of the memories was redacted.]"
    )

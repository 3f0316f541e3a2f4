"""The organization's policy: `auto` resolves confident verdicts — duplicates, stale pairs and
contradictions (authority, then recency) — unless the winner reaches fewer people; a verdict whose
confidence is below LOW_CONFIDENCE waits for a person; `manual` queues everything.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db import transaction
from django.utils import timezone

from audit.services import Actor, record
from cortex_site.errors import Conflict as StateConflict
from cortex_site.errors import PermissionDenied, ValidationFailed
from memories.access import Operator, Principal, clearance_names, could_supersede
from memories.analysis.conflicts import Verdict
from memories.models import Conflict, Membership, Memory, Organization, Scope
from memories.services.memories import memory_supersede_with_existing

# Below this confidence a verdict is queued for a person even under the auto policy: resolving means
# superseding one memory, and an unsure classifier should not hide knowledge on its own. (The
# heuristic's verdicts start at 0.81 for aligned statements, so in practice this routes LLM verdicts.)
LOW_CONFIDENCE = 0.7
DISSENT_CHARS = 1000

SYSTEM_POLICY = Actor.system("conflict policy")


def _author_rank(memory: Memory) -> int | None:
    """The clearance rung of the memory's author in its organization; None when the author is only a name."""
    if memory.author_id is None:
        return None
    return (
        Membership.objects.filter(user_id=memory.author_id, organization_id=memory.organization_id)
        .values_list("clearance_rank", flat=True)
        .first()
    )


def _reaches_as_far(winner: Memory, loser: Memory) -> bool:
    """Can everyone who could read the loser read the winner? (Otherwise superseding hides knowledge.)"""
    if winner.clearance_rank > loser.clearance_rank:
        return False
    return winner.scope_id == loser.scope_id or winner.scope.visibility == Scope.Visibility.ALL_MEMBERS


_POLICY_OF_KIND: dict[str, str] = {
    Conflict.Kind.DUPLICATE: Conflict.Policy.DUPLICATE,
    Conflict.Kind.STALE: Conflict.Policy.STALE,
}


@dataclass(frozen=True)
class PolicyDecision:
    winner: Memory | None
    loser: Memory | None
    policy: str
    note: str


def policy_decision(conflict: Conflict, outdated: str | None) -> PolicyDecision:
    """Who wins under the auto policy, and why; `winner` None leaves the conflict for a person."""
    new, existing = conflict.new_memory, conflict.existing_memory
    if conflict.confidence is not None and conflict.confidence < LOW_CONFIDENCE:
        return PolicyDecision(
            None,
            None,
            _POLICY_OF_KIND.get(conflict.kind, Conflict.Policy.AUTHORITY.value),
            f"Left for a person: the classifier was unsure (confidence {conflict.confidence:.2f}, "
            f"below {LOW_CONFIDENCE:.2f}), so nothing was superseded automatically.",
        )
    if conflict.kind == Conflict.Kind.DUPLICATE:
        for winner, loser in ((existing, new), (new, existing)):
            if _reaches_as_far(winner, loser) and could_supersede(winner, loser):
                return PolicyDecision(
                    winner,
                    loser,
                    Conflict.Policy.DUPLICATE,
                    f"Same information: kept the {'existing' if winner is existing else 'new'} memory.",
                )
        return PolicyDecision(
            None,
            None,
            Conflict.Policy.DUPLICATE,
            "Left for a person: the duplicates are read by different people, or neither author may supersede the other's.",
        )
    if conflict.kind == Conflict.Kind.STALE:
        winner, loser = (new, existing) if outdated != "new" else (existing, new)
        decision = PolicyDecision(
            winner, loser, Conflict.Policy.STALE, f"Outdated: kept the {'new' if winner is new else 'existing'} memory."
        )
    else:
        names = clearance_names(conflict.organization_id)
        rank_new, rank_existing = _author_rank(new), _author_rank(existing)
        # An author known only by name (e.g. from a connector) ranks below every rung.
        ordered_new, ordered_existing = -1 if rank_new is None else rank_new, -1 if rank_existing is None else rank_existing
        if ordered_new != ordered_existing:
            winner, loser = (new, existing) if ordered_new > ordered_existing else (existing, new)
            win_rank, lose_rank = max(ordered_new, ordered_existing), min(ordered_new, ordered_existing)
            decision = PolicyDecision(
                winner,
                loser,
                Conflict.Policy.AUTHORITY,
                f"Authority: the {'new' if winner is new else 'existing'} memory's author ({names.get(win_rank, 'a member')}) "
                f"outranks the other's ({names.get(lose_rank, 'unknown clearance')}).",
            )
        else:
            newer_first = (new.valid_from, new.created_at) >= (existing.valid_from, existing.created_at)
            winner, loser = (new, existing) if newer_first else (existing, new)
            decision = PolicyDecision(
                winner,
                loser,
                Conflict.Policy.RECENCY,
                f"Recency: equal authority, so the newer statement ({winner.valid_from:%Y-%m-%d}) stands.",
            )
    assert decision.winner is not None and decision.loser is not None
    if not could_supersede(decision.winner, decision.loser):
        return PolicyDecision(
            None,
            None,
            decision.policy,
            "Left for a person: the author of the memory that would win could not have superseded the other by hand "
            "(their authority is below its author's).",
        )
    if not _reaches_as_far(decision.winner, decision.loser):
        return PolicyDecision(
            None,
            None,
            decision.policy,
            "Left for a person: the memory that would win is read by fewer people than the one it would replace.",
        )
    return decision


def apply_policy(conflict: Conflict, verdict: Verdict) -> None:
    organization = Organization.objects.only("conflict_policy").get(pk=conflict.organization_id)
    if organization.conflict_policy == Organization.ConflictPolicy.MANUAL:
        return
    decision = policy_decision(conflict, verdict.outdated)
    if decision.winner is None or decision.loser is None:
        Conflict.objects.filter(pk=conflict.pk, status=Conflict.Status.OPEN).update(resolution_note=decision.note)
        return
    resolution = (
        Conflict.Resolution.KEEP_NEW if decision.winner.pk == conflict.new_memory_id else Conflict.Resolution.KEEP_EXISTING
    )
    try:
        with transaction.atomic():
            claimed = Conflict.objects.filter(pk=conflict.pk, status=Conflict.Status.OPEN).update(
                status=Conflict.Status.RESOLVED,
                resolution=resolution,
                resolved_by_policy=decision.policy,
                resolved_by_user=None,
                resolution_note=decision.note,
                dissent=dissent_of(decision.loser),
                resolved_at=timezone.now(),
            )
            if claimed != 1:
                return
            memory_supersede_with_existing(
                loser_id=decision.loser.pk,
                winner_id=decision.winner.pk,
                actor=SYSTEM_POLICY,
                reason=f"conflict:{conflict.kind}",
                details={"conflict": str(conflict.pk), "policy": decision.policy},
            )
            record(
                "conflict.resolve",
                organization=conflict.organization_id,
                actor=SYSTEM_POLICY,
                target_type="conflict",
                target_id=conflict.pk,
                details={
                    "resolution": resolution,
                    "policy": decision.policy,
                    "winner": str(decision.winner.pk),
                    "loser": str(decision.loser.pk),
                },
            )
    except StateConflict as exc:
        # One of the two changed meanwhile (superseded, redacted): a person decides instead.
        Conflict.objects.filter(pk=conflict.pk, status=Conflict.Status.OPEN).update(
            resolution_note=f"Left for a person: {exc.message}"
        )


def dissent_of(loser: Memory) -> dict[str, Any]:
    """The losing side's claim, as kept on the conflict."""
    names = clearance_names(loser.organization_id)
    rank = _author_rank(loser)
    content = loser.content if len(loser.content) <= DISSENT_CHARS else loser.content[: DISSENT_CHARS - 1] + "…"
    return {
        "memory_id": str(loser.pk),
        "title": loser.title,
        "claim": content,
        "author": loser.author_display or None,
        "author_clearance": names.get(rank) if rank is not None else None,
        "source": loser.source,
        "valid_from": loser.valid_from.isoformat(),
    }


def conflict_policy_set(*, organization: Organization, policy: str, by: Principal | Operator | None = None) -> Organization:
    """Switch an organization between `auto` and `manual` resolution (admins, or the `Operator`; None is the operator too).

    Applies to conflicts found from now on; queued conflicts stay queued.
    """
    if policy not in Organization.ConflictPolicy.values:
        raise ValidationFailed("The conflict policy is auto or manual.", error_code="INVALID_POLICY")
    by = by if by is not None else Operator(organization)
    if by.organization_id != organization.pk or by.read_only:
        raise PermissionDenied("Only organization admins change the conflict policy.", error_code="ADMIN_REQUIRED")
    by.require_admin("Only organization admins change the conflict policy.")
    with transaction.atomic():
        before = Organization.objects.select_for_update().values_list("conflict_policy", flat=True).get(pk=organization.pk)
        if before != policy:
            Organization.objects.filter(pk=organization.pk).update(conflict_policy=policy)
            record(
                "organization.conflict_policy",
                organization=organization.pk,
                actor=by.actor,
                target_type="organization",
                target_id=organization.slug,
                details={"from": before, "to": policy},
            )
    organization.conflict_policy = policy
    return organization

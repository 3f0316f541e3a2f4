"""Conflicts: detection after every write (a post-write step) and resolution, by policy or by a person.

Detection (`conflicts_detect`, run on the worker, acting as the system):

1. candidates: active memories of the same organization stored before this one whose chunks
   lie near this memory's chunks (cosine > 0.75, computed by pgvector in SQL), plus exact
   content-hash twins, plus — when this memory says something "moved from X to Y" — related
   memories (cosine > 0.4) whose title or tags name X: an announced change rarely reads like
   what it replaces. Candidates, not conflicts;
2. each pair is classified: identical content is a duplicate without any model; otherwise the
   configured LLM judges (falling back to the heuristic, and saying so, when it fails), or the
   deterministic heuristic when no LLM is configured;
3. a pair is recorded at most once (the database enforces it), so re-running changes nothing;
4. the organization's policy: `auto` resolves duplicates and stale pairs at once and
   contradictions by authority (the higher clearance rung of the two authors), then recency —
   except a contradiction the LLM was unsure of, or a pair whose winner would reach fewer
   people than the loser did; those wait for a person. `manual` queues everything.

A resolution that picks a side supersedes the loser through the memory lifecycle
(`memory_supersede_with_existing`) and keeps the loser's claim as the conflict's dissent.
People re-decide (keep new, keep existing, keep both, dismiss) with `conflict_resolve`;
every detection and decision is audited.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from django.db import IntegrityError, connection, transaction
from django.db.models import Q
from django.utils import timezone

from audit.services import Actor, record
from cortex_site.errors import Conflict as StateConflict
from cortex_site.errors import PermissionDenied, ValidationFailed
from memories.access import Operator, Principal, clearance_names
from memories.analysis.conflict_llm import classify_with_llm
from memories.analysis.conflicts import Memo, Verdict, classify, replaced, replacements
from memories.analysis.text import content_words
from memories.llm import LLMInvalidOutput, LLMUnavailable, get_llm
from memories.models import Conflict, Membership, Memory, Organization, Scope
from memories.selectors.conflicts import conflict_for
from memories.services.memories import memory_reinstate, memory_supersede_with_existing

logger = logging.getLogger(__name__)

SIMILARITY_THRESHOLD = 0.75
# A memory that names what this one says it moved away from needs only to be related.
REPLACED_SIMILARITY = 0.4
REPLACED_SCAN = 200
MAX_CANDIDATES = 8
NEIGHBOURS_PER_CHUNK = 24
# Below this confidence an LLM contradiction is queued for a person even under the auto policy.
LOW_CONFIDENCE = 0.7
DISSENT_CHARS = 1000
CONTENT_HASH = "content_hash"

SYSTEM_DETECTOR = Actor.system("conflict detection")
SYSTEM_POLICY = Actor.system("conflict policy")


# -- candidates ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class Candidate:
    memory: Memory
    similarity: float


def _earlier(memory: Memory) -> Q:
    # Only memories stored before this one: each pair is judged once, by the later write.
    return Q(created_at__lt=memory.created_at) | (Q(created_at=memory.created_at) & Q(pk__lt=memory.pk))


def conflict_candidates(
    memory: Memory, *, threshold: float = SIMILARITY_THRESHOLD, limit: int = MAX_CANDIDATES
) -> list[Candidate]:
    """Near neighbours of `memory` (best chunk pair wins), most similar first, and content-hash twins."""
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET LOCAL hnsw.ef_search = 100")
        cursor.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
        cursor.execute(
            """
            SELECT near.memory_id, max(near.similarity) AS similarity
              FROM memories_memorychunk AS mine
              CROSS JOIN LATERAL (
                    SELECT c.memory_id, 1 - (c.embedding <=> mine.embedding) AS similarity
                      FROM memories_memorychunk AS c
                     WHERE c.organization_id = %s AND c.status = 'active' AND c.memory_id <> %s
                       AND c.embedding IS NOT NULL
                     ORDER BY c.embedding <=> mine.embedding
                     LIMIT %s
              ) AS near
             WHERE mine.memory_id = %s AND mine.embedding IS NOT NULL AND near.similarity > %s
             GROUP BY near.memory_id
             ORDER BY similarity DESC
             LIMIT %s
            """,
            [memory.organization_id, memory.pk, NEIGHBOURS_PER_CHUNK, memory.pk, threshold, limit * 3],
        )
        similar = {row[0]: float(row[1]) for row in cursor.fetchall()}
        related = _replacement_candidates(cursor, memory, threshold=min(threshold, REPLACED_SIMILARITY))
    twins = Memory.objects.filter(
        organization_id=memory.organization_id, content_hash=memory.content_hash, status=Memory.Status.ACTIVE
    )
    for twin_id in twins.exclude(pk=memory.pk).values_list("pk", flat=True):
        similar[twin_id] = 1.0
    ids = set(similar) | set(related)
    others = Memory.objects.filter(pk__in=list(ids), organization_id=memory.organization_id, status=Memory.Status.ACTIVE)
    others = others.filter(_earlier(memory)).select_related("scope", "author")
    nearest: list[Candidate] = []
    replacing: list[Candidate] = []
    for other in others:
        if other.pk in similar:
            nearest.append(Candidate(other, min(1.0, similar[other.pk])))
        elif _announces_replacement(memory, other):
            replacing.append(Candidate(other, related[other.pk]))
    nearest.sort(key=lambda c: (-c.similarity, str(c.memory.pk)))
    replacing.sort(key=lambda c: (-c.similarity, str(c.memory.pk)))
    # Explicit replacements are few and specific: they are judged even beyond the nearest `limit`.
    return nearest[:limit] + replacing[:limit]


# "moved", "switching", "migrated", "changes", "transitioned" … as full-text stems.
_CHANGE_VERBS = ("move", "switch", "migrate", "change", "transition")


def _replacement_candidates(cursor: Any, memory: Memory, *, threshold: float) -> dict[Any, float]:
    """Related memories (best chunk cosine > `threshold`) that may be one side of an explicit
    "moved from X to Y": those whose title or tags name an X this memory moved away from, and
    those that announce a change and mention this memory's title or tag words (when the older
    side is stored after the announcement, e.g. by an import). `_announces_replacement` checks
    the text; this only narrows the search, full text first (GIN) so few chunks are compared."""
    found: dict[Any, float] = {}
    text_match = "c.search_vector @@ plainto_tsquery('english', %s)"
    for old in sorted({change.old.lower() for change in replacements(memory.title, memory.content)}):
        in_title = f"{text_match} AND ts_filter(c.search_vector, '{{a}}') @@ plainto_tsquery('english', %s)"
        found.update(_related_matching(cursor, memory, in_title, [old, old], threshold))
    about = sorted(content_words(" ".join([memory.title, *(memory.tags or ())])))[:12]
    if about:
        named = " || ".join(["plainto_tsquery('english', %s)"] * len(about))
        changed = " || ".join(["plainto_tsquery('english', %s)"] * len(_CHANGE_VERBS))
        announcing = f"c.search_vector @@ (({named}) && ({changed}))"
        for other_id, similarity in _related_matching(cursor, memory, announcing, [*about, *_CHANGE_VERBS], threshold).items():
            found[other_id] = max(similarity, found.get(other_id, 0.0))
    return found


def _related_matching(cursor: Any, memory: Memory, condition: str, params: list[str], threshold: float) -> dict[Any, float]:
    """Other active memories with a chunk meeting `condition` (an SQL predicate on chunk `c`), with
    their best chunk cosine to `memory` when above `threshold`; the newest REPLACED_SCAN matching
    chunks are compared."""
    cursor.execute(
        f"""
        WITH matching AS MATERIALIZED (
            SELECT c.memory_id, c.embedding
              FROM memories_memorychunk AS c
             WHERE c.organization_id = %s AND c.status = 'active' AND c.memory_id <> %s AND c.embedding IS NOT NULL
               AND {condition}
             ORDER BY c.valid_from DESC
             LIMIT %s
        )
        SELECT matching.memory_id, max(1 - (matching.embedding <=> mine.embedding)) AS similarity
          FROM matching CROSS JOIN memories_memorychunk AS mine
         WHERE mine.memory_id = %s AND mine.embedding IS NOT NULL
         GROUP BY matching.memory_id
        HAVING max(1 - (matching.embedding <=> mine.embedding)) > %s
        """,  # noqa: S608 - fixed fragments; values are parameters
        [memory.organization_id, memory.pk, *params, REPLACED_SCAN, memory.pk, threshold],
    )
    return {row[0]: float(row[1]) for row in cursor.fetchall()}


def _announces_replacement(a: Memory, b: Memory) -> bool:
    """Whether one of the two says it moved away from what the other is about."""
    return replaced(_memo(a), _memo(b)) is not None or replaced(_memo(b), _memo(a)) is not None


# -- classification -----------------------------------------------------------------------------
def _memo(memory: Memory) -> Memo:
    return Memo(
        title=memory.title,
        content=memory.content,
        valid_from=memory.valid_from,
        valid_until=memory.valid_until,
        tags=tuple(memory.tags or ()),
        category=memory.category,
    )


def classify_pair(*, existing: Memory, new: Memory, similarity: float) -> Verdict:
    """The verdict for one candidate pair; see the module docstring for who decides."""
    if existing.content_hash == new.content_hash:
        return Verdict(
            "duplicate",
            1.0,
            f"Identical content (same content hash), stored from {existing.source} and from {new.source}.",
            classifier=CONTENT_HASH,
        )
    now = timezone.now()
    llm = get_llm()
    if llm is None:
        return classify(_memo(existing), _memo(new), similarity=similarity, now=now)
    try:
        return classify_with_llm(
            llm, _memo(existing), _memo(new), existing_source=existing.source, new_source=new.source, similarity=similarity
        )
    except (LLMUnavailable, LLMInvalidOutput) as exc:
        logger.warning("conflict classification by %s failed (%s); using the heuristic", getattr(llm, "label", llm), exc)
        fallback = classify(_memo(existing), _memo(new), similarity=similarity, now=now)
        reason = "did not answer usefully" if isinstance(exc, LLMInvalidOutput) else "was unavailable"
        note = f" (The LLM {getattr(llm, 'label', '')} {reason}; the heuristic decided.)"
        return Verdict(fallback.kind, fallback.confidence, fallback.explanation + note, fallback.outdated, fallback.classifier)


# -- detection ----------------------------------------------------------------------------------
def conflicts_detect(memory_id: Any) -> list[Conflict]:
    """Find, record and (per policy) resolve conflicts of a newly stored memory. Idempotent.

    Returns the conflicts recorded by this call (none on a re-run).
    """
    memory = (
        Memory.objects.filter(pk=memory_id, status=Memory.Status.ACTIVE).select_related("organization", "scope", "author").first()
    )
    if memory is None:
        return []
    recorded: list[Conflict] = []
    for candidate in conflict_candidates(memory):
        other = candidate.memory
        if _pair_recorded(memory, other):
            continue
        verdict = classify_pair(existing=other, new=memory, similarity=candidate.similarity)
        if verdict.kind is None:
            continue
        conflict = _record(memory, other, candidate.similarity, verdict)
        if conflict is None:
            continue
        recorded.append(conflict)
        _apply_policy(conflict, verdict)
        memory.refresh_from_db(fields=["status"])
        if memory.status != Memory.Status.ACTIVE:
            break  # the new memory lost; comparing it further would only repeat the verdict
    return recorded


def _pair_recorded(a: Memory, b: Memory) -> bool:
    return Conflict.objects.filter(Q(new_memory=a, existing_memory=b) | Q(new_memory=b, existing_memory=a)).exists()


def _record(memory: Memory, other: Memory, similarity: float, verdict: Verdict) -> Conflict | None:
    assert verdict.kind is not None  # callers record conflicts only
    try:
        with transaction.atomic():
            conflict = Conflict.objects.create(
                organization_id=memory.organization_id,
                new_memory=memory,
                existing_memory=other,
                kind=verdict.kind,
                similarity=round(similarity, 4),
                explanation=verdict.explanation,
                classifier=verdict.classifier,
                confidence=verdict.confidence,
            )
            record(
                "conflict.detect",
                organization=memory.organization_id,
                actor=SYSTEM_DETECTOR,
                target_type="conflict",
                target_id=conflict.pk,
                details={
                    "kind": conflict.kind,
                    "classifier": conflict.classifier,
                    "confidence": conflict.confidence,
                    "similarity": conflict.similarity,
                    "new_memory": str(memory.pk),
                    "existing_memory": str(other.pk),
                },
            )
    except IntegrityError:
        return None  # a concurrent run recorded this pair first
    conflict.new_memory, conflict.existing_memory = memory, other
    return conflict


# -- policy --------------------------------------------------------------------------------------
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


@dataclass(frozen=True)
class PolicyDecision:
    winner: Memory | None
    loser: Memory | None
    policy: str
    note: str


def policy_decision(conflict: Conflict, outdated: str | None) -> PolicyDecision:
    """Who wins under the auto policy, and why; `winner` None leaves the conflict for a person."""
    new, existing = conflict.new_memory, conflict.existing_memory
    if conflict.kind == Conflict.Kind.DUPLICATE:
        for winner, loser in ((existing, new), (new, existing)):
            if _reaches_as_far(winner, loser):
                return PolicyDecision(
                    winner,
                    loser,
                    Conflict.Policy.DUPLICATE,
                    f"Same information: kept the {'existing' if winner is existing else 'new'} memory.",
                )
        return PolicyDecision(
            None, None, Conflict.Policy.DUPLICATE, "Left for a person: the duplicates are read by different people."
        )
    if conflict.kind == Conflict.Kind.STALE:
        winner, loser = (new, existing) if outdated != "new" else (existing, new)
        decision = PolicyDecision(
            winner, loser, Conflict.Policy.STALE, f"Outdated: kept the {'new' if winner is new else 'existing'} memory."
        )
    else:
        if conflict.confidence is not None and conflict.confidence < LOW_CONFIDENCE:
            return PolicyDecision(
                None,
                None,
                Conflict.Policy.AUTHORITY,
                f"Left for a person: the classifier was unsure (confidence {conflict.confidence:.2f}).",
            )
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
    if not _reaches_as_far(decision.winner, decision.loser):
        return PolicyDecision(
            None,
            None,
            decision.policy,
            "Left for a person: the memory that would win is read by fewer people than the one it would replace.",
        )
    return decision


def _apply_policy(conflict: Conflict, verdict: Verdict) -> None:
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


# -- people ----------------------------------------------------------------------------------------
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
            if action == "reinstate":
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
            else:
                raise StateConflict(
                    f"“{memory.title}” is {memory.status} for another reason; it cannot be kept from here.",
                    error_code="MEMORY_NOT_ACTIVE",
                )
    if keep is not None and keep[1].status == Memory.Status.ACTIVE:
        # A loser that is already superseded or redacted stays as it is.
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
    if not principal.can_decide(conflict):  # conflict_for found it, so only the token can forbid it
        raise PermissionDenied("This token is read-only.", error_code="TOKEN_READ_ONLY")


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


def conflicts_scrub_memory(memory_id: Any) -> None:
    """A redacted memory's words must not survive in conflicts: drop its dissent and the quoting explanation."""
    Conflict.objects.filter(dissent__memory_id=str(memory_id)).update(dissent={"memory_id": str(memory_id), "redacted": True})
    Conflict.objects.filter(Q(new_memory_id=memory_id) | Q(existing_memory_id=memory_id)).update(
        explanation="[The explanation was removed because one of the memories was redacted.]"
    )

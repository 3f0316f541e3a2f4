"""Detection: classify each candidate pair (content hash, the LLM, or the heuristic), record it once,
and hand it to the organization's policy. Run on the worker after every write, acting as the system.
"""

from __future__ import annotations

import logging
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone

from audit.services import Actor, record
from memories.analysis.conflict_llm import classify_with_llm
from memories.analysis.conflicts import Verdict, classify
from memories.llm import LLMInvalidOutput, LLMUnavailable, get_llm
from memories.models import Conflict, Memory
from memories.services.conflicts.candidates import conflict_candidates, memo_of
from memories.services.conflicts.policy import apply_policy

logger = logging.getLogger(__name__)

CONTENT_HASH = "content_hash"

SYSTEM_DETECTOR = Actor.system("conflict detection")


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
        return classify(memo_of(existing), memo_of(new), similarity=similarity, now=now)
    try:
        return classify_with_llm(
            llm, memo_of(existing), memo_of(new), existing_source=existing.source, new_source=new.source, similarity=similarity
        )
    except (LLMUnavailable, LLMInvalidOutput) as exc:
        logger.warning("conflict classification by %s failed (%s); using the heuristic", getattr(llm, "label", llm), exc)
        fallback = classify(memo_of(existing), memo_of(new), similarity=similarity, now=now)
        reason = "did not answer usefully" if isinstance(exc, LLMInvalidOutput) else "was unavailable"
        note = f" (The LLM {getattr(llm, 'label', '')} {reason}; the heuristic decided.)"
        return Verdict(fallback.kind, fallback.confidence, fallback.explanation + note, fallback.outdated, fallback.classifier)


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
        apply_policy(conflict, verdict)
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

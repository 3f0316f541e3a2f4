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

Split by concept — `candidates`, `detection`, `policy`, `decisions` — and re-exported here, so
callers import from `memories.services.conflicts`.
"""

from memories.services.conflicts.candidates import (
    MAX_CANDIDATES,
    REPLACED_SIMILARITY,
    SIMILARITY_THRESHOLD,
    Candidate,
    conflict_candidates,
)
from memories.services.conflicts.decisions import RESOLUTIONS, conflict_reopen, conflict_resolve, conflicts_scrub_memory
from memories.services.conflicts.detection import CONTENT_HASH, SYSTEM_DETECTOR, classify_pair, conflicts_detect
from memories.services.conflicts.policy import (
    LOW_CONFIDENCE,
    SYSTEM_POLICY,
    PolicyDecision,
    conflict_policy_set,
    dissent_of,
    policy_decision,
)

__all__ = [
    "CONTENT_HASH",
    "LOW_CONFIDENCE",
    "MAX_CANDIDATES",
    "REPLACED_SIMILARITY",
    "RESOLUTIONS",
    "SIMILARITY_THRESHOLD",
    "SYSTEM_DETECTOR",
    "SYSTEM_POLICY",
    "Candidate",
    "PolicyDecision",
    "classify_pair",
    "conflict_candidates",
    "conflict_policy_set",
    "conflict_reopen",
    "conflict_resolve",
    "conflicts_detect",
    "conflicts_scrub_memory",
    "dissent_of",
    "policy_decision",
]

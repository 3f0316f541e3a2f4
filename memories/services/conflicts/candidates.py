"""Candidates for a conflict with a new memory: near neighbours by chunk cosine (pgvector, in SQL),
content-hash twins, and memories an explicit "moved from X to Y" replaces. Candidates, not conflicts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db import connection, transaction
from django.db.models import Q

from memories.analysis.conflicts import Memo, replaced, replacements
from memories.analysis.text import content_words
from memories.models import Memory

SIMILARITY_THRESHOLD = 0.75
# A memory that names what this one says it moved away from needs only to be related.
REPLACED_SIMILARITY = 0.4
REPLACED_SCAN = 200
MAX_CANDIDATES = 8
NEIGHBOURS_PER_CHUNK = 24


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
    return replaced(memo_of(a), memo_of(b)) is not None or replaced(memo_of(b), memo_of(a)) is not None


def memo_of(memory: Memory) -> Memo:
    return Memo(
        title=memory.title,
        content=memory.content,
        valid_from=memory.valid_from,
        valid_until=memory.valid_until,
        tags=tuple(memory.tags or ()),
        category=memory.category,
    )

"""What happened to my knowledge: my memories superseded or redacted by someone else, or in an open conflict.

Every item passes the read rule: my own memory must still be readable by me (a grant or clearance
I lost hides it), a replacement is named only when I can read it, and a conflict shows only when
I can read both of its memories — exactly as on the Conflicts page.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.db.models import Q

from memories.access import Principal
from memories.models import Conflict, Memory
from memories.selectors.conflicts import visible_conflicts
from memories.selectors.memories import readable_base


@dataclass(frozen=True)
class ActivityItem:
    kind: str  # superseded | redacted | conflict
    at: datetime
    memory: Memory
    url: str
    other: Memory | None = None  # the replacement, or the other side of a conflict (readable by me)
    by: str = ""
    note: str = ""
    conflict: Conflict | None = None


def activity_items(principal: Principal, *, limit: int = 50) -> list[ActivityItem]:
    """Newest first, at most `limit` of each kind before merging."""
    me = principal.user.pk
    mine = readable_base(principal).filter(author_id=me)
    items: list[ActivityItem] = []
    readable = readable_base(principal)

    superseded = (
        mine.filter(status=Memory.Status.SUPERSEDED, superseded_by__isnull=False)
        .exclude(superseded_by__author_id=me)
        .select_related("superseded_by__author")
        .order_by("-updated_at")[:limit]
    )
    replacement_ids = set(readable.filter(pk__in=[m.superseded_by_id for m in superseded]).values_list("pk", flat=True))
    for memory in superseded:
        replacement = memory.superseded_by if memory.superseded_by_id in replacement_ids else None
        items.append(
            ActivityItem(
                kind="superseded",
                at=replacement.created_at if replacement is not None else memory.updated_at,
                memory=memory,
                url=f"/memories/{memory.pk}/",
                other=replacement,
                by=replacement.author_display if replacement is not None else "",
            )
        )

    redacted = (
        mine.filter(status=Memory.Status.REDACTED, redacted_at__isnull=False)
        .filter(Q(redacted_by__isnull=True) | ~Q(redacted_by_id=me))
        .select_related("redacted_by")
        .order_by("-redacted_at")[:limit]
    )
    for memory in redacted:
        items.append(
            ActivityItem(
                kind="redacted",
                at=memory.redacted_at or memory.updated_at,
                memory=memory,
                url=f"/memories/{memory.pk}/",
                by=memory.redacted_by.display_name if memory.redacted_by else "",
                note=memory.redaction_reason,
            )
        )

    conflicts = (
        visible_conflicts(principal, status=Conflict.Status.OPEN)
        .filter(Q(new_memory__author_id=me) | Q(existing_memory__author_id=me))
        .select_related("new_memory", "existing_memory")
        .order_by("-created_at")[:limit]
    )
    for conflict in conflicts:
        own, other = (
            (conflict.new_memory, conflict.existing_memory)
            if conflict.new_memory.author_id == me
            else (conflict.existing_memory, conflict.new_memory)
        )
        items.append(
            ActivityItem(
                kind="conflict",
                at=conflict.created_at,
                memory=own,
                other=other,
                url=f"/conflicts/{conflict.pk}/",
                conflict=conflict,
            )
        )
    items.sort(key=lambda item: item.at, reverse=True)
    return items[:limit]


def unseen_count(principal: Principal) -> int:
    """How many activity items are newer than the last visit to the Activity page (the badge)."""
    seen = principal.membership.activity_seen_at
    return sum(1 for item in activity_items(principal, limit=20) if seen is None or item.at > seen)

"""What happened to my knowledge, and what waits for me.

- my memories superseded or redacted by someone else, or in an open conflict;
- a proposed revision I may accept, a redaction request I may decide;
- (admins) a connector in error, a redaction hold that expires within HOLD_NOTICE.

Every item passes the read rule: my own memory must still be readable by me (a grant or clearance
I lost hides it), a replacement is named only when I can read it, and a conflict, revision or
request shows only when I can read every memory it names — exactly as on their own pages.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db.models import Q
from django.utils import timezone

from connectors.selectors import connectors_for
from memories.access import Principal
from memories.models import Conflict, Memory, RedactionHold
from memories.selectors.conflicts import visible_conflicts
from memories.selectors.memories import readable_base
from memories.selectors.redactions import redaction_requests

# Admins hear of a redaction hold this long before it expires (after that the redaction is final).
HOLD_NOTICE = timedelta(days=2)


@dataclass(frozen=True)
class ActivityItem:
    kind: str  # superseded | redacted | conflict | revision | redaction_request | hold_expiring | connector_error
    at: datetime
    url: str
    memory: Memory | None = None  # None only for a connector in error
    other: Memory | None = None  # the replacement, the other side of a conflict, the proposed revision
    by: str = ""
    note: str = ""
    conflict: Conflict | None = None
    subject: str = ""  # what a connector item is about (the connector's name)


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
        .exclude(kind=Conflict.Kind.REVISION)
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
    items.extend(_waiting_for_me(principal, limit=limit))
    if principal.is_admin:
        items.extend(_for_admins(principal, limit=limit))
    items.sort(key=lambda item: item.at, reverse=True)
    return items[:limit]


def _waiting_for_me(principal: Principal, *, limit: int) -> list[ActivityItem]:
    """Proposed revisions I may accept and redaction requests I may decide (never my own)."""
    me = principal.user.pk
    items: list[ActivityItem] = []
    revisions = (
        visible_conflicts(principal, status=Conflict.Status.OPEN, kind=Conflict.Kind.REVISION)
        .exclude(new_memory__author_id=me)
        .select_related("new_memory", "existing_memory")[: limit * 2]
    )
    for conflict in revisions:
        if not principal.can_decide(conflict):
            continue
        items.append(
            ActivityItem(
                kind="revision",
                at=conflict.created_at,
                memory=conflict.existing_memory,
                other=conflict.new_memory,
                url=f"/conflicts/{conflict.pk}/",
                by=conflict.new_memory.author_display,
                conflict=conflict,
            )
        )
    for request in redaction_requests(principal, status="open")[: limit * 2]:
        if request.requested_by_id == me or not principal.can_redact(request.memory):
            continue
        items.append(
            ActivityItem(
                kind="redaction_request",
                at=request.created_at,
                memory=request.memory,
                url="/redaction-requests/",
                by=request.requested_by.display_name if request.requested_by else "",
                note=request.reason,
            )
        )
    return items[: limit * 2]


def _for_admins(principal: Principal, *, limit: int) -> list[ActivityItem]:
    """Connectors in error, and redaction holds that expire soon (after which nothing can be restored)."""
    items: list[ActivityItem] = []
    for connector in connectors_for(principal).filter(status="error").order_by("-updated_at")[:limit]:
        items.append(
            ActivityItem(
                kind="connector_error",
                at=connector.updated_at,
                url=f"/connectors/{connector.pk}/",
                subject=connector.name,
                note=connector.last_error,
            )
        )
    now = timezone.now()
    holds = (
        RedactionHold.objects.filter(
            organization_id=principal.organization_id, held_until__gt=now, held_until__lte=now + HOLD_NOTICE
        )
        .select_related("memory")
        .order_by("held_until")[:limit]
    )
    for hold in holds:
        if not principal.can_read_memory(hold.memory, history=True):
            continue
        items.append(
            ActivityItem(
                kind="hold_expiring",
                at=min(now, hold.held_until - HOLD_NOTICE),
                memory=hold.memory,
                url=f"/memories/{hold.memory_id}/",
                note=f"{hold.held_until:%Y-%m-%d %H:%M} UTC",
            )
        )
    return items


def unseen_count(principal: Principal) -> int:
    """How many activity items are newer than the last visit to the Activity page (the badge)."""
    seen = principal.membership.activity_seen_at
    return sum(1 for item in activity_items(principal, limit=20) if seen is None or item.at > seen)

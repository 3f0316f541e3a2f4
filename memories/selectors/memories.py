"""Reading memories on behalf of a principal. Nothing here returns a memory the read rule forbids.

`visible_memories` is the one queryset every list starts from; `memory_for_history` is the
one way to fetch a single memory by id (foreign, forbidden and missing all raise NotFound).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

from django.db.models import Q, QuerySet
from django.utils import timezone

from cortex_site.errors import Denial, NotFound, ValidationFailed
from memories.access import Operator, Principal, memory_denial, parse_id
from memories.models import Membership, Memory, Organization, RedactionHold, Scope

STATUS_FILTERS = {"active", "superseded", "redacted", "all"}


def readable_base(principal: Principal | Operator, *, proposals: bool = False) -> QuerySet[Memory]:
    """Organization, readable scopes and clearance — the part of the read rule every view shares.

    Proposed revisions are left out (they are read one by one, by their proposer and deciders,
    through `memory_for_history` with `proposals=True`; lists, exports and counts never hold them).
    """
    memories = Memory.objects.filter(
        organization_id=principal.organization_id,
        scope_id__in=principal.readable_scope_ids,
        clearance_rank__lte=principal.clearance_rank,
    )
    return memories if proposals else memories.exclude(status=Memory.Status.PROPOSED)


def current_q(as_of: datetime | None = None) -> Q:
    """Active and not expired (at `as_of`, or now)."""
    moment = as_of or timezone.now()
    q = Q(status=Memory.Status.ACTIVE) & (Q(valid_until__isnull=True) | Q(valid_until__gt=moment))
    if as_of is not None:
        q &= Q(valid_from__lte=as_of)
    return q


def visible_memories(principal: Principal, *, status: str = "active") -> QuerySet[Memory]:
    """Memories the principal may see in a list. `status` other than active is the history view."""
    if status not in STATUS_FILTERS:
        raise ValidationFailed(f"status must be one of {', '.join(sorted(STATUS_FILTERS))}.", error_code="INVALID_STATUS")
    base = readable_base(principal).select_related("scope", "author")
    if status == "active":
        return base.filter(current_q())
    if status == "all":
        return base
    return base.filter(status=status)


@dataclass(frozen=True)
class MemoryFilters:
    scope: str | None = None
    category: str | None = None
    source: str | None = None
    tag: str | None = None
    author: str | None = None
    status: str = "active"
    # Added on or after / on or before these days (the organization's time zone); the oldest first when asked.
    added_from: date | None = None
    added_to: date | None = None
    oldest_first: bool = False


def readable_scope_ids_named(principal: Principal, slugs: Sequence[str]) -> list[int]:
    """The ids of the scopes `slugs` names, in order; a scope the organization does not have and one
    the principal may not read are both 404 UNKNOWN_SCOPE (alike: no existence leak)."""
    readable = principal.readable_scope_ids
    found = dict(Scope.objects.filter(organization_id=principal.organization_id, slug__in=list(slugs)).values_list("slug", "id"))
    ids = []
    for slug in slugs:
        scope_id = found.get(slug)
        if scope_id is None or scope_id not in readable:
            raise NotFound(f"Unknown scope {slug!r}.", error_code="UNKNOWN_SCOPE", details={"scope": slug})
        ids.append(scope_id)
    return ids


def memory_list(principal: Principal, filters: MemoryFilters) -> QuerySet[Memory]:
    """Newest first (or oldest first); every filter narrows within what the principal may see (a scope
    it names must be one the principal may read: UNKNOWN_SCOPE otherwise, as in recall)."""
    memories = visible_memories(principal, status=filters.status)
    if filters.scope:
        memories = memories.filter(scope_id__in=readable_scope_ids_named(principal, [filters.scope]))
    if filters.category:
        memories = memories.filter(category=filters.category.lower())
    if filters.source:
        memories = memories.filter(source__iexact=filters.source)
    if filters.tag:
        memories = memories.filter(tags__contains=[filters.tag.lower()])
    if filters.author:
        author = filters.author.strip()
        author_id = parse_id(author)
        q = Q(author_name__iexact=author) | Q(author__email__iexact=author) | Q(author__name__iexact=author)
        if author_id is not None:
            q |= Q(author_id=author_id)
        memories = memories.filter(q)
    if filters.added_from:
        memories = memories.filter(created_at__date__gte=filters.added_from)
    if filters.added_to:
        memories = memories.filter(created_at__date__lte=filters.added_to)
    if filters.oldest_first:
        return memories.order_by("created_at", "id")
    return memories.order_by("-created_at", "-id")


def author_suggestions(principal: Principal, prefix: str = "", *, limit: int = 20) -> list[str]:
    """Names for the author filter: the organization's members, then the named authors of memories
    the principal may read (imports, connectors), whose name or e-mail contains `prefix`."""
    prefix = prefix.strip()[:100]
    members = Membership.objects.filter(organization_id=principal.organization_id).select_related("user")
    if prefix:
        members = members.filter(Q(user__name__icontains=prefix) | Q(user__email__icontains=prefix))
    names = [m.user.display_name for m in members.order_by("user__name", "user__email")[:limit]]
    if len(names) < limit:
        named = visible_memories(principal).exclude(author_name="")
        if prefix:
            named = named.filter(author_name__icontains=prefix)
        for name in named.order_by("author_name").values_list("author_name", flat=True).distinct()[: limit * 2]:
            if name not in names:
                names.append(name)
    return sorted(set(names[:limit]), key=str.lower)


def memory_for_history(principal: Principal, memory_id: Any, *, for_update: bool = False) -> Memory:
    """One memory the principal may see, whatever its status (detail and lifecycle actions)."""
    parsed = parse_id(memory_id)
    if parsed is None:
        raise NotFound("Memory not found.")
    memories = readable_base(principal, proposals=True).select_related("scope", "author", "redacted_by")
    if for_update:
        memories = memories.select_for_update(of=("self",))
    memory = memories.filter(pk=parsed).first()
    if memory is None or not principal.can_read_memory(memory, history=True):
        raise NotFound("Memory not found.", denial=hidden_memory_denial(principal, parsed))
    return memory


def hidden_memory_denial(principal: Principal | Operator, memory_id: Any) -> Denial | None:
    """Why a memory id the principal may not open was refused, if the memory exists (for the owner's
    audit log; the caller's 404 is the same either way). Looked up across organizations on purpose:
    a probe of another organization's memory is recorded there."""
    memory = Memory.objects.filter(pk=memory_id).select_related("supersedes").first()
    return memory_denial(principal, memory) if memory is not None else None


def supersession_chain(principal: Principal, memory: Memory, *, limit: int = 50) -> list[Memory]:
    """The versions of a memory, oldest first, as far as the principal may see them.

    Walks `supersedes` back and `superseded_by` forward; a version the principal cannot read
    ends the walk in that direction (it is not shown, and nothing beyond it is either).
    """
    chain = [memory]
    seen = {memory.pk}
    cursor = memory
    while cursor.supersedes_id and len(chain) < limit and cursor.supersedes_id not in seen:
        older = readable_base(principal).select_related("scope").filter(pk=cursor.supersedes_id).first()
        if older is None:
            break
        chain.insert(0, older)
        seen.add(older.pk)
        cursor = older
    cursor = memory
    while cursor.superseded_by_id and len(chain) < limit and cursor.superseded_by_id not in seen:
        newer = readable_base(principal).select_related("scope").filter(pk=cursor.superseded_by_id).first()
        if newer is None:
            break
        chain.append(newer)
        seen.add(newer.pk)
        cursor = newer
    return chain


def memory_timeline(
    principal: Principal, *, since: datetime | None = None, until: datetime | None = None, scope: str | None = None
) -> QuerySet[Memory]:
    """Memories the principal may read, in the order they became true (valid_from), oldest first."""
    memories = visible_memories(principal).select_related("scope", "author")
    if scope:
        memories = memories.filter(scope_id__in=readable_scope_ids_named(principal, [scope]))
    if since is not None:
        memories = memories.filter(valid_from__gte=since)
    if until is not None:
        memories = memories.filter(valid_from__lt=until)
    return memories.order_by("valid_from", "id")


def organization_holding(principal: Principal, memory_id: Any) -> Organization | None:
    """Another of the person's organizations in which they may read this memory, or None.

    For a link opened while another organization is active: the page can offer to switch. The
    memory is looked up as the person's Principal in each of their other organizations, so the
    same read rule applies as after switching, and nothing is said about a memory they could not
    open there (missing, foreign and forbidden stay one 404).
    """
    others = (
        Membership.objects.filter(user_id=principal.user.pk, deactivated_at=None)
        .exclude(organization_id=principal.organization_id)
        .select_related("organization", "user")
        .order_by("organization__name")
    )
    for membership in others:
        try:
            memory_for_history(Principal(membership), memory_id)
        except NotFound:
            continue
        return membership.organization
    return None


def redaction_held_until(memory: Memory) -> datetime | None:
    """Until when a redacted memory can still be restored (its hold), or None when the redaction is final."""
    return (
        RedactionHold.objects.filter(memory_id=memory.pk, held_until__gt=timezone.now())
        .values_list("held_until", flat=True)
        .first()
    )

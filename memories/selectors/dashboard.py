"""Reads behind the dashboard and the memory filters: counts and facets of what a principal may see.

Every function starts from `visible_memories` / `readable_base`, so a number on the dashboard
never counts a memory the reader could not open (other organizations, unreadable scopes,
higher clearance; inactive and expired memories are not "in" Cortex for counting purposes).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.apps import apps
from django.db.models import Count, QuerySet
from django.db.models.functions import TruncWeek
from django.utils import timezone

from memories.access import Principal
from memories.models import Memory
from memories.selectors.memories import readable_base, visible_memories


@dataclass(frozen=True)
class Tally:
    key: str
    count: int


def counts_by_scope(principal: Principal) -> list[Tally]:
    """Active memories per readable scope, largest first (scopes without memories are left out)."""
    rows = visible_memories(principal).values("scope__slug").annotate(n=Count("id")).order_by("-n", "scope__slug")
    return [Tally(row["scope__slug"], row["n"]) for row in rows]


def counts_by_source(principal: Principal) -> list[Tally]:
    """Active memories per source, largest first."""
    rows = visible_memories(principal).values("source").annotate(n=Count("id")).order_by("-n", "source")
    return [Tally(row["source"], row["n"]) for row in rows]


@dataclass(frozen=True)
class WeeklyCounts:
    """Memories added per week (by created_at), split by source. `weeks` are Mondays, oldest first."""

    weeks: list[datetime]
    sources: list[str]
    counts: dict[tuple[datetime, str], int]

    def total(self, week: datetime) -> int:
        return sum(self.counts.get((week, source), 0) for source in self.sources)


def weekly_additions(principal: Principal, *, weeks: int = 8, now: datetime | None = None) -> WeeklyCounts:
    """Active memories added in each of the last `weeks` weeks, per source (sources ordered by volume)."""
    now = now or timezone.now()
    today = timezone.localtime(now)
    this_monday = (today - timedelta(days=today.weekday())).replace(hour=0, minute=0, second=0, microsecond=0)
    mondays = [this_monday - timedelta(weeks=back) for back in range(weeks - 1, -1, -1)]
    rows = (
        visible_memories(principal)
        .filter(created_at__gte=mondays[0])
        .annotate(week=TruncWeek("created_at"))
        .values("week", "source")
        .annotate(n=Count("id"))
    )
    counts: dict[tuple[datetime, str], int] = {}
    volume: dict[str, int] = {}
    for row in rows:
        week = timezone.localtime(row["week"]).replace(hour=0, minute=0, second=0, microsecond=0)
        counts[(week, row["source"])] = counts.get((week, row["source"]), 0) + row["n"]
        volume[row["source"]] = volume.get(row["source"], 0) + row["n"]
    sources = sorted(volume, key=lambda s: (-volume[s], s.lower()))
    return WeeklyCounts(weeks=mondays, sources=sources, counts=counts)


def recent_memories(principal: Principal, *, limit: int = 6) -> QuerySet[Memory]:
    return visible_memories(principal).order_by("-created_at", "-id")[:limit]


def visible_total(principal: Principal) -> int:
    return visible_memories(principal).count()


def added_since(principal: Principal, since: datetime) -> int:
    return visible_memories(principal).filter(created_at__gte=since).count()


@dataclass(frozen=True)
class Facets:
    """Values the filters offer: only what occurs among memories the principal can read."""

    categories: list[str]
    sources: list[str]
    tags: list[str]


def memory_facets(principal: Principal, *, tag_limit: int = 50) -> Facets:
    base = readable_base(principal)
    categories = sorted(set(base.values_list("category", flat=True).distinct()))
    sources = sorted(set(base.values_list("source", flat=True).distinct()), key=str.lower)
    tag_rows = visible_memories(principal).values_list("tags", flat=True)[:2000]
    tally: dict[str, int] = {}
    for tags in tag_rows:
        for tag in tags:
            tally[tag] = tally.get(tag, 0) + 1
    tags = sorted(tally, key=lambda t: (-tally[t], t))[:tag_limit]
    return Facets(categories=categories, sources=sources, tags=sorted(tags))


def connector_health(principal: Principal) -> list[dict[str, Any]] | None:
    """The organization's connectors and how their syncs are going; None while connectors do not exist.

    Connector names and states are organization metadata, not memory content, so every member
    sees them (the connectors page decides who may change them).
    """
    label = "connectors.Connector"  # a string the type checker cannot resolve: the model may not exist yet
    try:
        connector_model = apps.get_model(label)
    except LookupError:
        return None
    connectors = connector_model.objects.filter(organization_id=principal.organization_id).order_by("name")
    return [
        {
            "id": connector.pk,
            "name": getattr(connector, "name", str(connector)),
            "kind": getattr(connector, "kind", ""),
            "status": getattr(connector, "status", ""),
            "last_synced_at": getattr(connector, "last_synced_at", None),
            "last_error": getattr(connector, "last_error", ""),
        }
        for connector in connectors
    ]

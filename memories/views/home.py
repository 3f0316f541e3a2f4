"""The landing page: what the team remembers, as far as I may see it."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone
from django.views.decorators.http import require_GET

from connectors.selectors import connectors_for
from memories.access import Principal
from memories.selectors import dashboard
from memories.selectors.conflicts import visible_conflicts
from memories.templatetags.cortex_ui import source_name
from memories.views.common import memory_rows, principal_view


def weekly_chart(principal: Principal) -> dict[str, Any]:
    """The "added per week by source" chart, as stacked columns with heights in percent of the tallest."""
    weekly = dashboard.weekly_additions(principal)
    peak = max((weekly.total(week) for week in weekly.weeks), default=0) or 1
    columns = []
    for week in weekly.weeks:
        counts = [(source, weekly.counts.get((week, source), 0)) for source in weekly.sources]
        segments = [
            {"source": source, "name": source_name(source), "count": n, "pct": round(n / peak * 100, 1)}
            for source, n in counts
            if n
        ]
        columns.append({"week": week, "total": weekly.total(week), "segments": segments})
    return {"columns": columns, "sources": [(s, source_name(s)) for s in weekly.sources], "empty": not weekly.counts}


@principal_view
@require_GET
def home(request: HttpRequest, principal: Principal) -> HttpResponse:
    total = dashboard.visible_total(principal)
    by_scope = dashboard.counts_by_scope(principal)
    by_source = dashboard.counts_by_source(principal)
    context = {
        "total": total,
        "added_this_week": dashboard.added_since(principal, timezone.now() - timedelta(days=7)),
        "by_scope": by_scope,
        "by_source": by_source,
        "scope_peak": max((t.count for t in by_scope), default=1),
        "source_peak": max((t.count for t in by_source), default=1),
        "chart": weekly_chart(principal),
        "recent": memory_rows(principal, dashboard.recent_memories(principal)),
        "open_conflicts": visible_conflicts(principal, status="open").count(),
        "connectors": list(connectors_for(principal)),
        "scopes": principal.readable_scopes(),
        "writable": principal.writable_scope_ids,
    }
    return render(request, "dashboard/home.html", context)

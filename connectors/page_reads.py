"""Batch reads for the Connectors page, so the list costs the same few queries for 1 or 50 connectors.

Same rule as connectors/selectors.py: everything is filtered by the Principal's organization, so
another organization's runs can never appear, whatever ids are passed in.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from django.db.models import F, Window
from django.db.models.functions import RowNumber

from connectors.models import SyncRun
from memories.access import Principal


def recent_runs(principal: Principal, connector_ids: Iterable[Any], *, per_connector: int = 5) -> dict[Any, list[SyncRun]]:
    """The latest `per_connector` runs of each connector (newest first), in one query."""
    ids = list(connector_ids)
    if not ids:
        return {}
    ranked = (
        SyncRun.objects.filter(organization_id=principal.organization_id, connector_id__in=ids)
        .annotate(rank=Window(RowNumber(), partition_by=[F("connector_id")], order_by=[F("created_at").desc(), F("id").desc()]))
        .filter(rank__lte=per_connector)  # Django 4.2+ filters on a window function in an outer query
        .order_by("connector_id", "-created_at", "-id")
    )
    runs: dict[Any, list[SyncRun]] = defaultdict(list)
    for run in ranked:
        runs[run.connector_id].append(run)
    return runs

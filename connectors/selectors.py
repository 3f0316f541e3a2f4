"""Reads of connectors, always through a Principal: another organization's connector is not found.

Any member may read a connector's status (name, kind, health, runs); configuring it is for
admins (services/connectors.py). Credentials never leave these functions' results' owners:
serializers read only the fields they name.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db.models import QuerySet
from django.urls import reverse
from django.utils import timezone

from connectors.models import Checkpoint, Connector, Delivery, SyncRun
from cortex_site.errors import NotFound
from memories.access import Principal, hidden

NOT_FOUND_MESSAGE = "No such connector."


def _as_uuid(value: Any) -> uuid.UUID | None:
    if isinstance(value, uuid.UUID):
        return value
    try:
        return uuid.UUID(str(value))
    except (TypeError, ValueError):
        return None


def connectors_for(principal: Principal) -> QuerySet[Connector]:
    return Connector.objects.filter(organization_id=principal.organization_id).select_related("scope").order_by("name", "id")


def access_connector(principal: Principal, connector_id: Any, *, for_update: bool = False) -> Connector:
    """The principal's organization's connector, or NotFound (foreign and missing look the same)."""
    pk = _as_uuid(connector_id)
    if pk is None:
        raise NotFound(NOT_FOUND_MESSAGE)
    queryset = Connector.objects.filter(organization_id=principal.organization_id, pk=pk).select_related("scope", "installed_by")
    if for_update:
        queryset = queryset.select_for_update(of=("self",))
    connector = queryset.first()
    if connector is None:
        foreign = Connector.objects.filter(pk=pk).only("id", "organization_id").first()
        raise NotFound(NOT_FOUND_MESSAGE, denial=hidden(principal, "connector", foreign, None))
    return connector


def sees_item_details(principal: Principal, connector: Connector) -> bool:
    """Whether the principal may see which items a connector's runs could not read, and why: an item's
    id and reason can name what the memories it writes hold (a file name, a repository, a channel).
    Admins, and members who may read what it writes (its scope, at its clearance); a connector whose
    items go to scopes by rule shows them to admins only. Everyone else sees the counts."""
    if principal.is_admin:
        return True
    return (
        connector.scope_id is not None
        and connector.scope_id in principal.readable_scope_ids
        and connector.clearance_rank <= principal.clearance_rank
    )


def runs_for(principal: Principal, connector_id: Any, *, limit: int = 50) -> list[SyncRun]:
    return list(run_history(principal, connector_id)[: max(1, min(limit, 200))])


def run_history(principal: Principal, connector_id: Any) -> QuerySet[SyncRun]:
    """Every run of a connector the principal may see, newest first (for cursor pages)."""
    connector = access_connector(principal, connector_id)
    return SyncRun.objects.filter(connector=connector).order_by("-created_at", "-id")


def run_for(principal: Principal, run_id: Any) -> SyncRun:
    pk = _as_uuid(run_id)
    run = None if pk is None else SyncRun.objects.filter(pk=pk).first()
    if run is None or run.organization_id != principal.organization_id:
        raise NotFound("No such run.", denial=hidden(principal, "sync_run", run, None))
    return run


def deliveries_for(principal: Principal, connector_id: Any, *, limit: int = 50) -> list[Delivery]:
    connector = access_connector(principal, connector_id)
    return list(Delivery.objects.filter(connector=connector).order_by("-received_at").defer("payload")[: max(1, min(limit, 200))])


def lease() -> timedelta:
    """How long a running run may go without a heartbeat before it counts as dead."""
    return timedelta(seconds=settings.CORTEX_CONNECTOR_LEASE_SECONDS)


def open_run(connector: Connector) -> SyncRun | None:
    """The queued or running run of this connector whose lease has not expired, if any."""
    cutoff = timezone.now() - lease()
    for run in SyncRun.objects.filter(connector=connector, status__in=[SyncRun.Status.QUEUED, SyncRun.Status.RUNNING]).order_by(
        "-created_at"
    ):
        alive_at = run.heartbeat_at or run.created_at
        if alive_at >= cutoff:
            return run
    return None


def cursor_of(connector: Connector) -> dict[str, Any]:
    """Every stream's saved cursor, as handed to the source's fetch_page."""
    return dict(Checkpoint.objects.filter(connector=connector).values_list("stream", "cursor"))


def webhook_url(connector: Connector) -> str:
    return settings.CORTEX_BASE_URL + reverse("connectors-webhook", kwargs={"kind": connector.kind, "connector_id": connector.pk})


@dataclass(frozen=True)
class Health:
    status: str
    last_error: str
    last_synced_at: datetime | None
    next_sync_at: datetime | None
    running_run_id: str | None
    progress_done: int | None
    progress_total: int | None
    eta_seconds: int | None
    last_run_status: str | None


def connector_health(connector: Connector) -> Health:
    """What a card or a status answer shows: status, the open run's progress and an estimate of what remains."""
    running = open_run(connector)
    last = SyncRun.objects.filter(connector=connector).exclude(status=SyncRun.Status.SKIPPED).order_by("-created_at").first()
    eta: int | None = None
    if running is not None and running.progress_total is not None and running.started_at and running.progress_done:
        elapsed = (timezone.now() - running.started_at).total_seconds()
        remaining = max(0, running.progress_total - running.progress_done)
        eta = int(elapsed / running.progress_done * remaining)
    return Health(
        status=connector.status,
        last_error=connector.last_error,
        last_synced_at=connector.last_synced_at,
        next_sync_at=connector.next_sync_at,
        running_run_id=str(running.pk) if running else None,
        progress_done=running.progress_done if running else None,
        progress_total=running.progress_total if running else None,
        eta_seconds=eta,
        last_run_status=last.status if last else None,
    )

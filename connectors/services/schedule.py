"""The schedule: which connectors are due a run, dead runs taken over, and what the card says about it.

`dispatch_due()` is run every minute by Celery beat (`connectors.dispatch_due`) and, where beat
cannot run, once per `POST /api/cron/connectors`. It is safe to run concurrently with itself and
with Sync now: each connector is claimed with a row lock (`SKIP LOCKED`, so two dispatchers never
wait on each other and never both start a run), and a connector with an open run whose lease is
live gets no second one. A run whose heartbeat is older than the lease died with its worker: it is
marked failed, and the next run starts from the last committed checkpoint — the checkpoint is saved
in the same transaction as the page of memories it covers, so nothing is lost or doubled.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from uuid import UUID

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from audit.models import AuditEvent
from audit.services import Actor, record
from connectors.models import Connector, SyncRun
from connectors.registry import source_class, source_for
from connectors.selectors import lease
from connectors.services import sync

logger = logging.getLogger(__name__)

OPEN = (SyncRun.Status.QUEUED, SyncRun.Status.RUNNING)


@dataclass
class DispatchReport:
    """What one dispatch did, for the cron endpoint's answer, the audit log and the tests."""

    started: list[UUID] = field(default_factory=list)  # run ids
    busy: list[UUID] = field(default_factory=list)  # connector ids with a live run (nothing started)
    reaped: list[UUID] = field(default_factory=list)  # dead run ids marked failed

    def as_dict(self) -> dict[str, list[str]]:
        return {
            "started": [str(i) for i in self.started],
            "busy": [str(i) for i in self.busy],
            "reaped": [str(i) for i in self.reaped],
        }


def effective_cap(connector: Connector) -> int | None:
    """Items per run: the connector's own cap, else its kind's default (None: no cap)."""
    return connector.per_run_cap if connector.per_run_cap is not None else source_class(connector.kind).default_cap


def effective_first_run_days(connector: Connector) -> int | None:
    if connector.first_run_days is not None:
        return connector.first_run_days
    return source_class(connector.kind).default_first_run_days


def is_scheduled(connector: Connector) -> bool:
    """Whether this connector (with its config) is synced by scheduled runs (webhook-only ones are not)."""
    return source_for(connector).uses_pull()


def lease_expired(run: SyncRun, now: datetime) -> bool:
    """An open run is dead when its last sign of life (heartbeat, else creation) is older than the lease.

    A running run beats its heartbeat at least once per page, and a page is bounded (page size,
    SDK timeouts), so a heartbeat this old means the worker is gone (killed, deployed over, lost).
    """
    return (run.heartbeat_at or run.created_at) < now - lease()


def reap_dead_runs(*, now: datetime | None = None, organization_id: int | None = None) -> list[UUID]:
    """Mark every open run whose lease expired as failed; returns their ids.

    Claim-a-row: the update only applies while the run is still open with the heartbeat we saw,
    so a worker that comes back to life and beats in the meantime keeps its run.
    """
    now = now or timezone.now()
    cutoff = now - lease()
    stale = SyncRun.objects.filter(status__in=OPEN).filter(
        Q(heartbeat_at__lt=cutoff) | Q(heartbeat_at__isnull=True, created_at__lt=cutoff)
    )
    if organization_id is not None:
        stale = stale.filter(organization_id=organization_id)
    reaped: list[UUID] = []
    for run in stale.select_related("connector"):
        minutes = max(1, round(lease().total_seconds() / 60))
        message = (
            f"The worker running this sync stopped (no sign of life for over {minutes} minutes); "
            "the next run continues from the last saved checkpoint."
        )
        claimed = SyncRun.objects.filter(pk=run.pk, status=run.status, heartbeat_at=run.heartbeat_at).update(
            status=SyncRun.Status.FAILED, finished_at=now, error=message
        )
        if claimed != 1:
            continue
        reaped.append(run.pk)
        record(
            "connector.sync_finish",
            organization=run.organization_id,
            actor=Actor.system("connector scheduler"),
            target_type="connector",
            target_id=str(run.connector_id),
            outcome=AuditEvent.Outcome.ERROR,
            details={"run_id": str(run.pk), "status": SyncRun.Status.FAILED, "reason": "lease_expired"},
        )
    return reaped


def due_connectors(*, now: datetime, organization_id: int | None = None) -> list[Connector]:
    """Active connectors whose next run time has come (or that never ran), oldest due first."""
    due = Connector.objects.filter(status=Connector.Status.ACTIVE).filter(Q(next_sync_at__isnull=True) | Q(next_sync_at__lte=now))
    if organization_id is not None:
        due = due.filter(organization_id=organization_id)
    return [c for c in due.order_by("next_sync_at", "created_at") if is_scheduled(c)]


def dispatch_due(*, now: datetime | None = None, organization_id: int | None = None) -> DispatchReport:
    """Start a run for every due connector (of one organization, or all), after taking over dead runs.

    Guarantees: never two open runs with live leases for one connector; a connector busy with a
    live run gets a skipped run (the audit log says why) and is tried again on its next slot; each
    started run is enqueued on commit.
    """
    now = now or timezone.now()
    report = DispatchReport(reaped=reap_dead_runs(now=now, organization_id=organization_id))
    for candidate in due_connectors(now=now, organization_id=organization_id):
        with transaction.atomic():
            connector = (
                Connector.objects.select_for_update(skip_locked=True)
                .filter(pk=candidate.pk, status=Connector.Status.ACTIVE)
                .filter(Q(next_sync_at__isnull=True) | Q(next_sync_at__lte=now))
                .first()
            )
            if connector is None:
                continue  # another dispatcher (or a Sync now) holds it, or it is no longer due
            # The next slot is booked before anything else, so a busy connector is not retried every minute.
            Connector.objects.filter(pk=connector.pk).update(next_sync_at=now + timedelta(minutes=connector.interval_minutes))
            # sync_start checks for a live run under the same row lock: a busy connector gets a skipped
            # run saying which run is still going (one per slot), never a second open one.
            result = sync.sync_start(connector=connector, trigger=SyncRun.Trigger.SCHEDULE, backfill=connector.backfill_next_run)
            if result.skipped:
                report.busy.append(connector.pk)
            else:
                report.started.append(result.run.pk)
    if report.started or report.reaped:
        logger.info("dispatched %d run(s), reaped %d dead run(s)", len(report.started), len(report.reaped))
    return report

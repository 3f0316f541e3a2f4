"""Celery tasks of the connectors app (queue `connectors`): thin wrappers over services, taking ids.

`sync_page` runs one bounded page and enqueues the next, so a long sync is many short tasks
(a slow source never holds a worker for long, and other connectors' pages interleave).
A task delivered twice does nothing the second time (see services/sync.py).
"""

from __future__ import annotations

from typing import Any

from celery import shared_task
from django.db import InterfaceError, OperationalError

from connectors.services.deliveries import delivery_give_up, delivery_process
from connectors.services.sync import _enqueue_page, sync_give_up, sync_run_page

# Passing trouble with our own services (the database connection dropped): retried by Celery.
INFRA = (OperationalError, InterfaceError)
INFRA_RETRIES = 5


@shared_task(bind=True, name="connectors.sync_page", acks_late=True, soft_time_limit=240, time_limit=300, max_retries=None)
def sync_page(self: Any, run_id: str, page: int = 0, attempt: int = 0) -> str:
    try:
        outcome = sync_run_page(run_id=run_id, page=page, attempt=attempt)
    except INFRA as exc:
        if self.request.retries >= INFRA_RETRIES:
            sync_give_up(run_id=run_id, message="The database was unreachable; the next run resumes from the checkpoint.")
            return "failed"
        raise self.retry(exc=exc, countdown=min(120, 5 * 2**self.request.retries)) from exc
    if outcome.retry_after is not None:
        # Same page again later (Retry-After / backoff); a fresh task, so the attempt count travels in args.
        sync_page.apply_async(args=(run_id, page, attempt + 1), countdown=outcome.retry_after)
        return "retry"
    if outcome.next_page is not None:
        _enqueue_page(run_id, outcome.next_page)
        return "next"
    return "done"


# No result: nobody waits for one (the Delivery row says what happened). With a result backend,
# every enqueue would also subscribe the web process to the task's result channel — a Redis round
# trip inside each webhook answer and a subscription left open per delivery.
@shared_task(
    bind=True, name="connectors.process_delivery", acks_late=True, soft_time_limit=120, time_limit=150, ignore_result=True
)
def process_delivery(self: Any, delivery_id: str, attempt: int = 0) -> str:
    try:
        outcome = delivery_process(delivery_id=delivery_id, attempt=attempt)
    except INFRA as exc:
        if self.request.retries >= INFRA_RETRIES:
            delivery_give_up(delivery_id=delivery_id, message="The database was unreachable.")
            return "failed"
        raise self.retry(exc=exc, countdown=min(120, 5 * 2**self.request.retries)) from exc
    if outcome.retry_after is not None:
        process_delivery.apply_async(args=(delivery_id, attempt + 1), countdown=outcome.retry_after)
        return "retry"
    return "done"


@shared_task(name="connectors.record_delivery_events", acks_late=True, ignore_result=True, soft_time_limit=50, time_limit=58)
def record_delivery_events() -> int:
    """On commit of an ignored delivery: append the audit events of the deliveries that wait for
    one (a burst of answers enqueues one task and shares its batch); a full batch is followed by
    another task for the rest."""
    from django.conf import settings

    from connectors.services.deliveries import delivery_record_events, events_pending_clear

    events_pending_clear()
    recorded = delivery_record_events(
        batch_size=settings.CORTEX_DELIVERY_SWEEP_BATCH, grace_seconds=settings.CORTEX_DELIVERY_GRACE_SECONDS
    )
    if recorded >= settings.CORTEX_DELIVERY_SWEEP_BATCH:
        record_delivery_events.delay()
    return recorded


@shared_task(name="connectors.sweep_deliveries", acks_late=True, ignore_result=True, soft_time_limit=50, time_limit=58)
def sweep_deliveries() -> dict[str, int]:
    """Beat: record the audit events still missing (ignored deliveries whose on-commit step never
    ran, accepted ones whose task was lost), then enqueue the deliveries whose on-commit enqueue
    never reached the broker (Redis was down when they were answered); bounded per run, so a long
    outage drains over a few runs."""
    from django.conf import settings

    from connectors.services.deliveries import delivery_record_events, delivery_sweep

    batch, grace = settings.CORTEX_DELIVERY_SWEEP_BATCH, settings.CORTEX_DELIVERY_GRACE_SECONDS
    recorded = delivery_record_events(batch_size=batch, grace_seconds=grace)
    return {"recorded": recorded, "enqueued": len(delivery_sweep(batch_size=batch, grace_seconds=grace))}


@shared_task(name="connectors.dispatch_due", acks_late=True, soft_time_limit=50, time_limit=58)
def dispatch_due() -> dict[str, list[str]]:
    from connectors.services.schedule import dispatch_due as dispatch

    return dispatch().as_dict()

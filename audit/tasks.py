"""Periodic audit work: signing each chain's head, and retention in bounded batches."""

from __future__ import annotations

import logging

from celery import shared_task
from django.conf import settings

from audit import services

logger = logging.getLogger("cortex.audit")


@shared_task(name="audit.checkpoint_all")
def checkpoint_all() -> dict[str, int]:
    """Sign the head of every chain (incremental: only what was appended since the last checkpoint is verified)."""
    from memories.models import Organization

    broken = 0
    chains: list[int | None] = [*Organization.objects.order_by("pk").values_list("pk", flat=True), None]
    for organization_id in chains:
        report = services.checkpoint(organization_id)
        if not report.ok:
            broken += 1
            logger.error("audit chain of org %s is broken at event %s: %s", organization_id, report.first_broken, report.reason)
    return {"chains": len(chains), "broken": broken}


@shared_task(name="audit.enforce_retention")
def enforce_retention() -> dict[str, int]:
    """One bounded batch per organization; enqueues itself again while any organization has more to remove.

    Idempotent: a second run finds nothing older than the cut-off and removes nothing.
    """
    from memories.models import Organization

    removed = 0
    more = False
    for organization in Organization.objects.order_by("pk"):
        result = services.enforce_retention(organization, batch_size=settings.CORTEX_AUDIT_RETENTION_BATCH)
        removed += result.removed
        more = more or result.more
    if more:
        enforce_retention.apply_async(countdown=1)
    return {"removed": removed, "more": int(more)}

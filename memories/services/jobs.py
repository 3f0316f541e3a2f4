"""Jobs: create (enqueued on commit), claim, report progress, finish, and forget.

A job row is claimed with a conditional update (queued → running), so a task delivered twice
runs its work once; a job left `running` by a worker that died is claimable again after
STALE_AFTER (the task's hard time limit plus a margin), up to MAX_ATTEMPTS.

A job's payload is what the person sent (a whole meeting transcript, say) and its result
quotes it. Neither is a memory — nothing audits, scopes or redacts it — so finished jobs are
deleted after CORTEX_JOB_RETENTION_HOURS (`jobs_purge_finished`, run hourly by beat in bounded
batches).

Handlers are registered by `MemoriesConfig.ready()` (`register_handler`), so every process
that runs jobs knows them without importing a module for its side effect.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone

from cortex_site.errors import CortexError
from memories.access import Principal
from memories.models import Job
from memories.retry import RetryableJobError
from memories.tasks import run_job

logger = logging.getLogger(__name__)

STALE_AFTER = timedelta(minutes=5)
MAX_ATTEMPTS = 3

JobHandler = Callable[[Job], dict[str, Any]]
HANDLERS: dict[str, JobHandler] = {}


def register_handler(kind: str, handler: JobHandler) -> None:
    """Say which function runs jobs of `kind` (called from AppConfig.ready())."""
    HANDLERS[kind] = handler


def job_create(*, principal: Principal, kind: str, payload: dict[str, Any]) -> Job:
    """Store a queued job for the principal and enqueue it once the transaction commits."""
    job = Job.objects.create(
        organization_id=principal.organization_id, created_by=principal.user, kind=kind, payload=payload, progress=0
    )
    transaction.on_commit(lambda: _enqueue(job.pk))
    return job


def _enqueue(job_id: Any) -> None:
    run_job.delay(str(job_id))


def job_claim(job_id: Any) -> Job | None:
    """queued (or abandoned running) → running; None when another run has it or it is finished."""
    now = timezone.now()
    claimable = Q(status=Job.Status.QUEUED) | Q(status=Job.Status.RUNNING, started_at__lt=now - STALE_AFTER)
    claimed = Job.objects.filter(claimable, pk=job_id, attempts__lt=MAX_ATTEMPTS).update(
        status=Job.Status.RUNNING, started_at=now, attempts=F("attempts") + 1
    )
    if claimed != 1:
        Job.objects.filter(
            pk=job_id, status=Job.Status.RUNNING, started_at__lt=now - STALE_AFTER, attempts__gte=MAX_ATTEMPTS
        ).update(
            status=Job.Status.FAILED,
            error={"code": "JOB_ABANDONED", "message": "The job was interrupted too many times."},
            finished_at=now,
        )
        return None
    return Job.objects.get(pk=job_id)


def job_progress(job: Job, progress: int) -> None:
    Job.objects.filter(pk=job.pk, status=Job.Status.RUNNING).update(progress=max(0, min(100, progress)))


def job_run(job_id: Any) -> str:
    """Run a job's handler once; returns the job's final status (or "skipped")."""
    job = job_claim(job_id)
    if job is None:
        return "skipped"
    handler = HANDLERS.get(job.kind)
    if handler is None:
        _finish(job, error={"code": "UNKNOWN_JOB_KIND", "message": f"No handler for {job.kind!r}."})
        return Job.Status.FAILED
    try:
        result = handler(job)
    except RetryableJobError:
        Job.objects.filter(pk=job.pk, status=Job.Status.RUNNING).update(status=Job.Status.QUEUED)
        raise
    except CortexError as exc:
        _finish(job, error={"code": exc.error_code, "message": exc.message})
        return Job.Status.FAILED
    except Exception:  # the person polling must learn it failed; the traceback goes to the log
        logger.exception("job %s (%s) failed", job.pk, job.kind)
        _finish(job, error={"code": "INTERNAL_ERROR", "message": "The job failed on our side; the logs have the details."})
        return Job.Status.FAILED
    _finish(job, result=result)
    return Job.Status.SUCCEEDED


def _finish(job: Job, *, result: dict[str, Any] | None = None, error: dict[str, Any] | None = None) -> None:
    Job.objects.filter(pk=job.pk, status=Job.Status.RUNNING).update(
        status=Job.Status.FAILED if error else Job.Status.SUCCEEDED,
        result=result,
        error=error,
        progress=100,
        finished_at=timezone.now(),
    )


@dataclass(frozen=True)
class JobPurge:
    deleted: int
    more: bool  # the batch was full: expired jobs may remain


def jobs_purge_finished(*, batch_size: int, now: Any = None) -> JobPurge:
    """Delete at most `batch_size` jobs that finished more than CORTEX_JOB_RETENTION_HOURS ago.

    Queued and running jobs stay, however old. Running it again deletes nothing more. The
    caller runs it again while `more` is set (the task re-enqueues itself), so no single
    delete holds locks on an unbounded number of rows.
    """
    cutoff = (now or timezone.now()) - timedelta(hours=settings.CORTEX_JOB_RETENTION_HOURS)
    expired = Job.objects.filter(status__in=[Job.Status.SUCCEEDED, Job.Status.FAILED], finished_at__lt=cutoff)
    batch = list(expired.order_by("finished_at").values_list("pk", flat=True)[:batch_size])
    deleted, _ = Job.objects.filter(pk__in=batch).delete() if batch else (0, {})
    if deleted:
        logger.info("deleted %d finished jobs older than %s", deleted, cutoff.isoformat())
    return JobPurge(deleted=deleted, more=len(batch) == batch_size)

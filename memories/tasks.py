"""Celery tasks of the memories app: thin wrappers over services, taking ids, safe to run twice.

Services enqueue these (imported at module level, enqueued on commit); a task imports the
service it runs inside its body, so the import graph points one way — services → tasks —
and the contract in pyproject.toml ([tool.importlinter]) keeps it so.

Retries are only for passing trouble (the database or broker connection dropped), with
exponential backoff and a bound; everything else is handled by the services themselves
(a failing post-write step is logged and the others still run; a failing job is marked
failed with its reason).
"""

from __future__ import annotations

from typing import Any

from celery import shared_task
from django.db import InterfaceError, OperationalError, transaction

from memories.retry import RETRY, RetryableJobError

RETRYABLE = (OperationalError, InterfaceError, RetryableJobError)
# Finished jobs deleted per run of purge_finished_jobs; a run that fills its batch enqueues the next.
PURGE_BATCH = 500
# Appended term-count rows folded per run of compact_term_counts (a full batch enqueues the next).
COMPACT_BATCH = 20_000


@shared_task(
    bind=True,
    name="memories.after_memory_write",
    acks_late=True,
    ignore_result=False,
    soft_time_limit=120,
    time_limit=150,
    max_retries=3,
)
def after_memory_write(self: Any, memory_id: str) -> dict[str, str]:
    from memories.services.post_write import post_write_done, run_post_write

    outcomes = run_post_write(memory_id)
    if RETRY in outcomes.values():
        if self.request.retries < self.max_retries:
            # Every step is idempotent, so running them all again is safe.
            raise self.retry(countdown=min(300, 10 * 2**self.request.retries))
        return outcomes  # still pending: the sweep takes it up again later
    # Done, including a step that failed for good (logged with its traceback; running it again would not help).
    post_write_done(memory_id)
    return outcomes


@shared_task(name="memories.after_memory_writes", acks_late=True, autoretry_for=RETRYABLE, retry_backoff=5, max_retries=3)
def after_memory_writes(memory_ids: list[str]) -> int:
    """A batch's post-write work, sent as one message by the write path: fanned out here into one
    `after_memory_write` per memory (each retried on its own). Running it twice only enqueues
    idempotent work twice; if it is lost, the memories stay pending and the sweep takes them."""
    from memories.services.post_write import post_write_fan_out

    return post_write_fan_out(memory_ids)


@shared_task(name="memories.sweep_post_write", acks_late=True, autoretry_for=RETRYABLE, retry_backoff=5, max_retries=3)
def sweep_post_write() -> int:
    """Beat: enqueue the post-write work of memories that missed it (Redis was down at their write,
    or a worker died holding the task); bounded per run, so a long outage drains over a few runs."""
    from django.conf import settings

    from memories.services.post_write import post_write_sweep

    return len(
        post_write_sweep(
            batch_size=settings.CORTEX_POST_WRITE_SWEEP_BATCH, grace_seconds=settings.CORTEX_POST_WRITE_GRACE_SECONDS
        )
    )


@shared_task(
    name="memories.run_job",
    acks_late=True,
    ignore_result=False,
    soft_time_limit=240,
    time_limit=270,
    autoretry_for=RETRYABLE,
    retry_backoff=5,
    retry_backoff_max=120,
    retry_jitter=True,
    max_retries=3,
)
def run_job(job_id: str) -> str:
    from memories.services.jobs import job_run

    return job_run(job_id)


@shared_task(name="memories.purge_finished_jobs", acks_late=True, autoretry_for=RETRYABLE, retry_backoff=5, max_retries=3)
def purge_finished_jobs(batch_size: int = PURGE_BATCH) -> int:
    """Delete one bounded batch of expired jobs; when more remain, the next batch is a new task
    (short transactions, and a worker is never held by one long delete)."""
    from memories.services.jobs import jobs_purge_finished

    purge = jobs_purge_finished(batch_size=batch_size)
    if purge.more:
        transaction.on_commit(lambda: purge_finished_jobs.delay(batch_size))
    return purge.deleted


@shared_task(name="memories.compact_term_counts", acks_late=True, autoretry_for=RETRYABLE, retry_backoff=5, max_retries=3)
def compact_term_counts(batch_size: int = COMPACT_BATCH) -> int:
    """Fold one bounded batch of recall's appended term counts; when more remain, the next batch is a new task."""
    from memories.services.term_counts import term_counts_compact

    compaction = term_counts_compact(batch_size=batch_size)
    if compaction.more:
        transaction.on_commit(lambda: compact_term_counts.delay(batch_size))
    return compaction.folded


@shared_task(
    name="memories.sync_scope_indexes",
    acks_late=True,
    autoretry_for=RETRYABLE,
    retry_backoff=5,
    max_retries=3,
    soft_time_limit=3300,
    time_limit=3600,
)
def sync_scope_indexes() -> dict[str, list[int]]:
    """Build the vector and full-text indexes of scopes that have grown large and drop those no longer wanted (one at a time)."""
    from memories.services.scope_indexes import scope_indexes_sync

    outcome = scope_indexes_sync()
    return {"built": outcome.built, "dropped": outcome.dropped}


@shared_task(name="memories.finalise_redaction_holds", acks_late=True, autoretry_for=RETRYABLE, retry_backoff=5, max_retries=3)
def finalise_redaction_holds(batch_size: int = 200) -> int:
    """Make one bounded batch of expired redaction holds final; when more remain, the next batch is a new task."""
    from memories.services.memories import redaction_holds_finalise

    finalised, more = redaction_holds_finalise(batch_size=batch_size)
    if more:
        transaction.on_commit(lambda: finalise_redaction_holds.delay(batch_size))
    return finalised


@shared_task(name="memories.send_daily_digests", acks_late=True, autoretry_for=RETRYABLE, retry_backoff=5, max_retries=3)
def send_daily_digests(after_id: int = 0, batch_size: int = 0) -> int:
    """Send one bounded batch of today's digest e-mails (beat starts it once a day); when the batch
    was full, the next one is a new task starting after its last member. Running it again the same
    day sends nobody a second digest (memories.services.digest claims each member's day)."""
    from django.conf import settings

    from memories.services.digest import digests_send_due

    size = batch_size or settings.CORTEX_DIGEST_BATCH
    batch = digests_send_due(batch_size=size, after_id=after_id)
    if batch.more:
        transaction.on_commit(lambda: send_daily_digests.delay(batch.last_id, size))
    return batch.sent

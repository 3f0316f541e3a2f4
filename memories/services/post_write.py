"""Work that follows a stored memory, off the request path (run by the `after_memory_write` task).

Steps are registered in order by `MemoriesConfig.ready()` (conflict detection, then entity
extraction). Each takes the memory id, must be idempotent (the task may run twice), and must
never change the memory's own content: a failing step is logged and the next one still runs.

Nothing is lost when the task is: a memory is written with `post_write_pending` set, in its own
transaction, and only a finished run clears it. Enqueueing after commit may fail (Redis down) —
that never fails the write — and a worker may be killed mid-task; `post_write_sweep` (beat, every
few minutes) re-enqueues active memories still pending after a grace period.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import Any

from django.db import InterfaceError, OperationalError
from django.utils import timezone
from kombu.exceptions import OperationalError as BrokerError
from redis.exceptions import ConnectionError as RedisConnectionError

from memories.models import Memory
from memories.retry import RETRY
from memories.tasks import after_memory_write, after_memory_writes

logger = logging.getLogger(__name__)

PostWriteStep = Callable[[Any], Any]
# (name, step) in the order they run; the name keys the step's outcome.
STEPS: list[tuple[str, PostWriteStep]] = []


def register(name: str, step: PostWriteStep) -> None:
    """Add a step (called from AppConfig.ready(); registering the same name again replaces nothing)."""
    if all(existing != name for existing, _ in STEPS):
        STEPS.append((name, step))


def run_post_write(memory_id: Any) -> dict[str, str]:
    """Run every registered step; report each step's outcome by name ("ok", "failed", or
    "retry" when the database connection failed and the task should run again later)."""
    outcomes: dict[str, str] = {}
    for name, step in STEPS:
        try:
            step(memory_id)
            outcomes[name] = "ok"
        except (OperationalError, InterfaceError):
            logger.warning("post-write step %s hit a database error for memory %s; will retry", name, memory_id, exc_info=True)
            outcomes[name] = RETRY
        except Exception:  # one failing step must not stop the others; logged with its traceback
            logger.exception("post-write step %s failed for memory %s", name, memory_id)
            outcomes[name] = "failed"
    return outcomes


def post_write_enqueue(memory_id: Any) -> bool:
    """Hand a stored memory's post-write work to the worker (call on commit); False when the broker
    is unreachable — the memory stays pending and the sweep enqueues it once Redis is back."""
    try:
        # No result subscription: nobody here waits for it, and subscribing to the result backend
        # while Redis is down would retry for ~20 s before failing (Celery's pub/sub reconnect).
        after_memory_write.apply_async(args=(str(memory_id),), ignore_result=True)
    except (BrokerError, RedisConnectionError):
        logger.warning("could not enqueue post-write work for memory %s (broker unreachable); the sweep will", memory_id)
        return False
    return True


def post_write_enqueue_many(memory_ids: Sequence[Any]) -> bool:
    """`post_write_enqueue` for a batch's memories (call on commit): one message, which the worker
    fans out into one task per memory (`post_write_fan_out`), so the write path pays one broker
    round trip per batch instead of one per memory. False when the broker is unreachable; the
    memories stay pending and the sweep enqueues them once Redis is back."""
    if len(memory_ids) == 1:
        return post_write_enqueue(memory_ids[0])
    try:
        after_memory_writes.apply_async(args=([str(memory_id) for memory_id in memory_ids],), ignore_result=True)
    except (BrokerError, RedisConnectionError):
        logger.warning("could not enqueue post-write work for %d memories (broker unreachable); the sweep will", len(memory_ids))
        return False
    return True


def post_write_fan_out(memory_ids: Sequence[Any]) -> int:
    """Enqueue each memory's post-write work (run by the worker for a batch); stops at the first
    enqueue the broker refuses (the rest stay pending for the sweep). Returns how many went."""
    for count, memory_id in enumerate(memory_ids):
        if not post_write_enqueue(memory_id):
            return count
    return len(memory_ids)


def post_write_done(memory_id: Any) -> None:
    """The post-write work of this memory has run (every step finished, ok or failed for good)."""
    Memory.objects.filter(pk=memory_id, post_write_pending=True).update(post_write_pending=False)


def post_write_sweep(*, batch_size: int, grace_seconds: int) -> list[str]:
    """Enqueue the post-write work of up to `batch_size` active memories still pending after
    `grace_seconds` since their last change (time for the normal on-commit task to run), oldest
    first; returns their ids. Stops at the first enqueue the broker refuses. Running the task for
    a memory twice is harmless (its steps are idempotent), so a sweep overlapping a slow worker is safe.
    """
    cutoff = timezone.now() - timedelta(seconds=grace_seconds)
    ids = list(
        Memory.objects.filter(post_write_pending=True, status=Memory.Status.ACTIVE, updated_at__lt=cutoff)
        .order_by("updated_at")
        .values_list("pk", flat=True)[:batch_size]
    )
    enqueued: list[str] = []
    for memory_id in ids:
        if not post_write_enqueue(memory_id):
            break
        enqueued.append(str(memory_id))
    if enqueued:
        logger.info("post-write sweep enqueued %d memories that missed their post-write work", len(enqueued))
    return enqueued

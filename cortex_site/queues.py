"""The Celery queues, by kind of work, so each can get workers of its own.

- `default`: what a person waits for (decision-extraction jobs) and housekeeping;
- `connectors`: syncs, webhook deliveries and the dispatcher (slow, outbound, bursty);
- `conflicts`: the work after every write, conflict detection and entity extraction.

Settings route tasks to them (CELERY_TASK_ROUTES); the runner's worker consumes all of them
unless CORTEX_WORKER_QUEUES names some. Kept apart from settings so the runner can read it
before Django is configured.
"""

from __future__ import annotations

import os

TASK_QUEUES = ("default", "connectors", "conflicts")


class UnknownQueueError(ValueError):
    """CORTEX_WORKER_QUEUES names a queue no task is routed to (a typo would leave a worker idle)."""


def worker_queues(value: str | None = None) -> list[str]:
    """The queues a worker consumes: CORTEX_WORKER_QUEUES (comma-separated), or every queue."""
    raw = os.environ.get("CORTEX_WORKER_QUEUES", "") if value is None else value
    chosen = [name.strip() for name in raw.split(",") if name.strip()]
    unknown = [name for name in chosen if name not in TASK_QUEUES]
    if unknown:
        raise UnknownQueueError(
            f"CORTEX_WORKER_QUEUES names unknown queue(s) {', '.join(unknown)}; the queues are {', '.join(TASK_QUEUES)}."
        )
    return list(dict.fromkeys(chosen)) or list(TASK_QUEUES)

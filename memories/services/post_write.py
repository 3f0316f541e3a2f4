"""Work that follows a stored memory, off the request path (run by the `after_memory_write` task).

Steps are registered in order by `MemoriesConfig.ready()` (conflict detection, then entity
extraction). Each takes the memory id, must be idempotent (the task may run twice), and must
never change the memory's own content: a failing step is logged and the next one still runs.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from django.db import InterfaceError, OperationalError

from memories.retry import RETRY

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

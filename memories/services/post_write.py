"""Work that follows a stored memory, off the request path (run by the `after_memory_write` task).

Steps are registered here in order. Each takes the memory id, must be idempotent (the task
may run twice), and must never change the memory's own content: a failing step is logged
and the next one still runs. Conflict detection and entity extraction plug in here.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

logger = logging.getLogger(__name__)

PostWriteStep = Callable[[Any], None]
STEPS: list[PostWriteStep] = []


def register(step: PostWriteStep) -> PostWriteStep:
    if step not in STEPS:
        STEPS.append(step)
    return step


RETRY = "retry"


def run_post_write(memory_id: Any) -> dict[str, str]:
    """Run every registered step; report each step's outcome by name ("ok", "failed", or
    "retry" when the database connection failed and the task should run again later)."""
    from django.db import InterfaceError, OperationalError

    outcomes: dict[str, str] = {}
    for step in STEPS:
        name = f"{step.__module__}.{step.__qualname__}"
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


# -- the registered steps, in order --------------------------------------------------------------
# Imported inside the steps: the services import the write pipeline, which imports this module.
def detect_conflicts(memory_id: Any) -> None:
    from memories.services.conflicts import conflicts_detect

    conflicts_detect(memory_id)


def extract_entities(memory_id: Any) -> None:
    from memories.services.entities import entities_extract

    entities_extract(memory_id)


register(detect_conflicts)
register(extract_entities)

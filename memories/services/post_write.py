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


def run_post_write(memory_id: Any) -> dict[str, str]:
    """Run every registered step; report each step's outcome by name."""
    outcomes: dict[str, str] = {}
    for step in STEPS:
        name = f"{step.__module__}.{step.__qualname__}"
        try:
            step(memory_id)
            outcomes[name] = "ok"
        except Exception:  # one failing step must not stop the others; logged with its traceback
            logger.exception("post-write step %s failed for memory %s", name, memory_id)
            outcomes[name] = "failed"
    return outcomes

"""What services tell the tasks that run them: "this could not be done now, run it again later".

A neutral module: the services raise or return these and the tasks act on them, so neither
layer imports the other to learn them.
"""

from __future__ import annotations

# The outcome of a post-write step that hit a passing database error.
RETRY = "retry"


class RetryableJobError(Exception):
    """The work could not be done now for a passing reason; the job goes back to the queue."""

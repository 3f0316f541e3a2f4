"""Database work from the MCP endpoint's event loop.

The ORM is synchronous, so every piece of it (checking a token, running a tool, writing an
audit event) runs in a worker thread, and the thread's database connections are closed as
soon as that piece is done: an HTTP request that is slow to send its body, or a client
that holds a connection open, never pins a PostgreSQL connection while it waits.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import ParamSpec, TypeVar

from asgiref.sync import sync_to_async
from django.db import connections

P = ParamSpec("P")
R = TypeVar("R")


def in_worker_thread(fn: Callable[P, R]) -> Callable[P, Awaitable[R]]:
    """`fn` as a coroutine function run in a pool thread, closing its connections afterwards.

    Each call is self-contained (its own connection and transactions), which is what makes a
    non-thread-sensitive executor safe for the ORM here. Context variables (request id, client
    ip, the SDK's authenticated token) are carried into the thread.
    """

    @functools.wraps(fn)
    def closing(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return fn(*args, **kwargs)
        finally:
            connections.close_all()

    return sync_to_async(closing, thread_sensitive=False)

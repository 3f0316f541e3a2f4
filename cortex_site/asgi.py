"""The ASGI entry point: Django (UI, REST) and the MCP endpoint side by side.

The MCP SDK's session manager must be running before it serves a request, so a small Starlette
router sits in front: the MCP paths (/mcp/ and its OAuth protected-resource metadata) go to the
SDK app, everything else to Django — served as WSGI on a pool of threads (a2wsgi) — and the
router's lifespan runs the session manager.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

from a2wsgi import WSGIMiddleware
from django.core.wsgi import get_wsgi_application
from kombu.exceptions import OperationalError
from starlette.routing import Route, Router

if TYPE_CHECKING:
    from cortex_site.body_limits import BodyLimitASGI

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "cortex_site.settings")


def _web_server_defaults() -> None:
    """What a process that starts by serving this application wants unless told otherwise: a
    database connection pool (see DB_POOL in cortex_site/settings.py — requests run on many threads
    here, Django's pool and the MCP endpoint's, and each would otherwise open connections of its own). A process whose
    settings are already loaded (the test suite building an app of its own) is left as it is."""
    from django.conf import settings

    if not settings.configured:
        os.environ.setdefault("DB_POOL", "1")


_web_server_defaults()

logger = logging.getLogger(__name__)
WARM_UP_SECONDS = 10


def _warm_up(threads: ThreadPoolExecutor, thread_count: int) -> None:
    """What a web process would otherwise set up during its first requests, done before it takes one:
    the connector sources' modules, its database pool filled (each connection a forked backend and
    an authentication), the broker connection its first enqueue opens, and every thread Django's
    requests run on started with its own database wrapper (`_warm_threads`). A process whose first
    requests came in a webhook burst held them ~0.7 s while it did this (docs/benchmarks.md).

    Never fatal: with the database or Redis down the process starts all the same and answers 503
    until they are back, as it did before (the pool keeps connecting in the background)."""
    from django.db import DatabaseError, connection
    from psycopg_pool import PoolTimeout

    from connectors.registry import SOURCES, source_class
    from cortex_site.celery import app as celery_app

    for kind in SOURCES:
        source_class(kind)
    try:
        pool = getattr(connection, "pool", None)  # PostgreSQL's wrapper has one (None when DB_POOL is off)
        if pool is not None:
            pool.open()
            pool.wait(timeout=WARM_UP_SECONDS)
            _warm_threads(threads, thread_count)
        with celery_app.producer_or_acquire() as producer:
            producer.connection.ensure_connection(max_retries=1)
    except (PoolTimeout, DatabaseError, OSError, OperationalError) as exc:
        logger.warning("web process starting cold (%s): %s", type(exc).__name__, exc)


def _warm_threads(threads: ThreadPoolExecutor, count: int) -> None:
    """Start all `count` threads of the pool Django's requests run on, each borrowing a database
    connection once. The pool starts a thread only when a request finds none idle, and Django keeps
    a database wrapper per thread, made on the thread's first query: the first answers of a burst
    paid both (their median 83–100 ms against 55–88 ms warm, docs/benchmarks.md). Called once the
    database pool is full, so a borrow does not wait."""
    from django.db import connection

    ready = threading.Barrier(count)

    def warm() -> None:
        try:
            ready.wait(timeout=WARM_UP_SECONDS)  # holds each job on a thread of its own until all have one
        except threading.BrokenBarrierError:
            return
        try:
            connection.ensure_connection()
        finally:
            connection.close()  # back to the pool

    for job in [threads.submit(warm) for _ in range(count)]:
        job.result()


def create_application() -> BodyLimitASGI:
    """A fresh application (the SDK's session manager runs once per instance; tests build their own)."""
    django_wsgi = get_wsgi_application()  # sets Django up, so the modules below can import models
    from django.conf import settings
    from django.urls import get_resolver

    # Every view imported now, before the process takes a request: Django loads its URLconf on the
    # first one, ~0.5 s of CPU here, and a process started under load kept its first requests (a
    # webhook burst's slowest answers) waiting for it (docs/benchmarks.md).
    _ = get_resolver().url_patterns

    # Django is served as WSGI on a fixed pool of threads (WEB_THREADS), not through its ASGI
    # handler, which starts a thread per request and hops between it and the event loop at every
    # sync/async boundary: about a third of the web processes' time under a webhook burst went
    # there (docs/benchmarks.md).
    # django-stubs types the handler's answer as HttpResponseBase, which is the iterable of bytes WSGI asks for.
    django_app = WSGIMiddleware(django_wsgi, workers=settings.WEB_THREADS)  # type: ignore[arg-type]

    from cortex_site.body_limits import BodyLimitASGI
    from memories.mcp.endpoint import build_endpoint

    mcp = build_endpoint()

    @asynccontextmanager
    async def lifespan(_app: object) -> AsyncIterator[None]:
        # uvicorn listens only once this startup is done: the process takes no request before it is warm.
        await asyncio.to_thread(_warm_up, django_app.executor, settings.WEB_THREADS)
        async with mcp.session_manager.run():
            yield

    # Every path that is not the MCP endpoint's goes to Django as it came: the router's default, not
    # a Mount("/"), whose pattern does not match a path holding an (encoded) newline — such a path
    # got Starlette's plain-text 404 instead of Django's JSON one.
    # a2wsgi types its scope and callables as TypedDicts, narrower than Starlette's ASGIApp; it is one.
    app = Router(routes=[Route(path, endpoint=mcp.app) for path in mcp.paths], default=django_app, lifespan=lifespan)  # type: ignore[arg-type]
    # Oversized bodies are refused before Django (or the MCP SDK) reads them whole.
    return BodyLimitASGI(app, direct_paths=mcp.paths)  # type: ignore[arg-type]


application = create_application()

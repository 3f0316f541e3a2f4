"""The ASGI entry point: Django (UI, REST) and the MCP endpoint side by side.

Django's ASGI handler does not run lifespan events, and the MCP SDK's session manager must
be running before it serves a request, so a small Starlette router sits in front: the MCP
paths (/mcp/ and its OAuth protected-resource metadata) go to the SDK app, everything else
to Django, and the router's lifespan runs the session manager.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

from django.core.asgi import get_asgi_application
from starlette.applications import Starlette
from starlette.routing import Mount, Route

if TYPE_CHECKING:
    from cortex_site.body_limits import BodyLimitASGI

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "cortex_site.settings")


def _web_server_defaults() -> None:
    """What a process that starts by serving this application wants unless told otherwise: a
    database connection pool (see DB_POOL in cortex_site/settings.py — each request runs on its own
    thread here, so plain connections would be opened anew for every request). A process whose
    settings are already loaded (the test suite building an app of its own) is left as it is."""
    from django.conf import settings

    if not settings.configured:
        os.environ.setdefault("DB_POOL", "1")


_web_server_defaults()


def create_application() -> BodyLimitASGI:
    """A fresh application (the SDK's session manager runs once per instance; tests build their own)."""
    django_app = get_asgi_application()  # sets Django up, so the MCP modules below can import models

    from cortex_site.body_limits import BodyLimitASGI
    from memories.mcp.endpoint import build_endpoint

    mcp = build_endpoint()

    @asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        async with mcp.session_manager.run():
            yield

    routes = [Route(path, endpoint=mcp.app) for path in mcp.paths]
    # django-stubs types ASGIHandler.__call__ more narrowly than Starlette's ASGIApp; it is one.
    app = Starlette(routes=[*routes, Mount("/", app=django_app)], lifespan=lifespan)  # type: ignore[arg-type]
    # Oversized bodies are refused before Django (or the MCP SDK) reads them whole.
    return BodyLimitASGI(app, direct_paths=mcp.paths)  # type: ignore[arg-type]


application = create_application()

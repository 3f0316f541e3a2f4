"""The MCP endpoint as an ASGI app: the SDK's Streamable HTTP transport, stateless, at /mcp/.

Stateless means no MCP session lives in a worker's memory, so any web worker can serve any
request. Clients speaking a handshake-era protocol (2025-06-18, 2025-11-25) `initialize`
as usual; clients speaking the per-request 2026-07-28 revision send each request on its
own. The SDK routes both.

Around the SDK app, `RequestContext` gives every HTTP request what Django's own middleware
gives a Django request: a request id (the client's X-Request-ID when sane, echoed back) and
the client ip, bound for the audit events it causes. It also answers GET with 405: a
stateless server never sends anything on a standalone SSE stream, and the SDK would
otherwise hold such a stream open for as long as the client likes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import urlsplit

from django.conf import settings
from mcp.server.auth.routes import build_resource_metadata_url
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from starlette.datastructures import Headers, MutableHeaders
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from audit.context import bound, new_request_id
from memories.mcp.server import build_server

MCP_PATH = "/mcp/"
# The same rule audit.middleware applies to REST requests.
_VALID_REQUEST_ID = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")
_LOOPBACK = ("127.0.0.1", "localhost", "[::1]")


@dataclass(frozen=True)
class McpEndpoint:
    app: ASGIApp
    session_manager: StreamableHTTPSessionManager
    paths: tuple[str, ...]  # every path `app` answers, with and without the trailing slash


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def transport_security() -> TransportSecuritySettings:
    """DNS-rebinding protection from Django's settings: Host must be one of ALLOWED_HOSTS (or the
    host of CORTEX_BASE_URL), and a browser's Origin one of ours — else 421 / 403.

    The SDK matches names exactly (optionally with any port), so wildcard ALLOWED_HOSTS entries
    ('*', '.example.com') do not carry over: list the public host names, or set CORTEX_BASE_URL.
    """
    base = urlsplit(settings.CORTEX_BASE_URL)
    hosts = {h for h in settings.ALLOWED_HOSTS if h != "*" and not h.startswith(".")}
    if base.hostname:
        hosts.add(f"[{base.hostname}]" if ":" in base.hostname else base.hostname)
    if settings.DEBUG or settings.TESTING:
        hosts.update(_LOOPBACK)
    origins = {_origin(settings.CORTEX_BASE_URL)}
    origins.update(o for o in settings.CSRF_TRUSTED_ORIGINS if "*" not in o)
    for host in hosts:
        origins.update({f"http://{host}", f"https://{host}", f"http://{host}:*", f"https://{host}:*"})
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=sorted(hosts | {f"{h}:*" for h in hosts}),
        allowed_origins=sorted(origins),
    )


def build_endpoint() -> McpEndpoint:
    """The SDK app serving MCP at /mcp/ and its OAuth protected-resource metadata."""
    resource_url = f"{settings.CORTEX_BASE_URL}{MCP_PATH}"
    server = build_server(resource_url=resource_url)
    sdk_app = server.streamable_http_app(
        streamable_http_path=MCP_PATH,
        stateless_http=True,
        json_response=True,  # one JSON answer per POST: nothing to stream, friendlier to proxies
        transport_security=transport_security(),
        max_request_body_size=settings.DATA_UPLOAD_MAX_MEMORY_SIZE,  # the same body limit as REST
    )
    metadata_path = urlsplit(str(build_resource_metadata_url(resource_url))).path  # type: ignore[arg-type]
    canonical = (MCP_PATH, metadata_path)
    paths = tuple(sorted({p for c in canonical for p in (c, c.rstrip("/") or "/")}))
    return McpEndpoint(app=RequestContext(sdk_app, canonical), session_manager=server.session_manager, paths=paths)


class RequestContext:
    """Per-HTTP-request context for the SDK app (see the module docstring)."""

    def __init__(self, app: ASGIApp, canonical_paths: tuple[str, ...]) -> None:
        self.app = app
        self.canonical = {p.rstrip("/"): p for p in canonical_paths}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        supplied = Headers(scope=scope).get("x-request-id", "")
        request_id = supplied if _VALID_REQUEST_ID.match(supplied) else new_request_id()
        client = scope.get("client")
        path: str = scope["path"]
        path = self.canonical.get(path, path)  # /mcp and /mcp/ are one endpoint
        scope = {**scope, "path": path, "raw_path": path.encode()}

        async def send_with_request_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                MutableHeaders(scope=message).append("X-Request-ID", request_id)
            await send(message)

        if scope["method"] == "GET" and path == MCP_PATH:
            await Response(status_code=405, headers={"Allow": "POST"})(scope, receive, send_with_request_id)
            return
        with bound(request_id=request_id, client_ip=client[0] if client else None):
            await self.app(scope, receive, send_with_request_id)

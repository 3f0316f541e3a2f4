"""Request bodies are refused past their limit before they are read, not after.

Django's own DATA_UPLOAD_MAX_MEMORY_SIZE check comes after a body is read, and not for files at
all. So two layers:

- `BodyLimitASGI` wraps the ASGI application (cortex_site/asgi.py). A declared Content-Length over
  the path's limit is not read at all. A body without one (chunked) is read up to the limit: for
  Django, which is served as WSGI and reads only a declared length, it is collected and handed on
  with its length declared; for the MCP endpoint it is counted as it arrives. Past the limit,
  reading stops, Django gets an empty body and `scope["cortex.body_too_large"]` = the size seen,
  and paths that are not Django's (the MCP endpoint) are answered 413 right there.
- `BodyLimitMiddleware` (after sessions and auth, before any view reads the body) answers 413 for that mark —
  or, under the test client, where nothing is read until asked, for a Content-Length over
  the limit. Webhook paths go on to their view, which audits the refusal against its connector.

Limits: an upload address (CORTEX_UPLOAD_PATHS) takes one file of CORTEX_MAX_UPLOAD_BYTES plus
1 MiB of form fields and multipart framing; everything else CORTEX_MAX_BODY_BYTES.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.template.defaultfilters import filesizeformat

from cortex_site.api import error_body

UPLOAD_FORM_ALLOWANCE = 1024 * 1024
WEBHOOK_PREFIX = "/api/webhooks/"
SCOPE_KEY = "cortex.body_too_large"

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


def limit_for(path: str) -> int:
    if any(path.startswith(prefix) for prefix in settings.CORTEX_UPLOAD_PATHS):
        return int(settings.CORTEX_MAX_UPLOAD_BYTES) + UPLOAD_FORM_ALLOWANCE
    return int(settings.DATA_UPLOAD_MAX_MEMORY_SIZE)


def too_large_message(size: int, limit: int) -> str:
    return (
        f"The request body is {filesizeformat(size)}; this address accepts at most {filesizeformat(limit)} "
        f"(files of up to {filesizeformat(settings.CORTEX_MAX_UPLOAD_BYTES)}, one per request)."
        if limit > settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        else f"The request body is {filesizeformat(size)}; this address accepts at most {filesizeformat(limit)}."
    )


def oversized(request: HttpRequest) -> int | None:
    """The size of this request's body when it is over its path's limit (it has not been read), else None."""
    # The ASGI scope: a2wsgi passes it in the WSGI environ; an ASGIRequest carries it.
    scope = request.META.get("asgi.scope") or getattr(request, "scope", None)
    if isinstance(scope, dict) and scope.get(SCOPE_KEY):
        return int(scope[SCOPE_KEY])
    try:
        declared = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        return None
    return declared if declared > limit_for(request.path) else None


class BodyLimitMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        size = oversized(request)
        if size is None or request.path.startswith(WEBHOOK_PREFIX):
            return self.get_response(request)
        limit = limit_for(request.path)
        message = too_large_message(size, limit)
        details = {"size": size, "limit": limit}
        if request.path.startswith("/api/") or "application/json" in request.headers.get("Accept", ""):
            response: HttpResponse = JsonResponse(error_body("PAYLOAD_TOO_LARGE", message, details), status=413)
        else:
            response = render(request, "errors/413.html", {"message": message}, status=413)
        # The unread body is still on the connection; it cannot carry another request.
        response["Connection"] = "close"
        return response


class BodyLimitASGI:
    """See the module docstring. `direct_paths`: paths outside Django, answered 413 here."""

    def __init__(self, app: ASGIApp, *, direct_paths: tuple[str, ...] = ()) -> None:
        self.app = app
        self.direct_paths = direct_paths

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope.get("path", "")
        limit = limit_for(path)
        declared = _declared_length(scope)
        if declared is not None and declared > limit:
            if path in self.direct_paths:
                await _answer_413(send, declared, limit)
                return
            scope[SCOPE_KEY] = declared
            await self.app(scope, _empty_body(receive), send)
            return
        if declared is None and path not in self.direct_paths:
            await self.app(scope, await _declared_within(scope, receive, limit), send)
            return
        await self.app(scope, _counted(scope, receive, limit), send)


def _declared_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


async def _refused_rest() -> Message:
    """What Django's disconnect listener gets after a refused body: nothing, until it is cancelled
    when the answer is sent. Asking the server for more would read the body we refuse to read."""
    await asyncio.get_running_loop().create_future()
    raise AssertionError("unreachable: the future above never completes")


def _empty_body(receive: Receive) -> Receive:
    given = False

    async def empty() -> Message:
        nonlocal given
        if given:
            return await _refused_rest()
        given = True
        return {"type": "http.request", "body": b"", "more_body": False}

    return empty


async def _declared_within(scope: Scope, receive: Receive, limit: int) -> Receive:
    """A body that declares no length (chunked, or none at all), read up to `limit` and handed on
    with a Content-Length: Django served as WSGI reads only a declared length, and would take a
    chunked body for an empty one. Past the limit reading stops and the body is refused, unread."""
    chunks: list[bytes] = []
    seen = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":  # the client went away: pass that on
            return _replay(message, receive)
        chunk = message.get("body", b"")
        seen += len(chunk)
        if seen > limit:
            scope[SCOPE_KEY] = seen
            return _empty_body(receive)
        chunks.append(chunk)
        if not message.get("more_body", False):
            break
    body = b"".join(chunks)
    scope["headers"] = [*scope.get("headers", ()), (b"content-length", str(len(body)).encode())]
    return _replay({"type": "http.request", "body": body, "more_body": False}, receive)


def _replay(first: Message, receive: Receive) -> Receive:
    given = False

    async def replayed() -> Message:
        nonlocal given
        if given:
            return await receive()  # after the body: only http.disconnect is left to wait for
        given = True
        return first

    return replayed


def _counted(scope: Scope, receive: Receive, limit: int) -> Receive:
    seen = 0
    finished = refused = False

    async def counted() -> Message:
        nonlocal seen, finished, refused
        if refused:
            return await _refused_rest()
        if finished:
            return await receive()  # after the body: only http.disconnect is left to wait for
        message = await receive()
        if message["type"] != "http.request":
            return message
        seen += len(message.get("body", b""))
        if seen > limit:
            # Stop here: what was passed on is at most `limit` bytes; the rest is never read.
            scope[SCOPE_KEY] = seen
            refused = True
            return {"type": "http.request", "body": b"", "more_body": False}
        finished = not message.get("more_body", False)
        return message

    return counted


async def _answer_413(send: Send, size: int, limit: int) -> None:
    from audit.context import new_request_id

    request_id = new_request_id()
    body: dict[str, Any] = {
        "error_code": "PAYLOAD_TOO_LARGE",
        "message": too_large_message(size, limit),
        "request_id": request_id,
        "details": {"size": size, "limit": limit},
    }
    payload = json.dumps(body).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(payload)).encode()),
        (b"x-request-id", request_id.encode()),
        (b"connection", b"close"),
    ]
    await send({"type": "http.response.start", "status": 413, "headers": headers})
    await send({"type": "http.response.body", "body": payload})

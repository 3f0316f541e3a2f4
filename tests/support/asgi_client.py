"""A POST straight through an ASGI application (what `make run` serves), without a server: the
test sees exactly which body chunks the application asked for and what it answered."""

from __future__ import annotations

import asyncio
import json
from collections.abc import MutableMapping
from typing import Any

CHUNK = 65536


def asgi_post(
    app: Any, path: str, *, headers: list[tuple[bytes, bytes]], chunks: int | None = None, raw_path: bytes | None = None
) -> dict[str, Any]:
    """POST `path`; `chunks` pieces of 64 KiB are offered as the body (0: an empty body; None: reading
    it fails the test). Returns the status, the headers (lower-cased names), the JSON body and how
    many pieces were asked for."""
    offered = {"count": 0}
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        if chunks is None:
            raise AssertionError("the body was read")
        if chunks == 0:
            return {"type": "http.request", "body": b"", "more_body": False}
        offered["count"] += 1
        return {"type": "http.request", "body": b"x" * CHUNK, "more_body": offered["count"] < chunks}

    async def send(message: MutableMapping[str, Any]) -> None:
        sent.append(dict(message))

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": path,
        "raw_path": raw_path if raw_path is not None else path.encode(),
        "root_path": "",
        "query_string": b"",
        "headers": [(b"host", b"127.0.0.1"), *headers],
        "client": ("127.0.0.1", 5000),
        "server": ("127.0.0.1", 8000),
    }
    asyncio.run(app(scope, receive, send))
    start = next(m for m in sent if m["type"] == "http.response.start")
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    response_headers = {name.lower(): value for name, value in start["headers"]}
    assert response_headers.get(b"content-type", b"").startswith(b"application/json"), (start["status"], body[:200])
    return {"status": start["status"], "headers": response_headers, "json": json.loads(body), "offered": offered["count"]}

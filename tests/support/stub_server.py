"""A loopback HTTP server that stands in for an outside API, so the real SDK code runs against it.

Tests script a route table (method + path -> responses), point the SDK's base URL at ``stub.url``
and then assert on ``stub.received``. Nothing leaves 127.0.0.1.

    stub_server.route("POST", "/api/conversations.history", StubResponse(json={...}))
    stub_server.route("GET", r"/repos/[^/]+/issues", StubResponse(status=429, headers={"Retry-After": "3"}),
                      StubResponse(json=[...]))   # in order, then the last repeats
    stub_server.route_json_file("POST", "/api/users.info", FIXTURES / "users.info.json")

A response may also be a callable taking the ``Received`` request and returning a ``StubResponse``
(for answers that depend on what was asked). A request no route matches gets 599 with a JSON body
naming it, so a test sees the gap rather than a plausible answer.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

UNROUTED_STATUS = 599
# For a client that talks to one API only: route every path of a method to the same answers.
ANY_PATH = r"/.*"


@dataclass(frozen=True)
class StubResponse:
    """One answer. ``json`` (when not None) wins over ``body``; ``delay`` seconds of silence come first."""

    status: int = 200
    json: Any = None
    body: bytes = b""
    headers: Mapping[str, str] = field(default_factory=dict)
    delay: float = 0.0

    def encoded(self) -> tuple[bytes, dict[str, str]]:
        headers = dict(self.headers)
        if self.json is not None:
            headers.setdefault("Content-Type", "application/json; charset=utf-8")
            return json.dumps(self.json).encode(), headers
        return self.body, headers


@dataclass(frozen=True)
class Received:
    """One request as the stub saw it. Header names are lower-cased; ``query`` keeps the last value of each name."""

    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body) if self.body else None

    def form(self) -> dict[str, str]:
        """The body as an HTML form (how slack-sdk's WebClient posts its arguments)."""
        return {name: values[-1] for name, values in parse_qs(self.body.decode(), keep_blank_values=True).items()}

    def params(self) -> dict[str, str]:
        """Query and form arguments together, whichever way the client sent them."""
        merged = dict(self.query)
        if self.headers.get("content-type", "").startswith("application/x-www-form-urlencoded"):
            merged.update(self.form())
        return merged


Responder = StubResponse | Callable[[Received], StubResponse]


@dataclass
class _Route:
    method: str
    path: str
    pattern: re.Pattern[str]
    responses: list[Responder]
    served: int = 0

    def matches(self, method: str, path: str) -> bool:
        return self.method == method and (self.path == path or self.pattern.fullmatch(path) is not None)


class StubServer:
    """A threaded loopback server answering from a route table and recording every request."""

    def __init__(self) -> None:
        self.received: list[Received] = []
        self._routes: list[_Route] = []
        self._lock = threading.Lock()
        # Set at stop so handlers still sleeping on a delay (timeout tests) end at once.
        self._stopping = threading.Event()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._server.daemon_threads = True
        # A short poll interval keeps shutdown, and so each test's teardown, quick.
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.02,), daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_port}"

    def route(self, method: str, path: str, *responses: Responder) -> None:
        """Answer ``method path`` (exact, or a regex matching the whole path) with ``responses`` in order;
        the last one repeats. Routing the same method and path again replaces the earlier answers."""
        if not responses:
            raise ValueError("route() needs at least one response")
        method = method.upper()
        with self._lock:
            self._routes = [r for r in self._routes if not (r.method == method and r.path == path)]
            self._routes.append(_Route(method, path, re.compile(path), list(responses)))

    def route_json_file(self, method: str, path: str, fixture_path: str | Path, *, status: int = 200) -> None:
        """Serve a recorded payload byte for byte, as the API sent it."""
        body = Path(fixture_path).read_bytes()
        self.route(method, path, StubResponse(status=status, body=body, headers={"Content-Type": "application/json"}))

    def requests_to(self, path: str) -> list[Received]:
        """What arrived at ``path`` (exact or whole-path regex), in order."""
        pattern = re.compile(path)
        with self._lock:
            return [r for r in self.received if r.path == path or pattern.fullmatch(r.path)]

    def reset(self) -> None:
        with self._lock:
            self._routes.clear()
            self.received.clear()

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stopping.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def _answer(self, request: Received) -> StubResponse:
        with self._lock:
            self.received.append(request)
            route = next((r for r in self._routes if r.matches(request.method, request.path)), None)
            if route is None:
                return StubResponse(status=UNROUTED_STATUS, json={"error": f"stub: no route for {request.method} {request.path}"})
            responder = route.responses[min(route.served, len(route.responses) - 1)]
            route.served += 1
        # Called outside the lock: a responder may be slow or read stub state.
        return responder(request) if callable(responder) else responder

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        stub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as real APIs answer; every reply has a Content-Length

            def _handle(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                parts = urlsplit(self.path)
                request = Received(
                    method=self.command,
                    path=parts.path,
                    query={name: values[-1] for name, values in parse_qs(parts.query, keep_blank_values=True).items()},
                    headers={name.lower(): value for name, value in self.headers.items()},
                    body=raw,
                )
                reply = stub._answer(request)
                if reply.delay and stub._stopping.wait(reply.delay):
                    return
                payload, headers = reply.encoded()
                try:
                    self.send_response(reply.status)
                    for name, value in headers.items():
                        self.send_header(name, value)
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    if self.command != "HEAD":
                        self.wfile.write(payload)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (a timeout test); nothing left to deliver

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = _handle

            def log_message(self, format: str, *args: object) -> None:
                pass  # requests are asserted on, not logged

        return Handler


@pytest.fixture
def stub_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[StubServer]:
    """A running StubServer for one test; a proxy from the environment must not capture loopback traffic."""
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")
    server = StubServer()
    server.start()
    try:
        yield server
    finally:
        server.stop()

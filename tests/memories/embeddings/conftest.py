"""A loopback HTTP stub that the real provider SDKs talk to.

Each test scripts the replies (recorded-style JSON in the provider's
documented shape, ``fixtures/*.json``) and then asserts on the requests the
stub received. The server binds 127.0.0.1 on a free port; nothing leaves the
machine.
"""

from __future__ import annotations

import json
import threading
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

FIXTURES = Path(__file__).parent / "fixtures"


@dataclass(frozen=True)
class Received:
    """One request as the stub saw it (header names lower-cased)."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any


@dataclass(frozen=True)
class Reply:
    status: int
    body: Any
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0


class StubServer:
    """Answers scripted replies first, in order, then asks ``responder``.

    ``responder`` takes the request's JSON body and returns ``(status, body)``;
    with none set, an unscripted request gets 599 so a test sees it fail.
    Tests reach everything through the fixture (no import of this module,
    whose name is shared with other conftests).
    """

    def __init__(self) -> None:
        self.received: list[Received] = []
        self.responder: Callable[[Any], tuple[int, Any]] | None = None
        self._script: deque[Reply] = deque()
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        # A short poll interval keeps shutdown (and so each test's teardown) quick.
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.02,), daemon=True)

    def reply(self, status: int, body: Any, *, headers: dict[str, str] | None = None, delay: float = 0.0) -> None:
        """Queue one reply; ``delay`` seconds of silence first provoke client timeouts."""
        self._script.append(Reply(status, body, headers or {}, delay))

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_port}"

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stopping.set()  # release handlers still sleeping on a delay
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def _answer(self, request: Received) -> Reply:
        with self._lock:
            self.received.append(request)
            if self._script:
                return self._script.popleft()
        if self.responder is None:
            return Reply(599, {"error": "nothing scripted for this request"})
        status, body = self.responder(request.body)
        return Reply(status, body)

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                request = Received(
                    method="POST",
                    path=self.path,
                    headers={name.lower(): value for name, value in self.headers.items()},
                    body=json.loads(raw) if raw else None,
                )
                reply = stub._answer(request)
                if reply.delay and stub._stopping.wait(reply.delay):
                    return
                payload = json.dumps(reply.body).encode()
                try:
                    self.send_response(reply.status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(payload)))
                    for name, value in reply.headers.items():
                        self.send_header(name, value)
                    self.end_headers()
                    self.wfile.write(payload)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout test); nothing to deliver

            def log_message(self, format: str, *args: object) -> None:
                pass

        return Handler


@pytest.fixture
def stub_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[StubServer]:
    # A proxy from the environment must not capture loopback traffic, and SDK
    # environment defaults must not redirect the clients elsewhere.
    for name in (
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "ALL_PROXY",
        "http_proxy",
        "https_proxy",
        "all_proxy",
        "OPENAI_BASE_URL",
        "GOOGLE_GENAI_USE_VERTEXAI",
        "GOOGLE_GENAI_USE_ENTERPRISE",
        "GOOGLE_GENAI_API_VERSION",
        "GOOGLE_GENAI_HTTP_CLIENT",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")
    server = StubServer()
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def payload() -> Callable[[str], Any]:
    """``fixtures/<name>.json``: a response body in the provider's documented shape."""

    def load(name: str) -> Any:
        return json.loads((FIXTURES / f"{name}.json").read_text())

    return load

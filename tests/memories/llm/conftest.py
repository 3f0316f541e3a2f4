"""A loopback HTTP stub that stands in for the OpenAI, Anthropic and Gemini APIs.

The real SDKs run against it; it answers with payloads in each API's documented
shape (``fixtures/*.json``) and records every request it receives.
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
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]  # lower-cased names
    body: Any


@dataclass(frozen=True)
class StubReply:
    status: int
    body: Any
    delay: float = 0.0


@dataclass
class StubServer:
    """Serves scripted replies in order; a request with nothing scripted gets 599."""

    replies: deque[StubReply] = field(default_factory=deque)
    requests: list[RecordedRequest] = field(default_factory=list)
    # Set at teardown so handlers still "sleeping" for a timeout test end at once.
    released: threading.Event = field(default_factory=threading.Event)
    port: int = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def reply(self, status: int, body: Any, *, delay: float = 0.0) -> None:
        self.replies.append(StubReply(status, body, delay))


def _handler_for(stub: StubServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length)
            stub.requests.append(
                RecordedRequest(
                    method="POST",
                    path=self.path,
                    headers={name.lower(): value for name, value in self.headers.items()},
                    body=json.loads(raw) if raw else None,
                )
            )
            reply = stub.replies.popleft() if stub.replies else StubReply(599, {"error": {"message": "stub: nothing scripted"}})
            if reply.delay:
                stub.released.wait(reply.delay)
            payload = json.dumps(reply.body).encode()
            try:
                self.send_response(reply.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)
            except (BrokenPipeError, ConnectionResetError):
                # The client gave up (the timeout tests); nothing to answer.
                pass

        def log_message(self, format: str, *args: Any) -> None:
            # Keep pytest output clean; requests are asserted, not logged.
            pass

    return Handler


@pytest.fixture
def stub() -> Iterator[StubServer]:
    state = StubServer()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(state))
    state.port = server.server_address[1]
    # A short poll interval keeps shutdown (and so each test's teardown) fast.
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        state.released.set()
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


@pytest.fixture(autouse=True)
def _loopback_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """Keep a developer's proxy or SDK environment out of the way of the stub."""
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")
    for name in ("GOOGLE_GENAI_USE_VERTEXAI", "GOOGLE_GENAI_USE_ENTERPRISE", "OPENAI_CUSTOM_HEADERS"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def payload() -> Callable[[str], Any]:
    """Load ``fixtures/<name>.json``, a response in the provider's documented shape."""

    def load(name: str) -> Any:
        return json.loads((FIXTURES / f"{name}.json").read_text())

    return load

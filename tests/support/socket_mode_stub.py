"""A loopback stand-in for Slack's Socket Mode WebSocket endpoint (the ``websockets`` package's
sync server): greets each connection with ``hello`` as Slack does, pushes envelopes, records the
acknowledgements it receives and can ask the client to reconnect (a ``disconnect`` envelope)."""

from __future__ import annotations

import contextlib
import json
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.server import Server, ServerConnection, serve


class SocketModeStub:
    def __init__(self) -> None:
        self.connections = 0
        self.acks: list[str] = []
        self._current: ServerConnection | None = None
        self._lock = threading.Lock()
        self._server: Server = serve(self._handle, "127.0.0.1", 0)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"ws://127.0.0.1:{self._server.socket.getsockname()[1]}/link/?ticket={uuid.uuid4()}&app_id=A111"

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._thread.join(timeout=5)

    def _handle(self, connection: ServerConnection) -> None:
        with self._lock:
            self.connections += 1
            self._current = connection
        connection.send(
            json.dumps(
                {
                    "type": "hello",
                    "num_connections": 1,
                    "debug_info": {"host": "applink-stub", "build_number": 1, "approximate_connection_time": 18060},
                    "connection_info": {"app_id": "A111"},
                }
            )
        )
        # Iteration ends when the client closes (or drops) the connection; the next one takes over.
        with contextlib.suppress(ConnectionClosed):
            for raw in connection:
                message = json.loads(raw)
                if "envelope_id" in message:
                    with self._lock:
                        self.acks.append(message["envelope_id"])

    def send_event(self, payload: dict[str, Any], *, retry_attempt: int = 0) -> str:
        """Push an ``events_api`` envelope around an Events API body; returns its envelope id."""
        envelope_id = str(uuid.uuid4())
        envelope = {
            "envelope_id": envelope_id,
            "payload": payload,
            "type": "events_api",
            "accepts_response_payload": False,
            "retry_attempt": retry_attempt,
            "retry_reason": "timeout" if retry_attempt else "",
        }
        self._connection().send(json.dumps(envelope))
        return envelope_id

    def ask_to_reconnect(self) -> None:
        self._connection().send(
            json.dumps({"type": "disconnect", "reason": "refresh_requested", "debug_info": {"host": "applink-stub"}})
        )

    def wait_for(self, predicate: Any, timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if predicate():
                return
            time.sleep(0.05)
        raise AssertionError("the Socket Mode stub waited in vain")

    def _connection(self) -> ServerConnection:
        self.wait_for(lambda: self._current is not None)
        assert self._current is not None
        return self._current


@pytest.fixture
def socket_mode_stub() -> Iterator[SocketModeStub]:
    stub = SocketModeStub()
    stub.start()
    try:
        yield stub
    finally:
        stub.stop()

"""The leak suite's fixtures: the world built once for this package (committed, so the live MCP server
in a thread of this process reads it too), emptied again when the package is done; the live server.

Tests run inside pytest-django's per-test transaction (`db`): what they write is rolled back and the
world stays as built. The server's own writes (audit events of MCP calls) commit; the teardown
flushes every table, as a transactional test's teardown does. Tests here that build their own data
(the `acme` fixture) run beside the world and look only at their own organization.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import uvicorn
from django.core.management import call_command


@pytest.fixture(scope="package")
def world(django_db_setup: Any, django_db_blocker: Any) -> Iterator[Any]:
    from hardening.leaks.world import build_world

    with django_db_blocker.unblock():
        try:
            built = build_world()
        except BaseException:
            call_command("flush", verbosity=0, interactive=False, allow_cascade=True)
            raise
    yield built
    with django_db_blocker.unblock():
        call_command("flush", verbosity=0, interactive=False, allow_cascade=True)


@pytest.fixture(scope="session")
def leak_server_url() -> Iterator[str]:
    """The real ASGI app (Django + MCP) on a loopback port, as tests/mcp runs it."""
    from cortex_site.asgi import create_application

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(create_application(), lifespan="on", log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True, name="leak-test-server")
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the leak suite's ASGI server did not start")
        time.sleep(0.02)
    yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    server.should_exit = True
    thread.join(timeout=10)
    sock.close()


@pytest.fixture(autouse=True)
def _no_bad_token_budget(settings: Any) -> None:
    # Expired and revoked tokens are asked hundreds of questions on purpose: the per-address budget of
    # bad tokens (tested in tests/memories) would turn their answers into 429s halfway through.
    settings.CORTEX_LOGIN_FAILURES_PER_ADDRESS = 1_000_000
    settings.CORTEX_LOGIN_FAILURES_PER_ACCOUNT = 1_000_000

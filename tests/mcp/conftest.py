"""A real Cortex ASGI app (Django + MCP) on a loopback port, and the official MCP client to talk to it.

The server runs uvicorn in a thread of the test process, so it uses the test database; tests
that talk to it must commit their data (`django_db(transaction=True)`).
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpx2
import pytest
import uvicorn
from mcp import ClientSession
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult
from support import remember


@pytest.fixture(scope="session")
def server_url() -> Iterator[str]:
    from cortex_site.asgi import create_application

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(create_application(), lifespan="on", log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True, name="mcp-test-server")
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the test ASGI server did not start")
        time.sleep(0.02)
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(timeout=10)
    sock.close()


def http_client(token: str | None, **headers: str) -> httpx2.AsyncClient:
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    return httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30.0))


class McpTestClient:
    """The official MCP client against the test server, for synchronous tests."""

    def __init__(self, server_url: str) -> None:
        self.server_url = server_url
        self.url = f"{server_url}/mcp/"

    @asynccontextmanager
    async def connect(self, token: str | None, *, mode: str = "legacy", **headers: str) -> AsyncIterator[Client]:
        """An initialized `mcp.Client` over Streamable HTTP with `Authorization: Bearer <token>`."""
        async with (
            http_client(token, **headers) as http,
            Client(streamable_http_client(self.url, http_client=http), mode=mode) as client,
        ):
            yield client

    @asynccontextmanager
    async def session(self, token: str | None, **headers: str) -> AsyncIterator[ClientSession]:
        """A ClientSession over the transport, not initialized yet (the test picks the protocol version)."""
        async with (
            http_client(token, **headers) as http,
            streamable_http_client(self.url, http_client=http) as (read, write),
            ClientSession(read, write) as session,
        ):
            yield session

    def run(self, flow: Callable[[], Awaitable[Any]]) -> Any:
        """Run an async client flow from a synchronous test (which owns the database)."""
        return anyio.run(flow)

    def call(self, token: str, name: str, **arguments: Any) -> CallToolResult:
        """One tool call over a fresh connection."""

        async def flow() -> CallToolResult:
            async with self.connect(token) as client:
                return await client.call_tool(name, arguments)

        return self.run(flow)


@pytest.fixture
def mcp_client(server_url: str) -> McpTestClient:
    return McpTestClient(server_url)


@pytest.fixture
def runners(make_org: Callable[..., Any], make_scope: Callable[..., Any], make_member: Callable[..., Any]) -> dict[str, Any]:
    """Acme with an engineering scope, an Executive admin and an Employee granted it, and one memory
    the admin wrote there (the tool tests' small world; each adds the tokens it needs)."""
    org = make_org("acme", "Acme Robotics")
    make_scope(org, "engineering")
    admin = make_member(org, "Executive", admin=True, grants={"engineering": True})
    employee = make_member(org, "Employee", grants={"engineering": True})
    memory = remember(admin, "CI runners have 4 cores.", title="Runner size", scope="engineering")
    return {"memory": memory, "admin": admin, "employee": employee}

"""How the suite talks to each channel as one principal: `ask(call) -> Answer` for REST, the browser and MCP."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio
import httpx2
from django.test import Client
from mcp.client import Client as McpClient
from mcp.client.streamable_http import streamable_http_client

from hardening.leaks.surfaces import OK, TOOL_ERROR, Answer, json_text
from hardening.leaks.world import Who, World
from memories.sessions import SESSION_ORGANIZATION_KEY

Ask = Callable[[tuple[Any, ...]], Answer]


def _body(response: Any) -> str:
    raw = b"".join(response.streaming_content) if getattr(response, "streaming", False) else response.content
    text = raw.decode("utf-8", errors="replace")
    for header in ("Location", "Content-Disposition", "HX-Redirect", "HX-Trigger"):
        if response.has_header(header):
            text += f"\n{header}: {response[header]}"
    return text


def rest(who: Who) -> Ask:
    client = Client()
    headers = {"Authorization": f"Bearer {who.secret}"} if who.secret else {}

    def ask(call: tuple[Any, ...]) -> Answer:
        method, path, data = call
        if method == "GET":
            response = client.get(path, data, headers=headers)
        else:
            send = {"POST": client.post, "PATCH": client.patch, "DELETE": client.delete}[method]
            response = send(path, data, content_type="application/json", headers=headers)
        return Answer(response.status_code, _body(response), response.get("X-Request-ID", ""))

    return ask


def browser(world: World, who: Who) -> Ask:
    client = Client()
    client.force_login(world.members[f"{who.org}:{who.name.split('@')[0]}"].user)
    if who.name == "dual@globex":
        switched = client.post("/org/switch", {"organization": "leak-globex"})
        assert switched.status_code == 302, switched.status_code
    if who.name == "split@acme":
        # The session still names the organization whose membership was deactivated.
        session = client.session
        session[SESSION_ORGANIZATION_KEY] = world.orgs["acme"].pk
        session.save()

    def ask(call: tuple[Any, ...]) -> Answer:
        path, query, *headers = call
        # Followed as a browser does: a redirect's flash message is shown (and consumed) by the page it
        # leads to, not by whatever page the suite asks for next.
        response = client.get(path, query or {}, follow=True, headers=headers[0] if headers else None)
        return Answer(response.status_code, _body(response), response.get("X-Request-ID", ""))

    return ask


def _tool_answer(result: Any) -> Answer:
    structured = result.structured_content or {}
    texts = [getattr(block, "text", "") for block in result.content]
    request_id = structured.get("request_id", "") if isinstance(structured, dict) else ""
    return Answer(TOOL_ERROR if result.is_error else OK, json_text(structured) + "\n" + "\n".join(texts), request_id)


def mcp_calls(server_url: str, who: Who, calls: list[tuple[Any, ...]]) -> list[Answer]:
    """Every call on one MCP connection (the official client over Streamable HTTP), answers in order."""

    async def flow() -> list[Answer]:
        headers = {"Authorization": f"Bearer {who.secret}"}
        async with (
            httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30.0)) as http,
            McpClient(streamable_http_client(f"{server_url}/mcp/", http_client=http)) as client,
        ):
            return [_tool_answer(await client.call_tool(tool, arguments)) for tool, arguments in calls]

    return anyio.run(flow)


def mcp_refused(server_url: str, who: Who) -> Answer:
    """What the MCP endpoint answers a token that may not connect (expired, revoked, deactivated)."""
    response = httpx2.post(
        f"{server_url}/mcp/",
        headers={"Authorization": f"Bearer {who.secret}", "Accept": "application/json, text/event-stream"},
        json={
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "leaks", "version": "1"}},
        },
        timeout=30.0,
    )
    return Answer(response.status_code, response.text + "\n" + response.headers.get("WWW-Authenticate", ""))

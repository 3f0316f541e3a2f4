"""A light load generator for the webhook benchmarks: POSTs over keep-alive HTTP/1.1 connections from
one asyncio loop, each request's bytes built (and signed) before the burst starts.

Why not httpx on a thread pool (what the benchmarks used until 2026-12-06): the sender shares the
server's two cores here, and 20 httpx threads in one process cost ~3 ms of CPU per request and
queued on their own GIL — time the client spent was counted as the server's answer time. GitHub
and Slack send from their own machines; this client costs a few tens of microseconds per request,
so what the latency measures is the server.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping, Sequence
from urllib.parse import urlsplit


def request_bytes(url: str, body: bytes, headers: Mapping[str, str]) -> bytes:
    """One complete HTTP/1.1 POST of `body` to `url` (keep-alive)."""
    parts = urlsplit(url)
    path = parts.path + (f"?{parts.query}" if parts.query else "")
    lines = [f"POST {path} HTTP/1.1", f"Host: {parts.netloc}", f"Content-Length: {len(body)}"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


async def _read_response(reader: asyncio.StreamReader) -> tuple[int, bool]:
    """The status of one response, its body read and discarded; and whether the server keeps the connection."""
    head = await reader.readuntil(b"\r\n\r\n")
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    status = int(status_line.split(" ", 2)[1])
    headers = {}
    for line in header_lines:
        if ":" in line:
            name, value = line.split(":", 1)
            headers[name.strip().lower()] = value.strip()
    if "content-length" in headers:
        await reader.readexactly(int(headers["content-length"]))
    elif headers.get("transfer-encoding", "").lower() == "chunked":
        while True:
            size = int((await reader.readuntil(b"\r\n")).split(b";", 1)[0], 16)
            await reader.readexactly(size + 2)  # the chunk and its CRLF
            if size == 0:
                break
    return status, headers.get("connection", "").lower() != "close"


async def _burst(url: str, requests: Sequence[bytes], concurrency: int, keep_alive: bool) -> list[tuple[float, str]]:
    parts = urlsplit(url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 80
    outcomes: list[tuple[float, str]] = [(0.0, "")] * len(requests)
    pending = iter(range(len(requests)))

    async def lane() -> None:
        connection: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
        for index in pending:  # one iterator shared by every lane: each request is sent once
            started = time.perf_counter()
            try:
                if connection is None:
                    connection = await asyncio.open_connection(host, port)
                reader, writer = connection
                writer.write(requests[index])
                await writer.drain()
                status, keep = await _read_response(reader)
                outcome = str(status)
            except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError) as error:
                # Counted, not hidden: the source would show it as a failed delivery.
                outcome, keep = type(error).__name__, False
            outcomes[index] = ((time.perf_counter() - started) * 1000, outcome)
            if not (keep and keep_alive) and connection is not None:
                connection[1].close()
                connection = None
        if connection is not None:
            connection[1].close()

    await asyncio.gather(*(lane() for _ in range(concurrency)))
    return outcomes


def post_burst(url: str, requests: Sequence[bytes], concurrency: int, *, keep_alive: bool = True) -> list[tuple[float, str]]:
    """Send every request (from `request_bytes`) with `concurrency` in flight at once; for each, in
    order, the milliseconds from its first byte sent to its answer read (a new connection's connect
    included), and its status (or the error's name).

    With `keep_alive` each of the `concurrency` connections carries request after request, and stays
    with the web process that accepted it (docs/benchmarks.md: before each web process had a
    listening socket of its own, one of them could take most of a burst's connections). Without it
    every request has a connection of its own."""
    return asyncio.run(_burst(url, requests, concurrency, keep_alive))

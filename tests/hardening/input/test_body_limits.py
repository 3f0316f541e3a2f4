"""Bodies over their limit are never read whole: the ASGI layer in front of Django (what `make run`
serves) stops them, declared or chunked, and the bounded child runner caps what parsing may use."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from hardening.input import hostile_files as hostile

from memories.services.bounded import LimitExceeded, run_bounded

MIB = 1024 * 1024


@pytest.fixture(scope="module")
def application() -> Any:
    from cortex_site.asgi import create_application

    return create_application()


def call(app: Any, path: str, *, headers: list[tuple[bytes, bytes]], chunks: int | None = None) -> dict[str, Any]:
    """POST through the ASGI app; `chunks` 64 KiB pieces of body are offered (None: reading fails the test)."""
    offered = {"count": 0}
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        if chunks is None:
            raise AssertionError("the body was read")
        offered["count"] += 1
        more = offered["count"] < chunks
        return {"type": "http.request", "body": b"x" * 65536, "more_body": more}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "root_path": "",
        "query_string": b"",
        "headers": [(b"host", b"127.0.0.1"), *headers],
        "client": ("127.0.0.1", 5000),
        "server": ("127.0.0.1", 8000),
    }
    asyncio.run(app(scope, receive, send))
    start = next(m for m in sent if m["type"] == "http.response.start")
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return {
        "status": start["status"],
        "headers": {name.lower(): value for name, value in start["headers"]},
        "json": json.loads(body),
        "offered": offered["count"],
    }


@pytest.mark.django_db(transaction=True)
def test_a_declared_oversized_body_is_answered_413_without_reading_it(application: Any) -> None:
    answer = call(application, "/api/memories", headers=[(b"content-length", str(30 * MIB).encode())])
    assert answer["status"] == 413 and answer["json"]["error_code"] == "PAYLOAD_TOO_LARGE"
    assert answer["json"]["request_id"] == answer["headers"][b"x-request-id"].decode()
    upload = call(
        application,
        "/memories/upload/",
        headers=[(b"content-length", str(30 * MIB).encode()), (b"accept", b"application/json")],
    )
    assert upload["status"] == 413 and upload["json"]["details"]["limit"] == 11 * MIB


@pytest.mark.django_db(transaction=True)
def test_a_chunked_body_is_read_only_up_to_the_limit(application: Any) -> None:
    # 2 MiB is 32 chunks of 64 KiB: the 33rd goes over, and nothing after it is asked for.
    answer = call(application, "/api/memories", headers=[(b"content-type", b"application/json")], chunks=10_000)
    assert answer["status"] == 413 and answer["json"]["error_code"] == "PAYLOAD_TOO_LARGE"
    assert answer["offered"] == 33


@pytest.mark.django_db(transaction=True)
def test_the_mcp_endpoint_is_refused_in_front_of_the_sdk(application: Any) -> None:
    answer = call(application, "/mcp/", headers=[(b"content-length", str(30 * MIB).encode())])
    assert answer["status"] == 413 and answer["json"]["error_code"] == "PAYLOAD_TOO_LARGE"


def test_the_child_runner_returns_results_and_reraises_what_the_function_raised() -> None:
    assert run_bounded(hostile.hog_memory, (1,), memory_bytes=512 * MIB, cpu_seconds=5, wall_seconds=10) == MIB
    with pytest.raises(LookupError, match="nothing here"):
        run_bounded(hostile.refuse, ("nothing here",), memory_bytes=512 * MIB, cpu_seconds=5, wall_seconds=10)


def test_the_child_runner_stops_a_function_that_takes_too_much_memory() -> None:
    with pytest.raises(LimitExceeded) as caught:
        run_bounded(hostile.hog_memory, (1024,), memory_bytes=256 * MIB, cpu_seconds=5, wall_seconds=10)
    assert caught.value.reason == "memory"


def test_the_child_runner_stops_a_function_that_never_ends() -> None:
    with pytest.raises(LimitExceeded) as caught:
        run_bounded(hostile.spin_forever, (), memory_bytes=256 * MIB, cpu_seconds=1, wall_seconds=5)
    assert caught.value.reason == "time"

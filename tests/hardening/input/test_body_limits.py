"""Bodies over their limit are never read whole: the ASGI layer in front of Django (what `make run`
serves) stops them, declared or chunked, and the bounded child runner caps what parsing may use."""

from __future__ import annotations

from typing import Any

import pytest
from hardening.input import hostile_files as hostile
from support.asgi_client import asgi_post

from memories.services.bounded import LimitExceeded, run_bounded

MIB = 1024 * 1024


@pytest.fixture(scope="module")
def application() -> Any:
    from cortex_site.asgi import create_application

    return create_application()


@pytest.mark.django_db(transaction=True)
def test_a_declared_oversized_body_is_answered_413_without_reading_it(application: Any) -> None:
    answer = asgi_post(application, "/api/memories", headers=[(b"content-length", str(30 * MIB).encode())])
    assert answer["status"] == 413 and answer["json"]["error_code"] == "PAYLOAD_TOO_LARGE"
    assert answer["json"]["request_id"] == answer["headers"][b"x-request-id"].decode()
    upload = asgi_post(
        application,
        "/memories/upload/",
        headers=[(b"content-length", str(30 * MIB).encode()), (b"accept", b"application/json")],
    )
    assert upload["status"] == 413 and upload["json"]["details"]["limit"] == 11 * MIB


@pytest.mark.django_db(transaction=True)
def test_a_chunked_body_is_read_only_up_to_the_limit(application: Any) -> None:
    # 2 MiB is 32 chunks of 64 KiB: the 33rd goes over, and nothing after it is asked for.
    answer = asgi_post(application, "/api/memories", headers=[(b"content-type", b"application/json")], chunks=10_000)
    assert answer["status"] == 413 and answer["json"]["error_code"] == "PAYLOAD_TOO_LARGE"
    assert answer["offered"] == 33


@pytest.mark.django_db(transaction=True)
def test_the_mcp_endpoint_is_refused_in_front_of_the_sdk(application: Any) -> None:
    answer = asgi_post(application, "/mcp/", headers=[(b"content-length", str(30 * MIB).encode())])
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

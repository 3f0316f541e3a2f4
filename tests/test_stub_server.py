"""The shared loopback stub: routes, ordered answers, recording, and the failure shapes tests script."""

from __future__ import annotations

import json
import time
from pathlib import Path

import httpx
import pytest
from support.stub_server import StubResponse, StubServer


def test_routes_answer_in_order_then_the_last_repeats_and_everything_is_recorded(stub_server: StubServer) -> None:
    stub_server.route("POST", "/api/thing", StubResponse(json={"n": 1}), StubResponse(json={"n": 2}))
    with httpx.Client(base_url=stub_server.url) as client:
        answers = [client.post("/api/thing?x=1", data={"token": "t", "a": "b"}).json()["n"] for _ in range(3)]
    assert answers == [1, 2, 2]
    first = stub_server.received[0]
    assert (first.method, first.path, first.query) == ("POST", "/api/thing", {"x": "1"})
    assert first.form() == {"token": "t", "a": "b"}
    assert first.params() == {"x": "1", "token": "t", "a": "b"}
    assert len(stub_server.requests_to("/api/thing")) == 3


def test_regex_paths_methods_and_unrouted_requests(stub_server: StubServer) -> None:
    stub_server.route("GET", r"/repos/[^/]+/issues", StubResponse(json=[]))
    with httpx.Client(base_url=stub_server.url) as client:
        assert client.get("/repos/acme/issues").json() == []
        assert client.post("/repos/acme/issues").status_code == 599  # method is part of the route
        missing = client.get("/nowhere")
    assert missing.status_code == 599
    assert "GET /nowhere" in missing.json()["error"]


def test_rate_limit_server_error_and_callable_answers(stub_server: StubServer) -> None:
    stub_server.route(
        "GET",
        "/x",
        StubResponse(status=429, headers={"Retry-After": "7"}),
        StubResponse(status=503, body=b"down"),
        lambda request: StubResponse(json={"echo": request.query["q"]}),
    )
    with httpx.Client(base_url=stub_server.url) as client:
        limited = client.get("/x")
        assert (limited.status_code, limited.headers["retry-after"]) == (429, "7")
        assert (client.get("/x").status_code, client.get("/x?q=hi").json()) == (503, {"echo": "hi"})


def test_slow_answers_provoke_client_timeouts(stub_server: StubServer) -> None:
    stub_server.route("GET", "/slow", StubResponse(json={}, delay=2.0))
    started = time.monotonic()
    with httpx.Client(base_url=stub_server.url, timeout=0.2) as client, pytest.raises(httpx.ReadTimeout):
        client.get("/slow")
    assert time.monotonic() - started < 1.5


def test_a_recorded_payload_is_served_byte_for_byte(stub_server: StubServer, tmp_path: Path) -> None:
    recorded = tmp_path / "history.json"
    recorded.write_bytes(b'{"ok": true,  "messages": []}\n')
    stub_server.route_json_file("POST", "/api/conversations.history", recorded)
    with httpx.Client(base_url=stub_server.url) as client:
        response = client.post("/api/conversations.history")
    assert response.content == recorded.read_bytes()
    assert json.loads(response.content) == {"ok": True, "messages": []}

"""Reading: GET /api/memories (filters, cursor pagination, history), GET /api/memories/{id}, with outsiders."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from support import assert_envelope, imported


def _remember(client: Any, **body: Any) -> dict[str, Any]:
    response = client.post("/api/memories", body)
    assert response.status_code == 201, response.content
    return response.json()


@pytest.mark.django_db
def test_list_is_newest_first_and_paginates_by_opaque_cursor(acme: dict[str, Any], api: Any) -> None:
    client = api(acme["employee"])
    created = [_remember(client, content=f"note number {i}")["id"] for i in range(7)]
    first = client.get("/api/memories", {"limit": 3}).json()
    assert [m["id"] for m in first["results"]] == created[::-1][:3]
    assert first["next"] and "cursor=" in first["next"]
    second = client.get(first["next"]).json()
    third = client.get(second["next"]).json()
    seen = [m["id"] for page in (first, second, third) for m in page["results"]]
    assert seen == created[::-1]
    assert third["next"] is None


@pytest.mark.django_db
def test_list_query_count_does_not_grow_with_the_page(acme: dict[str, Any], api: Any) -> None:
    client = api(acme["employee"])
    for i in range(3):
        _remember(client, content=f"small page {i}")
    with CaptureQueriesContext(connection) as small:
        client.get("/api/memories", {"limit": 50})
    for i in range(20):
        _remember(client, content=f"big page {i}")
    with CaptureQueriesContext(connection) as big:
        client.get("/api/memories", {"limit": 50})
    assert len(big.captured_queries) == len(small.captured_queries)


@pytest.mark.django_db
def test_list_filters(acme: dict[str, Any], api: Any) -> None:
    client = api(acme["manager"])
    a = _remember(client, content="a", scope="engineering", category="policy", tags=["security"], source="GitHub")
    b = _remember(client, content="b", scope="sales", category="decision", tags=["pricing"])
    c = {"id": str(imported(acme["employee"], "c", author_name="Grace Hopper").pk)}
    ids = lambda **q: {m["id"] for m in client.get("/api/memories", q).json()["results"]}  # noqa: E731
    assert ids(scope="engineering") == {a["id"]}
    assert ids(category="decision") == {b["id"]}
    assert ids(tag="security") == {a["id"]}
    assert ids(source="github") == {a["id"]}
    assert ids(author="Grace Hopper") == {c["id"]}
    assert ids(author=acme["manager"].user.email) == {a["id"], b["id"]}
    assert_envelope(client.get("/api/memories", {"status": "deleted"}), 400, "INVALID_STATUS")


@pytest.mark.django_db
def test_status_filter_shows_history(acme: dict[str, Any], api: Any) -> None:
    client = api(acme["employee"])
    old = _remember(client, content="v1")
    new = client.post(f"/api/memories/{old['id']}/supersede", {"content": "v2"}).json()
    gone = _remember(client, content="to redact")
    client.post(f"/api/memories/{gone['id']}/redact", {"reason": "r"})
    ids = lambda status: [m["id"] for m in client.get("/api/memories", {"status": status}).json()["results"]]  # noqa: E731
    assert ids("active") == [new["id"]]
    assert ids("superseded") == [old["id"]]
    assert ids("redacted") == [gone["id"]]
    assert set(ids("all")) == {old["id"], new["id"], gone["id"]}


@pytest.mark.django_db
def test_detail_has_chunk_count_history_and_citation(acme: dict[str, Any], api: Any) -> None:
    client = api(acme["employee"])
    long = "\n\n".join(f"Paragraph {i} about the dock controller firmware and its retry policy. " * 6 for i in range(10))
    memory = _remember(client, title="Dock firmware", content=long, source_url="https://wiki.acme.test/dock")
    body = client.get(f"/api/memories/{memory['id']}").json()
    assert body["chunk_count"] > 1
    assert body["history"] == [
        {"id": memory["id"], "title": "Dock firmware", "status": "active", "valid_from": memory["valid_from"]}
    ]
    assert body["citation"]["source_url"] == "https://wiki.acme.test/dock"
    assert body["conflicts"] == []


@pytest.mark.django_db
def test_history_hides_versions_the_reader_cannot_see(acme: dict[str, Any], api: Any) -> None:
    exec_client = api(acme["exec"])
    v1 = _remember(exec_client, content="Budget is $1M.", scope="engineering")
    v2 = exec_client.post(
        f"/api/memories/{v1['id']}/supersede", {"content": "Budget is $2M (board only).", "clearance_min": "Executive"}
    ).json()
    history = api(acme["employee"]).get(f"/api/memories/{v1['id']}").json()["history"]
    assert [h["id"] for h in history] == [v1["id"]]
    assert v2["id"] not in str(api(acme["employee"]).get("/api/memories", {"status": "all"}).json())


@pytest.mark.django_db
@pytest.mark.parametrize("who", ["outsider", "contractor-too-low", "employee-no-grant"])
def test_invisible_memory_detail_is_404_identical_to_missing(who: str, acme: dict[str, Any], outsider: Any, api: Any) -> None:
    exec_client = api(acme["exec"])
    secret_exec = _remember(exec_client, content="Executive-only memo.", scope="engineering", clearance_min="Executive")
    sales = _remember(exec_client, content="Sales-only memo.", scope="sales")
    reader, target = {
        "outsider": (outsider, sales),
        "contractor-too-low": (acme["contractor"], secret_exec),
        "employee-no-grant": (acme["employee"], sales),
    }[who]
    client = api(reader)
    invisible = assert_envelope(client.get(f"/api/memories/{target['id']}"), 404, "NOT_FOUND")
    missing = assert_envelope(client.get("/api/memories/7c1c1c1c-0000-4000-8000-000000000000"), 404, "NOT_FOUND")
    malformed = assert_envelope(client.get("/api/memories/not-a-uuid"), 404, "NOT_FOUND")
    assert invisible["message"] == missing["message"] == malformed["message"]
    assert target["id"] not in str(client.get("/api/memories", {"status": "all"}).json())


@pytest.mark.django_db
def test_outsider_lists_nothing_of_another_organization(acme: dict[str, Any], outsider: Any, api: Any) -> None:
    _remember(api(acme["exec"]), content="Acme public note.")
    assert api(outsider).get("/api/memories").json() == {"results": [], "next": None}
    assert api(outsider).post("/api/recall", {"query": "Acme public note"}).json()["results"] == []

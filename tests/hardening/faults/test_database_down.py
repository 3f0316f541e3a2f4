"""PostgreSQL failing under a request: a clean 503 (507 when its volume is full) in the error
envelope, nothing half-written, and the next request works again without anyone stepping in.

The failures are PostgreSQL's own, injected through Django's `connection.execute_wrapper`:
the request's server process is terminated (what a stopped or restarted server does to its
connections) just before the write inserts its chunks, or the chunk INSERT is replaced by a
statement on which the server raises SQLSTATE 53100 `disk_full` — the code PostgreSQL reports for
"could not extend file: No space left on device". bench/reliability/r50_faults.py does the same
with a real stop of the server and a really full volume.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
import pytest
from django.db import connection

from audit.models import AuditEvent
from memories.models import Memory, MemoryChunk

pytestmark = pytest.mark.django_db(transaction=True)

# The pipeline writes a batch's chunks in one hand-written statement (unquoted table name).
CHUNK_INSERT = re.compile(r'\s*INSERT INTO "?memories_memorychunk"?\s')


def _terminate_backend(pid: int) -> None:
    # From a second session, as an administrator (or a server shutdown) would.
    params = connection.get_connection_params()
    with psycopg.connect(**params, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", [pid])


@contextmanager
def failing_chunk_insert(kind: str) -> Iterator[list[str]]:
    """The next chunk INSERT of this connection fails: `killed` (the server ends the session) or
    `disk_full` (the server answers SQLSTATE 53100). Yields the statements that failed."""
    failed: list[str] = []

    def wrapper(execute: Callable[..., Any], sql: str, params: Any, many: bool, context: dict[str, Any]) -> Any:
        if failed or not CHUNK_INSERT.match(sql):
            return execute(sql, params, many, context)
        failed.append(sql)
        if kind == "killed":
            _terminate_backend(context["connection"].connection.info.backend_pid)
            return execute(sql, params, many, context)
        return execute(
            "DO $$ BEGIN RAISE EXCEPTION 'could not extend file: No space left on device' USING ERRCODE = 'disk_full'; END $$",
            None,
            False,
            context,
        )

    with connection.execute_wrapper(wrapper):
        yield failed


def _counts() -> tuple[int, int, int]:
    return Memory.objects.count(), MemoryChunk.objects.count(), AuditEvent.objects.filter(action="memory.create").count()


def test_connection_lost_in_the_middle_of_a_write_answers_503_and_stores_nothing(
    acme: dict[str, Any], api: Callable[..., Any]
) -> None:
    eve = api(acme["employee"])
    before = _counts()
    with failing_chunk_insert("killed") as failed:
        answer = eve.post("/api/memories", {"content": "Rotate the signing keys every quarter.", "scope": "engineering"})
    assert failed, "the write never reached its chunk INSERT"
    assert answer.status_code == 503, answer.content
    body = answer.json()
    assert body["error_code"] == "SERVICE_UNAVAILABLE"
    assert body["details"] == {"service": "database"}
    assert body["request_id"] and body["request_id"] == answer["X-Request-ID"]
    assert answer["Retry-After"] == "5"
    # The memory row was inserted before the chunks: the transaction took it away with it.
    assert _counts() == before
    # Recovery without manual steps: the same request again is stored (Django opens a new connection).
    again = eve.post("/api/memories", {"content": "Rotate the signing keys every quarter.", "scope": "engineering"})
    assert again.status_code == 201, again.content
    assert _counts() == (before[0] + 1, before[1] + 1, before[2] + 1)


def test_full_database_volume_refuses_the_write_with_507_and_stores_nothing(
    acme: dict[str, Any], api: Callable[..., Any]
) -> None:
    eve = api(acme["employee"])
    before = _counts()
    with failing_chunk_insert("disk_full") as failed:
        answer = eve.post("/api/memories", {"content": "The on-call rota changes on Mondays.", "scope": "engineering"})
    assert failed
    assert answer.status_code == 507, answer.content
    body = answer.json()
    assert body["error_code"] == "STORAGE_FULL"
    assert body["request_id"] == answer["X-Request-ID"]
    assert _counts() == before
    assert (
        eve.post("/api/memories", {"content": "The on-call rota changes on Mondays.", "scope": "engineering"}).status_code == 201
    )


@contextmanager
def database_unreachable() -> Iterator[None]:
    """Every new connection fails as with a stopped server (its socket directory is gone)."""
    saved = connection.settings_dict["HOST"]
    connection.close()
    connection.settings_dict["HOST"] = "/nonexistent/cortex-faults"
    try:
        yield
    finally:
        connection.close()
        connection.settings_dict["HOST"] = saved


def test_unreachable_database_answers_503_on_the_api_and_a_page_in_the_browser(
    acme: dict[str, Any], api: Callable[..., Any], client: Any
) -> None:
    eve = api(acme["employee"])
    client.force_login(acme["employee"].user)
    with database_unreachable():
        listed = eve.get("/api/memories")
        written = eve.post("/api/memories", {"content": "Written while the database was down.", "scope": "engineering"})
        page = client.get("/memories/")
    for answer in (listed, written):
        assert answer.status_code == 503, answer.content
        assert answer.json()["error_code"] == "SERVICE_UNAVAILABLE"
        assert answer.json()["request_id"] == answer["X-Request-ID"]
    assert page.status_code == 503
    assert "temporarily unavailable" in page.content.decode()
    assert page["X-Request-ID"] in page.content.decode()
    # Back: the same client and token work again, and the refused write was never stored.
    assert eve.get("/api/memories").status_code == 200
    assert client.get("/memories/").status_code == 200
    assert not Memory.objects.filter(content="Written while the database was down.").exists()


def test_the_outage_answer_is_the_same_for_everyone_and_names_nothing(
    acme: dict[str, Any], outsider: Any, api: Callable[..., Any]
) -> None:
    created = api(acme["employee"]).post("/api/memories", {"content": "Engineering only.", "scope": "engineering"}).json()
    stranger = api(outsider)
    with database_unreachable():
        during = stranger.get(f"/api/memories/{created['id']}")
    assert during.status_code == 503
    assert "Engineering only" not in during.content.decode() and created["id"] not in during.content.decode()
    assert stranger.get(f"/api/memories/{created['id']}").status_code == 404

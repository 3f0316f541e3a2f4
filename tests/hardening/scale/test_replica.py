"""Read replicas against a real streaming standby of the test database.

The standby is made from the embedded PostgreSQL binaries (pg_basebackup -R: standby.signal +
primary_conninfo) and streams the test cluster's WAL. Tests commit (transactional), so what the
primary writes really travels to the replica; lag is made by pausing WAL replay, an outage by
stopping the standby at once.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings as django_settings
from django.db import connections
from django.test.utils import CaptureQueriesContext
from support import remember, signed_in

from cortex_site import db_router
from cortex_site.embedded import EmbeddedPostgres
from cortex_site.embedded_replica import EmbeddedReplica
from cortex_site.settings import replica_database
from memories.models import Membership

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True, databases=["default", "replica"])]


@pytest.fixture(scope="module", autouse=True)
def standby(django_db_setup: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedReplica]:
    """A standby of the test cluster, configured as DATABASES["replica"] as DATABASE_REPLICA_URL would
    (added after the test database was set up, so it keeps its own address instead of mirroring the
    primary's; as a test mirror it is never flushed)."""
    primary = EmbeddedPostgres(Path(os.environ["CORTEX_HOME"]) / "pg")
    base = tmp_path_factory.mktemp("replica")
    os.chmod(base, 0o755)  # noqa: S103 - the PostgreSQL system user must reach its data directory
    replica = EmbeddedReplica(base / "pg", primary=primary)
    replica.start()
    name = connections["default"].settings_dict["NAME"]
    both = {"default": dict(connections["default"].settings_dict), "replica": replica_database(replica.url_for(name))}
    django_settings.DATABASES["replica"] = connections.configure_settings(both)["replica"]
    try:
        yield replica
    finally:
        connections["replica"].close()
        del connections["replica"]
        del django_settings.DATABASES["replica"]
        replica.stop()


@pytest.fixture
def replica(standby: EmbeddedReplica, transactional_db: Any, settings: Any) -> Iterator[EmbeddedReplica]:
    """The standby, replaying, checked before every read, at most a second behind."""
    if not standby.is_running():
        standby.start()
    standby.resume_replay()
    settings.DATABASE_REPLICA_CHECK_SECONDS = 0.0
    settings.DATABASE_REPLICA_MAX_LAG_SECONDS = 1.0
    db_router.health.reset()
    yield standby
    db_router.health.reset()


def replicated(replica: EmbeddedReplica, timeout: float = 15) -> None:
    """Wait until the replica has applied everything the primary committed so far.

    The insert position, not pg_current_wal_lsn(): test clusters run with synchronous_commit=off,
    so a commit record can still sit in the WAL buffers, past the write position."""
    with connections["default"].cursor() as cursor:
        cursor.execute("SELECT pg_current_wal_insert_lsn()::text")
        lsn = cursor.fetchone()[0]
    deadline = time.monotonic() + timeout
    while not replica.caught_up_with(lsn):
        assert time.monotonic() < deadline, "the replica did not catch up"
        time.sleep(0.05)


def on_replica(queries: CaptureQueriesContext, table: str) -> bool:
    return any(table in query["sql"] for query in queries.captured_queries)


@pytest.fixture
def team(make_org: Callable[..., Any], make_member: Callable[..., Membership], make_scope: Callable[..., Any]) -> dict[str, Any]:
    org = make_org("replicated")
    make_scope(org, "engineering")
    return {
        "writer": make_member(org, "Manager", grants={"engineering": True}),
        "reader": make_member(org, "Employee", grants={"engineering": False}),
        "outsider": make_member(make_org("elsewhere"), "Executive", admin=True),
    }


def test_lists_details_and_recall_read_the_replica_but_access_comes_from_the_primary(
    replica: EmbeddedReplica, team: dict[str, Any], api: Callable[..., Any]
) -> None:
    memory = remember(team["writer"], "The staging cluster is rebuilt every Sunday at 02:00 UTC.", scope="engineering")
    replicated(replica)
    reader = api(team["reader"])
    with CaptureQueriesContext(connections["replica"]) as queries:
        listed = reader.get("/api/memories")
        detail = reader.get(f"/api/memories/{memory.id}")
        recalled = reader.post("/api/recall", {"query": "staging cluster rebuilt Sunday"})
        page = signed_in(team["reader"]).get(f"/memories/{memory.id}/")
    assert listed.status_code == 200 and [m["id"] for m in listed.json()["results"]] == [str(memory.id)]
    assert detail.status_code == 200 and detail.json()["title"]
    assert recalled.status_code == 200 and recalled.json()["results"][0]["memory"]["id"] == str(memory.id)
    assert page.status_code == 200 and b"staging cluster" in page.content
    assert on_replica(queries, "memories_memory") and on_replica(queries, "memories_memorychunk")
    # Who may read what is never taken from a replica that could be behind a revocation.
    for table in ("memories_membership", "memories_scopegrant", "memories_apitoken", "django_session"):
        assert not on_replica(queries, table), table


def test_an_outsider_reading_through_the_replica_sees_nothing(
    replica: EmbeddedReplica, team: dict[str, Any], api: Callable[..., Any]
) -> None:
    memory = remember(team["writer"], "Customer Initech renews in March at the old price.", scope="engineering")
    replicated(replica)
    outsider = api(team["outsider"])
    with CaptureQueriesContext(connections["replica"]) as queries:
        listed = outsider.get("/api/memories")
        detail = outsider.get(f"/api/memories/{memory.id}")
        recalled = outsider.post("/api/recall", {"query": "Initech renews March"})
        page = signed_in(team["outsider"]).get(f"/memories/{memory.id}/")
    assert on_replica(queries, "memories_memory")
    assert listed.status_code == 200 and listed.json()["results"] == []
    assert detail.status_code == 404 and detail.json()["error_code"] == "NOT_FOUND"
    assert recalled.status_code == 200 and recalled.json()["results"] == []
    assert page.status_code == 404


def test_the_writer_reads_its_own_write_from_the_primary_while_the_replica_is_behind(
    replica: EmbeddedReplica, team: dict[str, Any], api: Callable[..., Any], settings: Any
) -> None:
    settings.DATABASE_REPLICA_MAX_LAG_SECONDS = 3600.0  # the replica counts as fresh enough: only the pin helps
    writer, reader = api(team["writer"]), api(team["reader"])
    replica.pause_replay()
    created = writer.post("/api/memories", {"content": "Deploy freeze starts on Friday noon.", "scope": "engineering"})
    assert created.status_code == 201
    memory_id = created.json()["id"]
    with CaptureQueriesContext(connections["replica"]) as writer_queries:
        own = writer.get(f"/api/memories/{memory_id}")
        own_list = writer.get("/api/memories")
    assert own.status_code == 200
    assert [m["id"] for m in own_list.json()["results"]] == [memory_id]
    assert not on_replica(writer_queries, "memories_memory")
    # Someone else, not pinned, is served by the (paused) replica, which does not hold it yet.
    assert reader.get(f"/api/memories/{memory_id}").status_code == 404
    replica.resume_replay()
    replicated(replica)
    assert reader.get(f"/api/memories/{memory_id}").status_code == 200


def test_a_replica_behind_the_bound_is_skipped_until_it_catches_up(
    replica: EmbeddedReplica, team: dict[str, Any], api: Callable[..., Any]
) -> None:
    reader = api(team["reader"])
    replica.pause_replay()
    memory = remember(team["writer"], "The on-call rotation moves to Tuesdays.", scope="engineering")
    time.sleep(django_settings.DATABASE_REPLICA_MAX_LAG_SECONDS + 0.3)
    with CaptureQueriesContext(connections["replica"]) as queries:
        listed = reader.get("/api/memories")
    assert [m["id"] for m in listed.json()["results"]] == [str(memory.id)]
    assert not on_replica(queries, "memories_memory")
    assert db_router.health.snapshot().reason.startswith("lagging")

    replica.resume_replay()
    replicated(replica)
    with CaptureQueriesContext(connections["replica"]) as queries:
        listed = reader.get("/api/memories")
    assert [m["id"] for m in listed.json()["results"]] == [str(memory.id)]
    assert on_replica(queries, "memories_memory")


def test_a_replica_that_goes_down_is_skipped_and_the_failed_read_is_served_again_by_the_primary(
    replica: EmbeddedReplica, team: dict[str, Any], api: Callable[..., Any], settings: Any
) -> None:
    memory = remember(team["writer"], "Backups are kept for 35 days.", scope="engineering")
    replicated(replica)
    reader = api(team["reader"])
    # Checks only once a minute: the first request after the outage still believes the replica is up.
    settings.DATABASE_REPLICA_CHECK_SECONDS = 60.0
    with CaptureQueriesContext(connections["replica"]) as queries:
        assert reader.get("/api/memories").status_code == 200
    assert on_replica(queries, "memories_memory")

    replica.kill()
    listed = reader.get("/api/memories")
    assert listed.status_code == 200 and [m["id"] for m in listed.json()["results"]] == [str(memory.id)]
    assert db_router.health.snapshot().reason.startswith("unavailable")
    page = signed_in(team["reader"]).get(f"/memories/{memory.id}/")
    assert page.status_code == 200

    replica.start()
    settings.DATABASE_REPLICA_CHECK_SECONDS = 0.0
    with CaptureQueriesContext(connections["replica"]) as queries:
        assert reader.get(f"/api/memories/{memory.id}").status_code == 200
    assert on_replica(queries, "memories_memory")

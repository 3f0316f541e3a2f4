"""Backup and restore: pg_dump / pg_restore of a running instance, and `cortex export` → `cortex import`.

    .venv/bin/python bench/reliability/r60_backup.py                       # section `backup`
    .venv/bin/python bench/reliability/r60_backup.py --memories 300

One child (bench/reliability/live.py) on a fresh database: an organization with memories in three
scopes at every clearance rung, with tags, validity windows and supersession chains, plus a
redaction, all written through the services (so the audit chain is real). Then, with the web
server and worker up and a client writing over HTTP all along ("a running instance"):

1. **dump**: `pg_dump -Fc` (the embedded PostgreSQL's own binaries) of the live database, restored
   with `pg_restore` into a new empty database. The restored memories must be exactly those of the
   dump's snapshot (exported from a repeatable-read transaction and given to `pg_dump --snapshot`,
   so the script reads the same moment the dump does while writes and post-write work go on), row
   for row — id, scope, clearance, tags, status, valid_from/valid_until, created_at,
   supersedes/superseded_by, content hash — and every memory written before the dump began must be
   there; then `cortex audit verify --all` must pass on the restored database.
2. **export → import**: `cortex export --org --status all` (the operator's JSONL of every memory
   with its supersession links) imported with `cortex import` into a freshly migrated empty
   database where the same organization, scopes and person were created with the CLI. Every active
   memory must come back with its title, content, scope, clearance, tags and validity; every
   superseded version too, with the same links (memories are matched by title and content hash,
   ids differ between the two databases; the redacted one is not imported, so a link to it is
   expected to be empty); and importing the same file again must change nothing.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import threading
import time
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parent))

from live import ROOT, database_url, drive, emit, live, seed, setup_django, step_home
from report import write_section

STEP = "backup"
SCRIPT = Path(__file__).resolve()
SCOPES = ("engineering", "sales", "people")
RUNGS = ("Contractor", "Employee", "Manager", "Executive")

ROW_SQL = """
SELECT m.id::text, s.slug, m.clearance_rank, m.tags, m.status, m.valid_from, m.valid_until, m.created_at,
       m.supersedes_id::text, m.superseded_by_id::text, m.content_hash, m.title
FROM memories_memory m JOIN memories_scope s ON s.id = m.scope_id JOIN memories_organization o ON o.id = m.organization_id
WHERE o.slug = %s
"""


def rows(url: str, slug: str) -> dict[str, tuple[Any, ...]]:
    import psycopg

    with psycopg.connect(url) as conn:
        return read_rows(conn, slug)


def read_rows(conn: Any, slug: str) -> dict[str, tuple[Any, ...]]:
    return {row[0]: row[1:] for row in conn.execute(ROW_SQL, [slug]).fetchall()}


def populate(count: int) -> Any:
    from django.utils import timezone

    from memories.models import Memory
    from memories.services.memories import MemoryDraft, memory_create, memory_redact, memory_supersede

    seeded = seed("backup", scopes=SCOPES)
    now = timezone.now()
    created = []
    for n in range(count):
        draft = MemoryDraft(
            title=f"Backup drill {n}",
            content=f"Decision {n}: the {SCOPES[n % 3]} team keeps runbook R-{n} for service S-{n % 17}.",
            scope=SCOPES[n % 3],
            tags=[f"t{n % 5}", f"svc-{n % 17}"],
            clearance_min=RUNGS[n % 4],
            valid_from=now - timedelta(days=n % 400),
            valid_until=(now + timedelta(days=30 + n)) if n % 7 == 0 else None,
        )
        created.append(memory_create(principal=seeded.principal, draft=draft).memory)
    for memory in created[: count // 10]:  # chains of two and three versions
        newer = memory_supersede(
            principal=seeded.principal, memory_id=memory.pk, changes={"content": memory.content + " Revised."}
        )
        if memory.pk.int % 2:
            memory_supersede(
                principal=seeded.principal, memory_id=newer.memory.pk, changes={"content": memory.content + " Revised twice."}
            )
    memory_redact(principal=seeded.principal, memory_id=created[-1].pk, reason="drill")
    assert Memory.objects.filter(organization=seeded.organization, status=Memory.Status.SUPERSEDED).exists()
    return seeded


def pg(tool: str, *args: str) -> None:
    from cortex_site.embedded import EmbeddedPostgres

    server = EmbeddedPostgres(step_home() / "pg")
    # The embedded server asks for its password (SCRAM); the tools inherit it from the environment.
    os.environ["PGPASSWORD"] = server.password()
    server._run(tool, *args, "--no-password", timeout=600)


def manage(url: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DATABASE_URL": url}
    return subprocess.run([sys.executable, str(ROOT / "manage.py"), *args], env=env, capture_output=True, text=True, check=False)


def phase_backup(count: int) -> dict[str, Any]:
    setup_django()
    import httpx
    import psycopg

    seeded = populate(count)
    source_url = os.environ["DATABASE_URL"]
    name = urlsplit(source_url).path.lstrip("/")
    parts = urlsplit(source_url)
    socket_dir = dict(p.split("=", 1) for p in parts.query.split("&"))["host"]
    user = parts.username or "postgres"
    admin_url = database_url(source_url, "postgres")
    dumps = step_home() / "dumps"
    dumps.mkdir(exist_ok=True)
    os.chmod(dumps, 0o777)  # written by PostgreSQL's own system user; removed at the end  # noqa: S103
    dump = dumps / "cortex.dump"
    restored, imported = f"{name}_restored", f"{name}_imported"
    with psycopg.connect(admin_url, autocommit=True) as admin:
        for database in (restored, imported):
            admin.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')
            admin.execute(f'CREATE DATABASE "{database}"')
    restored_url, imported_url = database_url(source_url, restored), database_url(source_url, imported)

    stop = threading.Event()
    written: list[str] = []
    with live("web", "worker") as instance:

        def writer() -> None:
            with httpx.Client(base_url=instance.url, headers={"Authorization": f"Bearer {seeded.token}"}, timeout=30) as http:
                n = 0
                while not stop.is_set():
                    n += 1
                    answer = http.post("/api/memories", json={"content": f"Written during the backup, {n}.", "scope": "sales"})
                    if answer.status_code == 201:
                        written.append(answer.json()["id"])

        thread = threading.Thread(target=writer)
        thread.start()
        time.sleep(2)
        before_dump = rows(source_url, "backup")
        # The dump reads one snapshot while writes and post-write work (conflicts can supersede a
        # memory written a moment before) go on; the rows it must reproduce are those of that same
        # snapshot, exported from a repeatable-read transaction and handed to pg_dump.
        with psycopg.connect(source_url) as snapshot_conn:
            snapshot_conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
            [snapshot] = snapshot_conn.execute("SELECT pg_export_snapshot()").fetchall()[0]
            at_dump = read_rows(snapshot_conn, "backup")
            started = time.monotonic()
            pg("pg_dump", "-h", socket_dir, "-U", user, "-Fc", f"--snapshot={snapshot}", "-f", str(dump), name)
            dump_s = time.monotonic() - started
            snapshot_conn.rollback()
        time.sleep(1)
        stop.set()
        thread.join()
        started = time.monotonic()
        pg("pg_restore", "-h", socket_dir, "-U", user, "-d", restored, "--no-owner", str(dump))
        restore_s = time.monotonic() - started
        export_file = dumps / "export.jsonl"
        exported = manage(source_url, "cortex", "export", "--org", "backup", "--status", "all", "--output", str(export_file))
    source, back = rows(source_url, "backup"), rows(restored_url, "backup")
    verify = manage(restored_url, "cortex", "audit", "verify", "--all")

    # export → import into an empty, migrated database, the organization made again with the CLI.
    steps = [
        ("migrate", "--no-input", "-v", "0"),
        ("cortex", "org", "create", "backup"),
        *(("cortex", "scope", "create", slug, "--org", "backup") for slug in SCOPES),
        ("cortex", "user", "add", "admin@backup.test", "--org", "backup", "--clearance", "Executive", "--admin"),
        *(("cortex", "grant", "admin@backup.test", slug, "--org", "backup") for slug in SCOPES),
        ("cortex", "import", str(export_file), "--org", "backup", "--user", "admin@backup.test"),
    ]
    outcomes = [manage(imported_url, *step) for step in steps]
    failed_steps = [
        " ".join(step) + ": " + (o.stderr.strip()[-300:]) for step, o in zip(steps, outcomes, strict=True) if o.returncode
    ]
    after_first = rows(imported_url, "backup")
    again = manage(imported_url, *steps[-1])
    after_again = rows(imported_url, "backup")

    def shape(table: dict[str, tuple[Any, ...]]) -> dict[tuple[str, str], tuple[Any, ...]]:
        # (title, content hash) → scope, clearance, sorted tags, valid_from, valid_until, for active memories
        return {(r[10], r[9]): (r[0], r[1], sorted(r[2]), r[4], r[5]) for r in table.values() if r[3] == "active"}

    def links(table: dict[str, tuple[Any, ...]]) -> dict[tuple[str, str], tuple[Any, ...]]:
        # (title, content hash) → status, and the (title, content hash) of the versions it supersedes
        # and is superseded by, for every memory but the redacted ones (never imported).
        key = {k: (r[10], r[9]) for k, r in table.items() if r[3] != "redacted"}
        return {key[k]: (r[3], key.get(r[7]), key.get(r[8])) for k, r in table.items() if k in key}

    active_source = shape(source)
    active_imported = shape(after_first)
    links_source, links_imported = links(source), links(after_first)
    with psycopg.connect(admin_url, autocommit=True) as admin:
        for database in (restored, imported):
            admin.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')
    dump_bytes = dump.stat().st_size
    for leftover in (dump, export_file):
        leftover.unlink(missing_ok=True)
    checks = {
        "the restored memories are exactly the dump's snapshot, row for row": back == at_dump,
        "every memory written before the dump is restored": set(before_dump) <= set(back),
        "supersession links restored": all(back.get(k, ())[7:9] == v[7:9] for k, v in at_dump.items()),
        "audit chain verifies on the restored database": verify.returncode == 0,
        "export succeeded": exported.returncode == 0,
        "import steps succeeded": not failed_steps,
        "every active memory imported with scope, clearance, tags and validity": active_imported == active_source,
        "every version imported with its supersession links": links_imported == links_source,
        "importing the same export again changes nothing": again.returncode == 0 and after_again == after_first,
    }
    return {
        "memories": len(source),
        "active": len(active_source),
        "superseded": sum(1 for r in source.values() if r[3] == "superseded"),
        "written_during": len(written),
        "before_dump": len(before_dump),
        "at_dump": len(at_dump),
        "changed_since_dump": sum(1 for k, v in at_dump.items() if source.get(k) != v),
        "restored": len(back),
        "dump_s": round(dump_s, 2),
        "restore_s": round(restore_s, 2),
        "dump_bytes": dump_bytes,
        "verify": (verify.stdout.strip() or verify.stderr.strip())[-300:],
        "active_imported": len(active_imported),
        "versions_source": len(links_source),
        "versions_imported": len(links_imported),
        "links_source": sum(1 for r in links_source.values() if r[1] or r[2]),
        "links_imported": sum(1 for r in links_imported.values() if r[1] or r[2]),
        "links_equal": sum(1 for k, r in links_source.items() if (r[1] or r[2]) and links_imported.get(k) == r),
        "again": (again.stdout.strip() or again.stderr.strip())[-200:],
        "failed_steps": failed_steps,
        "checks": checks,
    }


def describe(r: dict[str, Any]) -> str:
    checks = "\n".join(f"- {'pass' if ok else 'FAIL'}: {name}" for name, ok in r["checks"].items())
    failed = ("\n\nFailed steps: " + "; ".join(r["failed_steps"])) if r["failed_steps"] else ""
    return (
        f"Source: {r['memories']} memories ({r['active']} active, {r['superseded']} superseded, one redacted) in 3 scopes "
        f"at 4 rungs; {r['written_during']} more written over HTTP while the backup ran.\n\n"
        f"**pg_dump / pg_restore**: dump of the live database {r['dump_s']} s ({r['dump_bytes'] / 1e6:.1f} MB, custom format), "
        f"restore {r['restore_s']} s; {r['before_dump']} memories existed just before the dump began and {r['at_dump']} in its "
        f"snapshot, {r['restored']} restored; {r['changed_since_dump']} rows of that snapshot changed in the source while "
        "the dump ran or after it (post-write work; the restore is compared with the snapshot, exported to pg_dump); "
        f"`cortex audit verify --all` on the restored database: {r['verify']!r}.\n\n"
        f"**cortex export --status all → cortex import**: {r['active_imported']} of {r['active']} active memories back; "
        f"{r['versions_imported']} of {r['versions_source']} versions (active and superseded; the redacted one is not "
        f"imported); memories taking part in a supersession link: {r['links_source']} in the source, "
        f"{r['links_imported']} after the import, {r['links_equal']} with the same status and links. Importing the same "
        f"file again: {r['again']!r}.\n\n{checks}{failed}"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--memories", type=int, default=1000)
    parser.add_argument("--phase", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.phase:
        emit(phase_backup(int(args.phase[1])))
        return 0
    [result] = drive(SCRIPT, STEP, [["backup", str(args.memories)]], {"CORTEX_API_RATE": "100000/min"})
    command = "make reliability RELIABILITY=r60_backup.py"
    if args.memories != 1000:
        command = f".venv/bin/python bench/reliability/r60_backup.py --memories {args.memories}"
    write_section("backup", "Backup and restore", describe(result), command=command)
    print(describe(result))
    return 0 if all(result["checks"].values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())

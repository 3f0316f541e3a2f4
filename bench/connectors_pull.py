"""Pull-connector benchmark: Gmail, Google Drive and Notion first syncs and edit lag (not a test).

    .venv/bin/python bench/connectors_pull.py                           # all three sources, hash and local embedders
    .venv/bin/python bench/connectors_pull.py --sources gmail notion --items 100 --embedders hash

What it measures, per source and embedder (docs/benchmarks.md has the numbers):

- **end to end**: a backfill run (cap raised, as the card's Backfill does) of `--items` threads /
  documents / pages from the loopback fake the tests use (tests/support/gmail_mailbox.py,
  drive_files.py, notion_workspace.py on tests/support/stub_server.py), pages run back to back
  through the framework's sync service and task code (CELERY_TASK_ALWAYS_EAGER in this process,
  no broker hop); items/s from Sync now to the last memory committed;
- **source alone**: fetch_page over the same fake until done, nothing written (the SDK, HTTP to
  127.0.0.1, MIME decoding / export + extraction / block flattening);
- **write pipeline's ceiling**: memory_create_many of the same items in batches of the page size;
- **edit lag** under the default schedule with a simulated clock: after the first sync, one item
  is edited at the fake 7 minutes into the connector's 15-minute interval; the dispatcher
  (connectors.services.schedule.dispatch_due) is ticked once per simulated minute, as beat runs it;
  lag = simulated minutes until the run that supersedes the memory starts + that run's measured
  wall time.

Notion requests are paced to `--notion-rps` per token (Notion's documented average is 3/s; 0 turns
pacing off to measure the code itself). The fakes answer from memory over loopback HTTP, so the
figures are upper bounds: real Google and Notion answer in tens to hundreds of milliseconds per call.
Each phase runs in a child process with its own database on the embedded server, recreated per run.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "bench"), str(ROOT / "tests")]

import harness  # noqa: E402
from recall import database_url, drop_database, ensure_database, loadavg, machine  # noqa: E402

HOME = Path(os.environ.get("CORTEX_BENCH_HOME") or Path(tempfile.gettempdir()) / "cortex-bench-connectors-pull").resolve()
SOURCES = ("gmail", "drive", "notion")
EDIT_AFTER_MINUTES = 7


# -- driver ----------------------------------------------------------------------------------------------
def run_phase(env: dict[str, str], *args: str) -> dict[str, Any]:
    return harness.run_phase(Path(__file__).resolve(), env, *args)


def drive(args: argparse.Namespace) -> int:
    from cortex_site.runner import embedded_services, ensure_dev_connector_key

    HOME.mkdir(parents=True, exist_ok=True)
    ensure_dev_connector_key(HOME)
    results: dict[str, Any] = {"machine": machine(), "started": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "phases": []}
    with embedded_services(HOME) as services:
        base = {**os.environ, **services}
        base.update(
            DJANGO_SETTINGS_MODULE="cortex_site.settings",
            CORTEX_HOME=str(HOME),
            SECRET_KEY=base.get("SECRET_KEY") or "bench-only-secret-key",
            CELERY_TASK_ALWAYS_EAGER="1",  # page tasks run in-process, back to back
            PYTHONUNBUFFERED="1",
            NO_PROXY="127.0.0.1,localhost",
            no_proxy="127.0.0.1,localhost",
        )
        for source in args.sources:
            for embedder in args.embedders:
                env = {
                    **base,
                    "CORTEX_EMBEDDER": embedder,
                    "DATABASE_URL": database_url(base["DATABASE_URL"], f"cortex_bench_pull_{source}_{embedder}"),
                }
                results["phases"].append(run_phase(env, source, embedder, str(args.items), str(args.notion_rps)))
    output = Path(args.json or HOME / "results.json")
    output.write_text(json.dumps(results, indent=2))
    print(f"\nresults written to {output}")
    print(summary(results))
    return 0


def summary(results: dict[str, Any]) -> str:
    lines = [f"machine: {results['machine']}"]
    for p in results["phases"]:
        paced = f" (Notion paced to {p['notion_rps']}/s)" if p["source"] == "notion" else ""
        lines.append(
            f"{p['source']} {p['embedder']}{paced}: {p['items']} items in "
            f"{p['seconds']:.1f} s = {p['items_per_s']:.1f} items/s end to end "
            f"({p['pages']} pages, {p['http_calls']} HTTP calls); source alone {p['source_items_per_s']:.1f} items/s; "
            f"write pipeline ceiling {p['pipeline_items_per_s']:.1f} items/s; "
            f"edit → superseding memory {p['edit_lag_minutes']:.2f} min "
            f"(next run {p['edit_wait_minutes']} simulated min after the edit + {p['edit_run_s']:.2f} s run); load {p['loadavg']}"
        )
    return "\n".join(lines)


# -- fakes and connectors (children) -------------------------------------------------------------------------
def setup_django() -> None:
    drop_database()
    ensure_database()
    import django

    django.setup()
    from django.core.cache import cache
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    cache.clear()
    harness.purge_task_queues()


def text_of(n: int) -> tuple[str, str]:
    from synthetic import memory

    item = memory(20261201, n, allow_long=False)
    return item.title, item.content[:900]


def make_fake(source: str, items: int) -> tuple[Any, dict[str, Any], dict[str, Any], Any]:
    """The fake with `items` things edited in the last day; (fake, config, credentials, edit(n))."""
    from support.stub_server import StubServer

    stub = StubServer()
    stub.start()
    now = datetime.now(UTC)
    google = {
        "refresh_token": "1//bench",
        "client_id": "bench.apps.googleusercontent.com",
        "client_secret": "bench",
        "token_uri": f"{stub.url}/token",
    }
    if source == "gmail":
        from support.gmail_mailbox import FakeMailbox

        box = FakeMailbox(stub)
        box.install()
        threads = []
        for n in range(items):
            title, content = text_of(n)
            threads.append(box.add(text=content, date=now - timedelta(minutes=items - n), subject=title))

        def edit_gmail(n: int) -> str:
            reply = box.add(text="Agreed, go ahead.", date=datetime.now(UTC), thread_id=threads[n]["threadId"], subject="Re: x")
            return str(reply["threadId"])

        return box, {"api_url": stub.url}, google, edit_gmail
    if source == "drive":
        from support.drive_files import FakeDrive

        files = FakeDrive(stub)
        files.install()
        docs = []
        for n in range(items):
            title, content = text_of(n)
            docs.append(files.put(title, content, modified=now - timedelta(minutes=items - n)))

        def edit_drive(n: int) -> str:
            files.put(docs[n]["name"], "Edited: the plan moved to Friday.", modified=datetime.now(UTC), file_id=docs[n]["id"])
            return str(docs[n]["id"])

        return files, {"api_url": stub.url}, google, edit_drive
    from support.notion_workspace import FakeNotion, block

    workspace = FakeNotion(stub)
    workspace.install()
    pages = []
    for n in range(items):
        title, content = text_of(n)
        first, _, rest = content.partition(". ")
        body = [block("heading_2", title), block("paragraph", first), block("bulleted_list_item", rest or first)]
        pages.append(workspace.page(title, body, edited=now - timedelta(minutes=items - n)))

    def edit_notion(n: int) -> str:
        page = pages[n]
        workspace.page(
            page["properties"]["Name"]["title"][0]["plain_text"],
            [block("paragraph", "Edited: the plan moved to Friday.")],
            edited=datetime.now(UTC) + timedelta(minutes=1),
            page_id=page["id"],
        )
        return str(page["id"])

    return workspace, {"api_url": stub.url}, {"token": "ntn_bench"}, edit_notion


def make_connector(source: str, slug: str, config: dict[str, Any], credentials: dict[str, Any]) -> tuple[Any, Any]:
    from connectors.services.connectors import connector_create
    from memories.access import Principal
    from memories.models import Membership
    from memories.services import tenancy

    org = tenancy.organization_create(slug=slug)
    admin = tenancy.member_add(organization=org, email=f"admin@{slug}.bench", clearance="Executive", role=Membership.Role.ADMIN)
    principal = Principal(Membership.objects.select_related("organization", "user").get(pk=admin.pk))
    created = connector_create(principal=principal, kind=source, name=f"Bench {source}", config=config, credentials=credentials)
    return created.connector, principal


def phase(source: str, embedder_name: str, items: int, notion_rps: int) -> dict[str, Any]:
    setup_django()
    from django.conf import settings

    settings.CORTEX_NOTION_REQUESTS_PER_SECOND = notion_rps
    from connectors.models import Connector, ConnectorItem, SyncRun
    from connectors.registry import source_for
    from connectors.services.schedule import dispatch_due
    from connectors.services.sync import sync_start
    from memories.embeddings.factory import get_embedder
    from memories.models import Memory
    from memories.services.memories import MemoryDraft, WriteResult, memory_create_many

    fake, config, credentials, edit = make_fake(source, items)
    embedder = get_embedder()
    embedder.embed(["warm-up: load the model before the clock starts"])
    page_size = settings.CORTEX_CONNECTOR_PAGE_SIZE
    since = datetime.now(UTC) - timedelta(days=3)

    # The source alone: every page of the same first sync, nothing written.
    probe, _ = make_connector(source, "source-only", config, credentials)
    reader = source_for(probe)
    checkpoint: dict[str, Any] = {}
    fetched: list[Any] = []
    started = time.perf_counter()
    while True:
        page = reader.fetch_page(dict(checkpoint), limit=page_size, first_run_since=since)
        fetched.extend(page.items)
        checkpoint.update(page.checkpoint)
        if page.done:
            break
    source_s = time.perf_counter() - started
    assert len(fetched) == items, (len(fetched), items)

    # End to end: the Backfill path (cap raised for one run), pages through the real task code.
    connector, _ = make_connector(source, "backfill", config, credentials)
    calls_before = len(fake.stub.received)
    before = loadavg()
    started = time.perf_counter()
    run = sync_start(connector=connector, trigger=SyncRun.Trigger.MANUAL, backfill=True).run
    seconds = time.perf_counter() - started
    run.refresh_from_db()
    assert run.status == SyncRun.Status.SUCCEEDED, (run.status, run.error)
    assert run.items_created == items, (run.items_created, items, run.failures[:3])
    http_calls = len(fake.stub.received) - calls_before

    # The write pipeline's ceiling: the same items as drafts, in batches of the page size.
    _, writer = make_connector(source, "pipeline-only", config, credentials)
    drafts = [
        MemoryDraft(
            content=i.content,
            title=i.title,
            source=reader.label,
            source_url=i.source_url,
            author_name=i.author_name,
            category=i.category,
            tags=list(i.tags),
            valid_from=i.valid_from,
        )
        for i in fetched
    ]
    started = time.perf_counter()
    for start in range(0, len(drafts), page_size):
        outcomes = memory_create_many(principal=writer, drafts=drafts[start : start + page_size])
        assert all(isinstance(o, WriteResult) and not o.deduplicated for o in outcomes)
    pipeline_s = time.perf_counter() - started

    # Edit lag under the schedule (simulated clock; the run itself is real).
    connector.refresh_from_db()
    assert connector.next_sync_at is not None
    synced = connector.last_synced_at or datetime.now(UTC)
    edited_at = synced + timedelta(minutes=EDIT_AFTER_MINUTES)
    external_id = edit(items // 2)
    item = ConnectorItem.objects.get(connector=connector, external_id=external_id)
    original = item.memory_id
    assert original is not None
    tick = edited_at.replace(second=0, microsecond=0) + timedelta(minutes=1)
    run_s = 0.0
    for _minute in range(120):
        t0 = time.perf_counter()
        report = dispatch_due(now=tick, organization_id=connector.organization_id)
        if report.started:
            run_s = time.perf_counter() - t0
            break
        tick += timedelta(minutes=1)
    else:
        raise SystemExit("the dispatcher never started the next run")
    item.refresh_from_db()
    superseded = Memory.objects.get(pk=original).status == Memory.Status.SUPERSEDED and item.memory_id != original
    assert superseded, "the scheduled run did not supersede the edited item's memory"
    wait_minutes = round((tick - edited_at).total_seconds() / 60, 2)
    Connector.objects.filter(pk=connector.pk).update(status=Connector.Status.PAUSED)
    fake.stub.stop()
    return {
        "phase": "pull",
        "source": source,
        "embedder": f"{embedder.name}:{embedder.model} ({embedder.dim})",
        "notion_rps": notion_rps,
        "items": items,
        "mean_chars": round(sum(len(i.content) for i in fetched) / max(1, len(fetched))),
        "page_size": page_size,
        "pages": run.pages_done,
        "http_calls": http_calls,
        "seconds": round(seconds, 2),
        "items_per_s": round(items / seconds, 1),
        "source_items_per_s": round(len(fetched) / source_s, 1),
        "pipeline_items_per_s": round(len(drafts) / pipeline_s, 1),
        "edit_wait_minutes": wait_minutes,
        "edit_run_s": round(run_s, 2),
        "edit_lag_minutes": round(wait_minutes + run_s / 60, 2),
        "loadavg": f"{before} → {loadavg()}",
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sources", nargs="+", default=list(SOURCES), choices=SOURCES)
    parser.add_argument("--items", type=int, default=100, help="threads / documents / pages per source")
    parser.add_argument("--embedders", nargs="+", default=["hash", "local"])
    parser.add_argument("--notion-rps", type=int, default=3, help="Notion requests per second per token (0: unpaced)")
    parser.add_argument("--json", help="where to write results (default $CORTEX_BENCH_HOME/results.json)")
    parser.add_argument("--phase", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.phase:
        source, embedder, items, rps = args.phase
        print("RESULT " + json.dumps(phase(source, embedder, int(items), int(rps))), flush=True)
        return 0
    return drive(args)


if __name__ == "__main__":
    raise SystemExit(main())

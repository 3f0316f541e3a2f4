"""Running a connector's sync in a test as the worker would, without the broker (import as
`from support.sync_runs import run_sync`)."""

from __future__ import annotations

from typing import Any


def run_sync(connector: Any, *, pages: int | None = None) -> Any:
    """Start a manual run and run its pages one after another through the task's service, as the
    worker does; stop after `pages` pages (a worker that died mid-run) or when the source asks to
    wait (the test then looks at the run as it stands). Returns the SyncRun, reloaded."""
    from connectors.models import SyncRun
    from connectors.services.sync import sync_run_page, sync_start

    started = sync_start(connector=connector, trigger=SyncRun.Trigger.MANUAL)
    assert not started.skipped, started.run.error
    page: int | None = 0
    ran = 0
    while page is not None and (pages is None or ran < pages):
        outcome = sync_run_page(run_id=started.run.pk, page=page)
        ran += 1
        page = outcome.next_page
        if outcome.retry_after is not None:
            break
    return SyncRun.objects.get(pk=started.run.pk)

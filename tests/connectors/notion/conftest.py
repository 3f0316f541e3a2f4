"""Fixtures for the notion tests: the fake in support/notion_workspace (shared with bench/connectors_pull.py)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from support.notion_workspace import FakeNotion
from support.stub_server import StubServer


@pytest.fixture(autouse=True)
def _unpaced(settings: Any) -> Iterator[None]:
    # The ~3 requests/s pacing has its own test; elsewhere it would only slow the suite down.
    settings.CORTEX_NOTION_REQUESTS_PER_SECOND = 0
    yield


@pytest.fixture
def notion(stub_server: StubServer) -> FakeNotion:
    fake = FakeNotion(stub_server)
    fake.install()
    return fake


@pytest.fixture
def run_sync() -> Callable[..., Any]:
    """Run one sync of a connector to its end, page by page, as the worker's tasks would."""
    from connectors.models import SyncRun
    from connectors.services.sync import sync_run_page, sync_start

    def run(connector: Any) -> SyncRun:
        started = sync_start(connector=connector, trigger=SyncRun.Trigger.MANUAL)
        assert not started.skipped, started.run.error
        page: int | None = 0
        while page is not None:
            outcome = sync_run_page(run_id=started.run.pk, page=page)
            page = outcome.next_page
            if outcome.retry_after is not None:
                break  # the source asked to wait: the test looks at the run as it stands
        return SyncRun.objects.get(pk=started.run.pk)

    return run

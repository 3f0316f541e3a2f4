"""Fixtures for the gmail tests: the fake in support/gmail_mailbox (shared with bench/connectors_pull.py)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest
from support.gmail_mailbox import FakeMailbox
from support.stub_server import StubServer


@pytest.fixture
def mailbox(stub_server: StubServer) -> FakeMailbox:
    box = FakeMailbox(stub_server)
    box.install()
    return box


@pytest.fixture
def gmail_credentials(stub_server: StubServer) -> Callable[[], dict[str, str]]:
    return lambda: {
        "refresh_token": "1//stub-refresh",
        "client_id": "cortex-test.apps.googleusercontent.com",
        "client_secret": "stub-secret",
        "token_uri": f"{stub_server.url}/token",
    }


def now() -> datetime:
    return datetime.now(UTC)


@pytest.fixture
def run_sync() -> Callable[..., Any]:
    """Run one sync of a connector to its end, page by page, as the worker's tasks would;
    `pages=` stops after that many pages (a worker that died mid-run)."""
    from connectors.models import SyncRun
    from connectors.services.sync import sync_run_page, sync_start

    def run(connector: Any, *, pages: int | None = None) -> SyncRun:
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

    return run

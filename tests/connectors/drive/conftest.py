"""Fixtures for the drive tests: the fake in support/drive_files (shared with bench/connectors_pull.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from support.drive_files import FakeDrive
from support.stub_server import StubServer


@pytest.fixture
def drive(stub_server: StubServer) -> FakeDrive:
    fake = FakeDrive(stub_server)
    fake.install()
    return fake


@pytest.fixture
def google_credentials(stub_server: StubServer) -> Callable[[], dict[str, str]]:
    return lambda: {
        "refresh_token": "1//stub-refresh",
        "client_id": "cortex-test.apps.googleusercontent.com",
        "client_secret": "stub-secret",
        "token_uri": f"{stub_server.url}/token",
    }


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

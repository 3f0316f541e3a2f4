"""Fixtures for the drive tests: the fake in support/drive_files (shared with bench/connectors_pull.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from support import sync_runs
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
    return sync_runs.run_sync

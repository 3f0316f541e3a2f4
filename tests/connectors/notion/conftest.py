"""Fixtures for the notion tests: the fake in support/notion_workspace (shared with bench/connectors_pull.py)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from support import sync_runs
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
    return sync_runs.run_sync

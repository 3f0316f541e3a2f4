"""Browser tests: Debian's headless Chromium driven by Playwright against pytest-django's live server.

The live server runs Django (WSGI) in a thread on a loopback port; tests use transactional
database access so the server sees the rows they create. Playwright's sync API keeps an event
loop in the test thread, so Django's async-safety guard is relaxed for these tests only.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.conf import settings
from django.db import connection
from django.test import Client

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
DESKTOP = {"width": 1280, "height": 860}
PHONE = {"width": 390, "height": 844}


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    # Per module, not per session: Playwright's sync API keeps an event loop running in this thread
    # while it is open, and every async test that runs after it (MCP clients, OAuth) needs the thread free.
    if not os.path.exists(CHROMIUM):
        # A browser test that cannot run is a failure, never a skip: `make test` installs it first.
        pytest.fail(f"Debian's chromium is not installed at {CHROMIUM}: run `make browser` (make test does).")
    from playwright.sync_api import sync_playwright

    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield launched
        launched.close()


@pytest.fixture
def team(transactional_db: Any) -> Any:
    from ui_browser.seed import build_team

    return build_team()


@pytest.fixture
def open_page(browser: Any, live_server: Any) -> Iterator[Callable[..., Any]]:
    """`open_page(membership=None, viewport=DESKTOP, color_scheme="light")` → a Playwright page.

    With a membership the page is already signed in (a real session cookie from Django's
    auth); JavaScript errors and failed requests on any page fail the test.
    """
    contexts: list[Any] = []
    problems: list[str] = []

    def make(membership: Any = None, viewport: dict[str, int] = DESKTOP, color_scheme: str = "light") -> Any:
        context = browser.new_context(
            viewport=viewport, color_scheme=color_scheme, base_url=live_server.url, accept_downloads=False
        )
        contexts.append(context)
        if membership is not None:
            client = Client()
            client.force_login(membership.user)
            cookie = client.cookies[settings.SESSION_COOKIE_NAME]
            context.add_cookies([{"name": settings.SESSION_COOKIE_NAME, "value": cookie.value, "url": live_server.url}])
        page = context.new_page()
        page.set_default_timeout(10_000)
        # The first page of a fresh live server (URLconf, templates, static files) can take longer on a
        # loaded 2-core machine; waiting for elements keeps the 10 s limit.
        page.set_default_navigation_timeout(45_000)
        page.on("pageerror", lambda exc: problems.append(f"page error: {exc}"))
        # 4xx answers are part of the flows (a refused upload, a 404 page); a missing asset is not.
        page.on(
            "console",
            lambda msg: (
                problems.append(f"console: {msg.text}") if msg.type == "error" and "status of 4" not in msg.text else None
            ),
        )
        page.on("response", lambda r: problems.append(f"{r.status} {r.url}") if "/static/" in r.url and r.status >= 400 else None)
        # ERR_ABORTED is the browser cancelling a request because the page moved on (the favicon of a
        # page the test has already left); a refused or missing asset fails above or as another error.
        page.on(
            "requestfailed",
            lambda r: problems.append(f"request failed: {r.url} {r.failure}") if r.failure != "net::ERR_ABORTED" else None,
        )
        return page

    yield make
    for context in contexts:
        context.close()
    _wait_for_the_live_servers_queries()
    assert not problems, problems


def _wait_for_the_live_servers_queries(timeout: float = 15) -> None:
    """Closing the browser does not stop the live server answering what it already received (a
    poll, a page the test left): its queries must end before the test database is flushed, or the
    flush's TRUNCATE and they deadlock — and the next test finds this one's rows."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
                " AND backend_type = 'client backend' AND state IN ('active', 'idle in transaction')"
            )
            if cursor.fetchone()[0] == 0:
                return
        time.sleep(0.05)

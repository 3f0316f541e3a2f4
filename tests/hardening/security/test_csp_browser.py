"""Every kind of page works in a real browser under Cortex's Content-Security-Policy: no
violation is reported, nothing is logged to the console, and the scripted parts (htmx search,
the Markdown preview, the confirm dialog, Swagger UI) really run — so the policy is not kept by
pages that silently stopped working.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.conf import settings
from django.test import Client
from playwright.sync_api import expect
from ui_browser.conftest import CHROMIUM, CHROMIUM_ARGS, DESKTOP, browser, team  # noqa: F401 - fixtures used below

pytestmark = pytest.mark.slow

# Recorded in the page before any of its own scripts run (init scripts come from the browser, not the page).
_RECORD_VIOLATIONS = """
window.__csp = [];
document.addEventListener("securitypolicyviolation", (event) => {
  const where = `${event.sourceFile}:${event.lineNumber}`;
  window.__csp.push(`${event.violatedDirective} blocked ${event.blockedURI || "inline"} at ${where}`);
});
"""


def _signed_in_page(browser: Any, live_server: Any, membership: Any, problems: list[str]) -> Any:  # noqa: F811
    context = browser.new_context(viewport=DESKTOP, base_url=live_server.url)
    client = Client()
    client.force_login(membership.user)
    cookie = client.cookies[settings.SESSION_COOKIE_NAME]
    context.add_cookies([{"name": settings.SESSION_COOKIE_NAME, "value": cookie.value, "url": live_server.url}])
    context.add_init_script(_RECORD_VIOLATIONS)
    page = context.new_page()
    # Generous: the live server shares a busy machine; nothing here measures speed.
    page.set_default_timeout(60_000)
    page.on("pageerror", lambda exc: problems.append(f"page error: {exc}"))
    page.on(
        "console", lambda msg: problems.append(f"console {msg.type}: {msg.text}") if msg.type in {"error", "warning"} else None
    )
    return page


def _violations(page: Any) -> list[str]:
    return list(page.evaluate("window.__csp"))


def test_pages_work_under_the_csp_without_a_single_violation(browser: Any, live_server: Any, team: Any) -> None:  # noqa: F811
    expect.set_options(timeout=30_000)
    problems: list[str] = []
    page = _signed_in_page(browser, live_server, team.people["ada"], problems)
    memory = next(iter(team.memories.values()))
    seen: dict[str, list[str]] = {}
    for path in (
        "/",
        "/memories/",
        f"/memories/{memory.pk}/",
        "/memories/new/",
        "/ask/",
        "/conflicts/",
        "/entities/",
        "/activity/",
        "/settings/",
        "/connectors/",
        "/audit/",
        "/redaction-requests/",
        "/briefs/new/",
    ):
        response = page.goto(path)
        assert response is not None and response.status == 200, path
        assert "script-src 'self'" in response.headers["content-security-policy"]
        seen[path] = _violations(page)

    # The scripted parts run: search as you type (htmx) swaps in results...
    page.goto("/memories/")
    page.locator("#memory-q").fill("rate limiting")
    expect(page.locator("#memory-results .item").first.locator(".item-title")).to_have_text("API rate limiting policy")
    expect(page).to_have_url(re.compile(r"q=rate\+limiting"))
    seen["search as you type"] = _violations(page)
    # ...the Markdown preview is fetched and shown...
    page.goto("/memories/new/")
    page.locator("#id_content").fill("Hand over at **09:00**")
    page.get_by_role("button", name="Preview").click()
    expect(page.locator("#id_content-preview strong")).to_have_text("09:00")
    seen["preview"] = _violations(page)
    # ...and cortex.js opens its confirm dialog instead of submitting at once.
    page.goto("/settings/")
    page.get_by_label("Name").first.fill("csp check")
    page.get_by_role("button", name="Create token").click()
    page.goto("/settings/")
    page.get_by_role("button", name="Revoke token csp check").click()
    expect(page.locator("#confirm-dialog")).to_be_visible()
    seen["confirm dialog"] = _violations(page)

    # Swagger UI starts from a script of its own URL, not an inline one.
    page.goto("/api/docs/")
    # Building the schema takes a while on a loaded machine.
    expect(page.locator(".swagger-ui .info .title")).to_contain_text("Cortex API", timeout=180_000)
    seen["api docs"] = _violations(page)

    assert {where: found for where, found in seen.items() if found} == {}
    assert [problem for problem in problems if "Content Security Policy" in problem or "Refused to" in problem] == []
    assert problems == []
    page.context.close()

"""The UI in a real browser (headless Chromium): what a person does, start to finish.

One team (tests/ui_browser/seed.py) per test. The flows go through the same pages, htmx
requests and cortex.js behaviours a person uses: sign in, `/` to search, search as you type,
the Markdown preview, per-file upload progress, the redact and confirm dialogs, copy buttons.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.sync_api import expect

from memories.models import ApiToken, Memory

pytestmark = pytest.mark.slow


def test_sign_in_search_add_upload_supersede_redact_and_manage_a_token(team: Any, open_page: Any) -> None:
    page = open_page()

    # Sign in.
    page.goto("/login/?next=/")
    page.get_by_label("Email").fill("eve@acme.test")
    page.get_by_label("Password").fill("pw-for-tests-1")
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Acme Robotics")
    expect(page.locator(".stat-value").first).to_have_text("8")  # what Eve can read, not what Acme holds

    # `/` focuses search; Enter shows ranked results with the best chunk highlighted.
    page.keyboard.press("/")
    expect(page.locator("#global-search")).to_be_focused()
    page.keyboard.type("rate limiting")
    page.keyboard.press("Enter")
    expect(page).to_have_url(re.compile(r"/memories/\?q=rate\+limiting"))
    results = page.locator("#memory-results .item")
    expect(results.first.locator(".item-title")).to_have_text("API rate limiting policy")
    expect(results.first.locator("mark").first).to_have_text(re.compile("rat", re.IGNORECASE))
    results.first.get_by_text("Why this rank").click()
    expect(results.first.locator(".score-explain-body")).to_contain_text("Relevance")
    expect(page.get_by_text("Ranked by 0.7 × relevance + 0.3 × recency")).to_be_visible()

    # Search as you type: htmx swaps the results and keeps the URL shareable.
    page.locator("#memory-q").fill("dock controller timeouts")
    expect(results.first.locator(".item-title")).to_have_text("Incident 2031: dock controller timeouts")
    expect(page).to_have_url(re.compile(r"q=dock\+controller\+timeouts"))

    # Add a note, with the Markdown preview.
    page.get_by_role("link", name="Add memory").first.click()
    page.get_by_label("Title").fill("On-call handover")
    page.locator("#id_content").fill("Hand over at **09:00** with the incident log.\n\n- open incidents\n- pages in the last 24h")
    page.get_by_role("button", name="Preview").click()
    expect(page.locator("#id_content-preview strong")).to_have_text("09:00")
    page.get_by_role("button", name="Write").click()
    page.get_by_label("Scope").select_option("engineering")
    page.get_by_label("Tags").fill("oncall, process")
    page.get_by_role("button", name="Save memory").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("On-call handover")
    expect(page.locator(".messages")).to_contain_text("Saved to engineering.")
    expect(page.locator(".memory-content li")).to_have_count(2)

    # Upload several files: each gets its own progress and outcome.
    page.goto("/memories/new/?tab=upload")
    page.locator("#upload-files").set_input_files(
        [
            {
                "name": "release-checklist.md",
                "mimeType": "text/markdown",
                "buffer": b"# Release checklist\n\nTag, build, sign, ship.",
            },
            {"name": "diagram.png", "mimeType": "image/png", "buffer": b"\x89PNG\r\n"},
            {"name": "legacy.txt", "mimeType": "text/plain", "buffer": "café crème".encode("latin-1")},
        ]
    )
    page.get_by_role("button", name="Upload").click()
    rows = page.locator(".upload-item")
    expect(rows).to_have_count(3)
    expect(page.locator(".upload-item[data-upload-outcome]")).to_have_count(3)
    expect(rows.nth(0)).to_have_class(re.compile("is-done"))
    expect(rows.nth(1)).to_contain_text("diagram.png: only .txt, .md, .docx, .pdf files can be uploaded.")
    expect(rows.nth(2)).to_have_class(re.compile("is-failed"))
    expect(rows.nth(2)).to_contain_text("legacy.txt is not UTF-8")
    rows.nth(0).get_by_role("link").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Release checklist")
    # The leading "# Release checklist" is the title above, not shown a second time in the content.
    expect(page.locator(".memory-content h2")).to_have_count(0)
    expect(page.locator(".memory-content")).to_contain_text("Tag, build, sign, ship.")

    # Edit the note as a new version and walk the chain.
    page.goto("/memories/")
    page.get_by_role("link", name="On-call handover").click()
    page.get_by_role("link", name="Edit as new version").click()
    page.locator("#id_content").fill("Hand over at **10:00** with the incident log.")
    page.get_by_role("button", name="Save new version").click()
    expect(page.locator(".messages")).to_contain_text("Saved as a new version")
    timeline = page.locator(".timeline-item")
    expect(timeline).to_have_count(2)
    expect(timeline.nth(1)).to_contain_text("This version")
    newer_url = page.url
    timeline.nth(0).get_by_role("link").click()
    expect(page.get_by_text("You are looking at an older version")).to_be_visible()
    expect(page.get_by_role("link", name="Edit as new version")).to_have_count(0)

    # Redact the current version: a dialog asks why.
    page.goto(newer_url)
    page.get_by_role("link", name="Redact…").click()
    dialog = page.locator("#redact-dialog")
    expect(dialog).to_be_visible()
    dialog.get_by_label("Reason").fill("Wrong team, posted by mistake")
    dialog.get_by_role("button", name="Redact").click()
    expect(page.locator(".messages")).to_contain_text("Redacted.")
    expect(page.get_by_role("note")).to_contain_text("Wrong team, posted by mistake")
    expect(page.locator(".memory-content")).not_to_contain_text("10:00")

    # Create a token (shown once, copyable), then revoke it through the confirm dialog.
    page.goto("/settings/")
    page.get_by_label("Name").fill("CLI on my laptop")
    page.get_by_role("button", name="Create token").click()
    secret = page.locator("#new-secret")
    expect(secret).to_have_value(re.compile(r"^ctx_[0-9a-f]{8}_"))
    page.locator(".secret-card").get_by_role("button", name="Copy").click()
    expect(page.locator(".secret-card [data-copy-label]")).to_have_text("Copied")
    shown_once = secret.input_value()
    token = ApiToken.objects.get(name="CLI on my laptop")
    page.goto("/settings/")
    expect(page.locator("table")).to_contain_text(f"ctx_{token.prefix}_…")
    assert shown_once not in page.content()
    page.get_by_role("button", name="Revoke token CLI on my laptop").click()
    confirm = page.locator("#confirm-dialog")
    expect(confirm).to_be_visible()
    confirm.get_by_role("button", name="Revoke").click()
    expect(page.locator(".messages")).to_contain_text("revoked")
    token.refresh_from_db()
    assert token.revoked_at is not None
    assert Memory.objects.filter(title="On-call handover", status="superseded").count() == 1


def test_a_contractor_never_sees_an_executive_memory_on_any_page(team: Any, open_page: Any) -> None:
    secret = team.memories["Board update: acquisition talks paused"]
    page = open_page(team.people["carl"])

    def absent(*, asked_for_it: bool = False) -> None:
        expect(page.locator("body")).not_to_contain_text("Board update")
        expect(page.locator("body")).not_to_contain_text("Talks with Initech")
        if not asked_for_it:  # a page reached by its address repeats that address (the org switcher's "next")
            assert str(secret.pk) not in page.content()

    page.goto("/")
    expect(page.get_by_role("heading", level=1)).to_have_text("Acme Robotics")
    absent()
    for path in ("/memories/", "/memories/?status=all", "/memories/?tag=board", "/memories/?source=Gmail"):
        page.goto(path)
        absent()
    page.goto("/memories/")
    page.locator("#memory-q").fill("acquisition talks Initech board")
    expect(page.locator("#memory-results")).to_contain_text("result")
    absent()
    response = page.goto(f"/memories/{secret.pk}/")
    assert response is not None and response.status == 404
    expect(page.get_by_text("couldn’t find that page")).to_be_visible()
    absent(asked_for_it=True)
    # Nothing to change either: the contractor reads engineering but cannot write it.
    page.goto(f"/memories/{team.memories['API rate limiting policy'].pk}/")
    expect(page.get_by_role("link", name="Edit as new version")).to_have_count(0)
    expect(page.get_by_role("link", name="Redact…")).to_have_count(0)

    # The same search finds it for the Executive: the page above hid it, search did not miss it.
    executive = open_page(team.people["ada"])
    executive.goto("/memories/?q=acquisition+talks+Initech+board")
    expect(executive.locator("#memory-results .item-title").first).to_have_text("Board update: acquisition talks paused")


def test_phone_width_and_keyboard_only_navigation(team: Any, open_page: Any) -> None:
    from ui_browser.conftest import PHONE

    page = open_page(team.people["eve"], viewport=PHONE)
    page.goto("/memories/")
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= PHONE["width"], f"the page scrolls sideways on a phone ({width}px)"
    expect(page.locator(".sidebar")).to_be_visible()
    # Keyboard: the skip link comes first and lands on the main content.
    page.keyboard.press("Tab")
    expect(page.locator(".skip-link")).to_be_focused()
    page.keyboard.press("Enter")
    expect(page.locator("#main")).to_be_focused()
    page.keyboard.press("/")
    expect(page.locator("#memory-q")).to_be_focused()
    page.keyboard.type("signing key")
    expect(page.locator("#memory-results .item-title").first).to_have_text("How to rotate the fleet signing key")
    page.keyboard.press("Escape")
    expect(page.locator("#memory-q")).not_to_be_focused()

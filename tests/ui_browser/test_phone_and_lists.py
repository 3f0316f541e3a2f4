"""The UI at 390 px and the memories list in a real browser: no page scrolls sideways, the
conflicts queue is usable on a phone, the phone nav says there is more, j/k move through results,
and each file of an upload gets its own scope and clearance."""

from __future__ import annotations

import os
import re
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.utils import timezone
from playwright.sync_api import expect
from ui_browser.conftest import PHONE

from memories.models import Conflict, Entity, Memory, Organization
from memories.services.memories import MemoryDraft, memory_create

pytestmark = pytest.mark.slow

SCREENSHOTS = Path(__file__).resolve().parents[2] / "docs" / "screenshots"


def shoot(page: Any, name: str) -> None:
    if os.environ.get("CORTEX_SCREENSHOTS"):
        page.screenshot(path=str(SCREENSHOTS / f"{name}.png"), animations="disabled", caret="hide")


def open_conflict(team: Any) -> Conflict:
    Organization.objects.filter(pk=team.org.pk).update(conflict_policy="manual")
    now = timezone.now()
    memory_create(
        principal=team.principal("mo"),
        draft=MemoryDraft(
            title="Public API rate limit for the enterprise integrations of our largest warehouse customers",
            content="The public API rate limit is 100 requests per minute per API key.",
            valid_from=now - timedelta(days=10),
        ),
    )
    memory_create(
        principal=team.principal("eve"),
        draft=MemoryDraft(
            title="Public API rate limit for the enterprise integrations of our largest warehouse customers",
            content="The public API rate limit is 250 requests per minute per API key.",
        ),
    )
    return Conflict.objects.get()


def no_sideways_scroll(page: Any) -> tuple[int, int]:
    return page.evaluate("() => [document.documentElement.scrollWidth, window.innerWidth]")


def test_no_page_scrolls_sideways_at_390_px(team: Any, open_page: Any) -> None:
    conflict = open_conflict(team)
    memory = team.memories["Deploy freeze on Fridays after 14:00"]
    entity = Entity.objects.filter(organization=team.org).order_by("pk").first()
    pages = [
        "/",
        "/memories/",
        "/memories/?q=deploy+freeze",
        "/memories/?sort=oldest&from=2020-01-01",
        f"/memories/{memory.pk}/",
        f"/memories/{memory.pk}/edit/",
        f"/memories/{memory.pk}/details/",
        "/memories/new/",
        "/memories/new/?tab=upload",
        "/memories/new/?tab=brief",
        "/ask/",
        "/conflicts/",
        "/conflicts/?status=all",
        f"/conflicts/{conflict.pk}/",
        "/redaction-requests/",
        "/entities/",
        *([f"/entities/{entity.pk}/"] if entity else []),
        "/activity/",
        "/connectors/",
        "/audit/",
        "/settings/",
        "/styleguide/",
        "/no-such-page/",
    ]
    page = open_page(team.people["ada"], viewport=PHONE)
    wide = {}
    for url in pages:
        page.goto(url, wait_until="load", timeout=30_000)
        scroll_width, inner_width = no_sideways_scroll(page)
        if scroll_width > inner_width:
            wide[url] = scroll_width
    signed_out = open_page(viewport=PHONE)
    for url in ["/login/", "/password-reset/"]:
        signed_out.goto(url, timeout=30_000)
        scroll_width, inner_width = no_sideways_scroll(signed_out)
        if scroll_width > inner_width:
            wide[url] = scroll_width
    assert not wide, f"wider than {PHONE['width']} px: {wide}"


def test_the_conflicts_queue_and_a_decision_work_on_a_phone(team: Any, open_page: Any) -> None:
    conflict = open_conflict(team)
    page = open_page(team.people["mo"], viewport=PHONE)
    page.goto("/conflicts/")
    link = page.get_by_role("link", name=f"{conflict.new_memory.title} vs {conflict.existing_memory.title}")
    expect(link).to_be_visible()
    box = link.bounding_box()
    assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= PHONE["width"]
    shoot(page, "conflicts-phone")
    link.click()
    for name in ("Keep new", "Keep existing", "Keep both", "Dismiss"):
        button = page.get_by_role("button", name=name)
        expect(button).to_be_visible()
        button_box = button.bounding_box()
        assert button_box is not None and button_box["x"] >= 0 and button_box["x"] + button_box["width"] <= PHONE["width"], name
    assert no_sideways_scroll(page)[0] <= PHONE["width"]
    page.get_by_role("button", name="Keep existing").click()
    expect(page.locator(".messages")).to_contain_text("Kept the existing memory")
    conflict.refresh_from_db()
    assert conflict.status == "resolved"


def test_the_phone_nav_says_there_is_more_and_shows_the_current_page(team: Any, open_page: Any) -> None:
    page = open_page(team.people["ada"], viewport=PHONE)
    page.goto("/")
    hint = page.locator("[data-nav-more]")
    expect(hint).to_be_visible()
    settings = page.locator(".sidebar").get_by_role("link", name="Settings")
    assert settings.bounding_box()["x"] >= PHONE["width"] - 20  # off-screen to the right: hence the hint
    hint.click()
    page.wait_for_function("() => { const s = document.querySelector('.sidebar'); return s.scrollLeft > 0; }")
    # On a page further along the strip, that page's link is scrolled into view.
    page.goto("/settings/")
    box = page.locator(".sidebar").get_by_role("link", name="Settings").bounding_box()
    assert box is not None and box["x"] + box["width"] <= PHONE["width"]
    # On a desktop there is no strip and no hint.
    desktop = open_page(team.people["ada"])
    desktop.goto("/")
    expect(desktop.locator("[data-nav-more]")).to_be_hidden()


def test_j_k_and_arrow_down_move_through_results_and_enter_opens(team: Any, open_page: Any) -> None:
    page = open_page(team.people["eve"])
    page.goto("/memories/")
    links = page.locator("#memory-results .item-title")
    expect(links.first).to_be_visible()
    page.locator("#memory-q").focus()
    page.keyboard.press("ArrowDown")
    expect(links.nth(0)).to_be_focused()
    page.keyboard.press("j")
    expect(links.nth(1)).to_be_focused()
    page.keyboard.press("j")
    page.keyboard.press("k")
    expect(links.nth(1)).to_be_focused()
    title = links.nth(1).inner_text()
    shoot(page, "memories-keyboard")
    page.keyboard.press("Enter")
    expect(page.get_by_role("heading", level=1)).to_have_text(title)


def test_sort_date_range_and_author_typeahead_in_the_browser(team: Any, open_page: Any) -> None:
    page = open_page(team.people["eve"])
    page.goto("/memories/")
    page.get_by_label("Sort").select_option("oldest")
    expect(page).to_have_url(re.compile(r"sort=oldest"))
    oldest = Memory.objects.filter(pk__in=[m.pk for m in team.memories.values()], status="active").order_by("created_at").first()
    assert oldest is not None
    page.get_by_label("Author").fill("Mo")
    expect(page.locator("#f-author-options option[value='Mo Kader']")).to_have_count(1)
    shoot(page, "memories-filters")


def test_each_file_of_an_upload_gets_its_own_scope_and_clearance(team: Any, open_page: Any) -> None:
    page = open_page(team.people["mo"])
    page.goto("/memories/new/?tab=upload")
    page.locator("#upload-files").set_input_files(
        [
            {"name": "runbook.md", "mimeType": "text/markdown", "buffer": b"# Restart the queue\n\nDrain, restart, verify."},
            {"name": "pricing.txt", "mimeType": "text/plain", "buffer": b"Price list 2026\n\nStarter 49 EUR, Pro 199 EUR."},
        ]
    )
    chosen = page.locator("[data-upload-choices] > li")
    expect(chosen).to_have_count(2)
    expect(chosen.nth(0)).to_contain_text("runbook.md")
    expect(chosen.nth(1)).to_contain_text("pricing.txt")
    scope_for_pricing = page.get_by_label("Scope for pricing.txt")
    expect(scope_for_pricing.locator("option", has_text="Sales")).to_have_count(1)  # names, not bare slugs
    page.locator("#id_scope").select_option("engineering")
    scope_for_pricing.select_option("sales")
    page.get_by_label("Minimum clearance for pricing.txt").select_option(label="Manager")
    shoot(page, "upload-per-file")
    page.get_by_role("button", name="Upload").click()
    expect(page.locator(".upload-item[data-upload-outcome='ok']")).to_have_count(2)
    expect(page.locator("[data-upload-list]")).to_contain_text("Saved to Sales")
    runbook = Memory.objects.get(title="Restart the queue")
    pricing = Memory.objects.get(title="Price list 2026")
    assert runbook.scope.slug == "engineering" and pricing.scope.slug == "sales"
    assert pricing.clearance_rank > runbook.clearance_rank

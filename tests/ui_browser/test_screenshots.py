"""Screenshots of the main pages, taken in the real browser: every run renders each page and checks
the image; the README's copies in docs/screenshots/ are refreshed only when asked for, because every
run re-renders dates ("week of 12 Oct") and would dirty the working tree:

    CORTEX_SCREENSHOTS=1 .venv/bin/python -m cortex_site.runner test tests/ui_browser/test_screenshots.py

Uses the local MiniLM embedder so the search screenshot shows real semantic ranking.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

pytestmark = pytest.mark.slow

README_SHOTS = Path(__file__).resolve().parents[2] / "docs" / "screenshots"


@pytest.fixture
def local_team(use_embedder: Any, transactional_db: Any) -> Any:
    from ui_browser.seed import build_team

    use_embedder("local")
    return build_team()


def test_screenshots_of_the_main_pages(local_team: Any, open_page: Any, tmp_path: Path) -> None:
    from ui_browser.conftest import PHONE

    out = README_SHOTS if os.environ.get("CORTEX_SCREENSHOTS") else tmp_path
    out.mkdir(parents=True, exist_ok=True)
    ada = local_team.people["ada"]
    detail = local_team.memories["Deploy freeze on Fridays after 14:00"]

    def shoot(page: Any, name: str, *, full_page: bool = False) -> None:
        page.wait_for_load_state("networkidle")
        page.screenshot(path=str(out / f"{name}.png"), full_page=full_page, animations="disabled", caret="hide")

    page = open_page(ada)
    page.goto("/")
    shoot(page, "dashboard", full_page=True)
    page.goto("/memories/")
    shoot(page, "memories")
    page.goto("/memories/?q=how+many+API+requests+can+a+client+make")
    expect(page.locator("#memory-results .item").first).to_be_visible()
    page.locator("#memory-results .score-explain summary").first.click()
    page.mouse.move(0, 0)
    shoot(page, "search")
    page.goto(f"/memories/{detail.pk}/")
    shoot(page, "detail")
    page.goto("/memories/new/")
    page.get_by_label("Title").fill("On-call handover happens at 09:00")
    page.locator("#id_content").fill(
        "Hand over at **09:00** with the incident log:\n\n- open incidents "
        "and their owners\n- pages in the last 24 hours\n- anything flaky"
    )
    page.get_by_role("button", name="Preview").click()
    expect(page.locator("#id_content-preview strong")).to_be_visible()
    page.get_by_label("Tags").fill("oncall, process")
    shoot(page, "add")
    page.goto("/settings/?tab=agent")
    page.get_by_role("button", name="Create agent token").click()
    expect(page.locator("#new-secret")).to_be_visible()
    page.locator("#new-secret").blur()
    shoot(page, "settings")

    dark = open_page(ada, color_scheme="dark")
    dark.goto("/")
    shoot(dark, "dashboard-dark", full_page=True)
    dark.goto(f"/memories/{detail.pk}/")
    shoot(dark, "detail-dark")

    phone = open_page(ada, viewport=PHONE)
    phone.goto("/memories/?q=what+happens+when+docks+time+out")
    expect(phone.locator("#memory-results .item").first).to_be_visible()
    shoot(phone, "search-phone")
    names = ("dashboard", "memories", "search", "detail", "add", "settings", "dashboard-dark", "detail-dark", "search-phone")
    assert sorted(p.name for p in out.glob("*.png")) == sorted(f"{n}.png" for n in names)
    # A blank or error page compresses to a few KB; a rendered page is far larger.
    assert all((out / f"{n}.png").stat().st_size > 20_000 for n in names)

"""Conflicts and meeting briefs in the real browser: htmx extraction from a file, ticking and
saving a brief, and deciding a conflict from its side-by-side page."""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.utils import timezone
from meeting_transcripts import PLATFORM_SUMMARY, PLATFORM_SYNC
from playwright.sync_api import expect

from memories.models import Conflict, Memory, Organization
from memories.services.memories import MemoryDraft, memory_create

pytestmark = pytest.mark.slow

# Set CORTEX_SHOTS=/some/dir to keep screenshots of these pages for a look.
SHOTS = os.environ.get("CORTEX_SHOTS")


def shoot(page: Any, name: str) -> None:
    if SHOTS:
        Path(SHOTS).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(SHOTS) / f"{name}.png"), full_page=True, animations="disabled", caret="hide")


def test_extract_decisions_from_a_transcript_file_tick_and_save(team: Any, open_page: Any, tmp_path: Path) -> None:
    transcript = tmp_path / "platform-sync.txt"
    transcript.write_text(PLATFORM_SYNC)
    page = open_page(team.people["eve"])
    page.goto("/memories/new/?tab=brief")
    page.get_by_label("Title").fill("Platform sync — vendors and on-call")
    page.get_by_label("Attendees").fill("Priya Nair, Tom Becker, Luis Ortega")
    page.get_by_label("Summary").fill(PLATFORM_SUMMARY)
    page.get_by_label("Transcript file").set_input_files(str(transcript))
    page.get_by_role("button", name="Extract Decisions (AI)").click()

    decisions = page.locator("#brief-decisions input[name=decision]")
    expect(decisions).to_have_count(4)
    expect(page.locator("#brief-decisions")).to_contain_text("We're going with Stripe for the marketplace payments.")
    expect(page.locator("#brief-decisions")).to_contain_text("Rule-based")
    shoot(page, "brief-extracted")
    page.get_by_label("We agreed to move on-call to weekly rotations starting next Monday.").uncheck()
    page.get_by_role("button", name="Save brief").click()

    expect(page.locator(".messages")).to_contain_text("Meeting brief saved")
    memory = Memory.objects.get(category="meeting", title="Platform sync — vendors and on-call")
    assert "- We're going with Stripe for the marketplace payments." in memory.content
    assert "weekly rotations" not in memory.content.split("## Transcript")[0]
    assert memory.content.index("## Summary") < memory.content.index("## Decisions") < memory.content.index("## Transcript")


def test_decide_a_conflict_side_by_side(team: Any, open_page: Any) -> None:
    Organization.objects.filter(pk=team.org.pk).update(conflict_policy="manual")
    now = timezone.now()
    memory_create(
        principal=team.principal("mo"),
        draft=MemoryDraft(
            title="Public API rate limit",
            content="The public API rate limit is 100 requests per minute per API key.",
            valid_from=now - timedelta(days=10),
        ),
    )
    memory_create(
        principal=team.principal("eve"),
        draft=MemoryDraft(
            title="Public API rate limit", content="The public API rate limit is 250 requests per minute per API key."
        ),
    )
    conflict = Conflict.objects.get(new_memory__title="Public API rate limit")
    page = open_page(team.people["mo"])
    page.goto("/conflicts/")
    page.get_by_role("link", name="Public API rate limit vs Public API rate limit").click()
    expect(page.locator(".compare del.diff-del")).to_have_text("100")
    expect(page.locator(".compare ins.diff-ins")).to_have_text("250")
    shoot(page, "conflict-open")
    page.get_by_label("Note").fill("100 is in the customer contracts")
    page.get_by_role("button", name="Keep existing").click()
    expect(page.locator(".messages")).to_contain_text("Kept the existing memory")
    expect(page.get_by_role("heading", name="Dissent")).to_be_visible()
    shoot(page, "conflict-decided")
    conflict.refresh_from_db()
    assert (conflict.status, conflict.resolution) == ("resolved", "keep_existing")

"""The Connectors page in a real browser (headless Chromium): set up Slack, test it, sync it, watch a run.

Slack is the loopback workspace (slack-sdk really runs against it); the sync a click starts runs
its pages eagerly in the live server, through the real write pipeline. The screenshot for the
README is refreshed only when asked for (CORTEX_SCREENSHOTS=1), like tests/ui_browser's.
"""

from __future__ import annotations

import os
import re
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.utils import timezone
from playwright.sync_api import expect
from support import principal
from support.slack_workspace import BOT_TOKEN, SIGNING_SECRET, FakeSlack

from connectors.models import Connector, ConnectorItem, SyncRun
from connectors.services.connectors import connector_create, connector_set_error
from connectors.services.sync import sync_start

pytestmark = pytest.mark.slow

README_SHOTS = Path(__file__).resolve().parents[3] / "docs" / "screenshots"


def _workspace(slack: FakeSlack) -> FakeSlack:
    slack.post("C111", "1712000001.000100", "Deploys to the fleet pause on Fridays after 14:00.", user="U111")
    slack.post("C111", "1712000002.000200", "The dock controller firmware 4.2 is rolled out to every site.", user="U111")
    slack.reply("C111", "1712000002.000200", "1712000003.000300", "Site 7 reported a clean restart.", user="U111")
    slack.post("C06NRA6JLER", "1712000004.000400", "Welcome to the new ops handbook channel.", user="U111")
    return slack


def _mid_run(team: Any, *, done: int, total: int) -> Connector:
    """A Gmail connector whose worker is part-way through a run (the state a worker leaves between pages)."""
    inbox = connector_create(
        principal=principal(team.people["ada"]),
        kind="gmail",
        name="Support inbox",
        config={"label": "support"},
        credentials={"client_id": "c", "client_secret": "s", "refresh_token": "r"},
        scope="engineering",
    ).connector
    run = sync_start(connector=inbox, trigger=SyncRun.Trigger.SCHEDULE).run
    SyncRun.objects.filter(pk=run.pk).update(
        status=SyncRun.Status.RUNNING,
        started_at=timezone.now() - timedelta(seconds=40),
        heartbeat_at=timezone.now(),
        progress_done=done,
        progress_total=total,
    )
    return inbox


def test_an_admin_sets_up_slack_tests_it_and_syncs_it_and_a_member_sees_the_card(
    team: Any, open_page: Any, slack: FakeSlack
) -> None:
    _workspace(slack)
    page = open_page(team.people["ada"])
    page.goto("/connectors/")
    expect(page.get_by_role("heading", name="Connect your first source")).to_be_visible()
    page.locator('a[href="/connectors/new/slack/"]').click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Connect Slack")

    page.locator("#id_name").fill("Acme Slack")
    page.locator("#id_channels").fill("C111\nC06NRA6JLER")
    page.locator("#id_bot_token").fill(BOT_TOKEN)
    page.locator("#id_signing_secret").fill(SIGNING_SECRET)
    page.locator("#id_scope").select_option("engineering")
    page.locator("#id_clearance_min").select_option("Employee")
    page.get_by_text("Schedule and advanced").click()
    page.locator("#id_api_url").fill(slack.api_url)
    page.get_by_role("button", name="Connect Slack").click()

    expect(page.get_by_role("heading", level=1)).to_have_text("Acme Slack")
    connector = Connector.objects.get()
    expect(page.locator("[data-webhook-url]")).to_have_value(re.compile(rf"/api/webhooks/slack/{connector.pk}$"))

    page.get_by_role("button", name="Test the connection").click()
    expect(page.locator("#test-result")).to_contain_text("Connected to the Slack workspace Acme as cortex; 2 channels readable.")

    card = page.locator(f"#connector-{connector.pk}")
    card.get_by_role("button", name="Sync now").click()
    expect(card).to_contain_text("Sync started.")
    expect(card.locator("[data-last-run]")).to_contain_text("3 new")  # two threads in #eng, one in #general
    items = ConnectorItem.objects.filter(connector=connector).select_related("memory")
    assert sorted(i.external_id for i in items) == [
        "C06NRA6JLER:1712000004.000400",
        "C111:1712000001.000100",
        "C111:1712000002.000200",
    ]
    assert {i.memory.source for i in items if i.memory} == {"Slack"}
    page.reload()
    expect(page.locator(".connector-runs tbody tr").first).to_contain_text("Manual")
    expect(page.locator(".connector-runs tbody tr").first).to_contain_text("Succeeded")

    # A member sees how it is doing, and nothing to press.
    eve = open_page(team.people["eve"])
    eve.goto("/connectors/")
    expect(eve.locator(f"#connector-{connector.pk}")).to_contain_text("Acme Slack")
    expect(eve.get_by_role("button", name="Sync now")).to_have_count(0)
    expect(eve.locator('a[href^="/connectors/new/"]')).to_have_count(0)


def test_a_running_sync_shows_its_progress_and_the_card_updates_itself_when_it_ends(team: Any, open_page: Any) -> None:
    inbox = _mid_run(team, done=12, total=36)
    page = open_page(team.people["eve"])
    page.goto("/connectors/")
    card = page.locator(f"#connector-{inbox.pk}")
    expect(card.locator("[data-progress-text]")).to_have_text("12 of 36 items")
    expect(card.locator("[role=progressbar]")).to_have_attribute("aria-valuenow", "12")
    expect(card.locator("[data-progress-estimate]")).to_contain_text("left")
    # The worker finishes: the next poll swaps in the finished card, and polling stops.
    run = SyncRun.objects.get(connector=inbox)
    SyncRun.objects.filter(pk=run.pk).update(
        status=SyncRun.Status.SUCCEEDED, finished_at=timezone.now(), progress_done=36, items_created=30, items_updated=6
    )
    Connector.objects.filter(pk=inbox.pk).update(
        last_synced_at=timezone.now(), next_sync_at=timezone.now() + timedelta(minutes=15)
    )
    expect(card.locator("[data-last-run]")).to_contain_text("30 new · 6 updated", timeout=8_000)
    expect(card.locator("[role=progressbar]")).to_have_count(0)
    expect(card).not_to_have_attribute("hx-trigger", re.compile("."))


def test_screenshot_of_the_connectors_page(team: Any, open_page: Any, slack: FakeSlack, tmp_path: Path) -> None:
    out = README_SHOTS if os.environ.get("CORTEX_SCREENSHOTS") else tmp_path
    out.mkdir(parents=True, exist_ok=True)
    ada = team.people["ada"]
    _workspace(slack)
    created = connector_create(
        principal=principal(ada),
        kind="slack",
        name="Acme Slack",
        config={"channels": ["C111", "C06NRA6JLER"], "api_url": slack.api_url},
        credentials={"bot_token": BOT_TOKEN, "signing_secret": SIGNING_SECRET},
        scope="engineering",
    ).connector
    sync_start(connector=created, trigger=SyncRun.Trigger.MANUAL)  # runs eagerly against the workspace on commit
    _mid_run(team, done=12, total=36)
    github = connector_create(
        principal=principal(ada),
        kind="github",
        name="Fleet API pull requests",
        config={"repositories": ["acme/fleet-api"], "mode": "poll"},
        credentials={"token": "ghp_example"},
        scope="engineering",
    ).connector
    connector_set_error(
        connector=github, message="GitHub refused the token (401 Bad credentials): paste a new token with read access."
    )
    page = open_page(ada)
    page.goto("/connectors/")
    expect(page.locator(".connector-card")).to_have_count(3)
    page.wait_for_load_state("networkidle")
    page.screenshot(path=str(out / "connectors.png"), full_page=True, animations="disabled", caret="hide")
    assert (out / "connectors.png").stat().st_size > 20_000

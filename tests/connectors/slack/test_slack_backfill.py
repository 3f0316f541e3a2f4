"""The first sync of a Slack connector: up to 50 recent messages per channel through
conversations.history, threads folded, bounded by the run's cap and resumable from its checkpoint.

Pages run through the framework's own services (sync_start / sync_run_page), one call per task,
so each page commits its memories and its checkpoint together as in production.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone
from support.slack_workspace import FakeSlack
from support.stub_server import StubResponse

from connectors.models import Connector, ConnectorItem, SyncRun
from connectors.services import backoff
from connectors.services.sync import PageOutcome, sync_run_page, sync_start
from memories.models import Memory

pytestmark = pytest.mark.django_db

GENERAL, ENG = "C06NRA6JLER", "C111"


@pytest.fixture(autouse=True)
def _small_pages(settings: Any) -> None:
    settings.CORTEX_CONNECTOR_PAGE_SIZE = 10


def ts(n: int) -> str:
    return f"{1700000000 + n * 60}.000100"


def start(connector: Connector, capture: Any, trigger: str = SyncRun.Trigger.MANUAL) -> SyncRun:
    with capture(execute=False):  # the pages are run by hand below, one "task" at a time
        result = sync_start(connector=connector, trigger=trigger)
    assert not result.skipped
    return result.run


def run_pages(run: SyncRun, *, pages: int | None = None) -> PageOutcome:
    """Run the run's pages in order like the worker does (stopping after `pages` pages if given)."""
    page, outcome = 0, PageOutcome(next_page=0)
    while outcome.next_page is not None and (pages is None or page < pages):
        outcome = sync_run_page(run_id=run.pk, page=outcome.next_page)
        page += 1
    return outcome


def slack_memories(connector: Connector, **filters: Any) -> list[Memory]:
    return list(Memory.objects.filter(organization_id=connector.organization_id, source="Slack", **filters))


def test_first_sync_takes_the_50_most_recent_messages_per_channel_within_the_cap(
    acme: dict[str, Any],
    make_slack_connector: Callable[..., Connector],
    slack: FakeSlack,
    django_capture_on_commit_callbacks: Any,
) -> None:
    for n in range(3):
        slack.post(GENERAL, ts(n), f"general note {n}", user="U012AB3CDE")
    for n in range(60):
        slack.post(ENG, ts(100 + n), f"eng note {n}", user="U061F7AUR")
    connector = make_slack_connector(acme["exec"])

    first = start(connector, django_capture_on_commit_callbacks)
    run_pages(first)
    first.refresh_from_db()
    assert first.status == SyncRun.Status.SUCCEEDED
    assert first.cap == 50 and first.items_created == 50  # 3 from #general, 47 from #eng: the cap stops the run
    assert first.progress_total is not None and first.progress_total > first.progress_done  # it said more remained

    second = start(connector, django_capture_on_commit_callbacks)
    run_pages(second)
    second.refresh_from_db()
    assert second.status == SyncRun.Status.SUCCEEDED and second.items_created == 3  # #eng's backfill resumed and ended

    eng = sorted(m.content for m in slack_memories(connector, external_id__startswith=f"{ENG}:"))
    assert eng == sorted(f"eng note {n}" for n in range(10, 60))  # the 50 most recent, no older ones
    assert len(slack_memories(connector, external_id__startswith=f"{GENERAL}:")) == 3
    # Nothing read twice: every history cursor was asked for once.
    cursors = Counter((c.params()["channel"], c.params().get("cursor")) for c in slack.calls("conversations.history"))
    assert max(cursors.values()) == 1

    # Later runs read only what is new.
    slack.post(ENG, ts(500), "a message posted while the webhook was down", user="U061F7AUR")
    third = start(connector, django_capture_on_commit_callbacks)
    run_pages(third)
    third.refresh_from_db()
    assert (third.items_created, third.items_updated) == (1, 0)
    assert len(slack_memories(connector)) == 54


def test_threads_are_folded_and_bots_joins_and_broadcast_replies_skipped(
    acme: dict[str, Any],
    make_slack_connector: Callable[..., Connector],
    slack: FakeSlack,
    django_capture_on_commit_callbacks: Any,
) -> None:
    slack.post(ENG, ts(1), "Do we freeze the API on Monday?", user="U061F7AUR")
    slack.reply(ENG, ts(1), ts(2), "Yes, from 9:00", user="U111")
    slack.reply(ENG, ts(1), ts(3), "Agreed", user="U012AB3CDE")
    slack.post(ENG, ts(3), "Agreed", user="U012AB3CDE", subtype="thread_broadcast", thread_ts=ts(1))
    slack.post(ENG, ts(4), "deploy finished", subtype="bot_message", bot_id="B1")
    slack.post(ENG, ts(5), "<@U111> has joined the channel", subtype="channel_join")
    connector = make_slack_connector(acme["exec"], channels=[ENG])

    run_pages(start(connector, django_capture_on_commit_callbacks))

    [memory] = slack_memories(connector)
    assert memory.external_id == f"{ENG}:{ts(1)}"
    assert memory.title == "#eng: Do we freeze the API on Monday?"
    assert memory.content == "Do we freeze the API on Monday?\n\nThread:\nAda Lovelace: Yes, from 9:00\nAlan Turing: Agreed"
    assert memory.author_name == "Edsger Dijkstra"
    assert len(slack.calls("users.info")) == 3  # one per author, cached afterwards


def test_a_killed_run_resumes_from_its_checkpoint_nothing_lost_nothing_doubled(
    acme: dict[str, Any],
    make_slack_connector: Callable[..., Connector],
    slack: FakeSlack,
    django_capture_on_commit_callbacks: Any,
) -> None:
    for n in range(30):
        slack.post(ENG, ts(n), f"decision {n}", user="U111")
    connector = make_slack_connector(acme["exec"], channels=[ENG])
    run = start(connector, django_capture_on_commit_callbacks)
    assert run_pages(run, pages=1).next_page == 1  # page 0 committed: 10 memories and the cursor past them

    # Page 1 breaks in the middle (Slack fails the 4th permalink): its transaction leaves nothing behind.
    slack.fail_after("chat.getPermalink", 3, StubResponse(status=503, body=b"upstream connect error"))
    assert sync_run_page(run_id=run.pk, page=1).retry_after is not None
    assert len(slack_memories(connector)) == 10
    # ...and then the worker dies: no heartbeat any more, past the lease.
    SyncRun.objects.filter(pk=run.pk).update(heartbeat_at=timezone.now() - timedelta(hours=1))

    resumed = start(connector, django_capture_on_commit_callbacks)
    run_pages(resumed)
    run.refresh_from_db()
    resumed.refresh_from_db()
    assert run.status == SyncRun.Status.FAILED and "resumed" in run.error
    assert resumed.status == SyncRun.Status.SUCCEEDED and resumed.items_created == 20

    stored = slack_memories(connector)
    assert sorted(m.content for m in stored) == sorted(f"decision {n}" for n in range(30))
    assert len({m.external_id for m in stored}) == 30
    assert ConnectorItem.objects.filter(connector=connector).count() == 30


def test_rate_limit_retry_after_is_honoured_and_shared(
    acme: dict[str, Any],
    make_slack_connector: Callable[..., Connector],
    slack: FakeSlack,
    django_capture_on_commit_callbacks: Any,
) -> None:
    slack.post(ENG, ts(1), "hello", user="U111")
    connector = make_slack_connector(acme["exec"], channels=[ENG])
    slack.interrupts["conversations.history"] = [
        StubResponse(status=429, json={"ok": False, "error": "ratelimited"}, headers={"Retry-After": "7"})
    ]
    run = start(connector, django_capture_on_commit_callbacks)

    outcome = sync_run_page(run_id=run.pk, page=0)
    assert outcome.retry_after == 7
    assert 6 < backoff.remaining(connector.pk) <= 7  # every worker of this connector sees it (Redis)
    run.refresh_from_db()
    assert run.is_open and "rate-limited" in run.error
    assert slack_memories(connector) == []

    # Another worker picking the page up meanwhile waits without calling Slack.
    calls = len(slack.calls("conversations.history"))
    assert (sync_run_page(run_id=run.pk, page=0, attempt=1).retry_after or 0) > 0
    assert len(slack.calls("conversations.history")) == calls

    backoff.clear(connector.pk)  # the wait is over
    run_pages(run)
    run.refresh_from_db()
    assert run.status == SyncRun.Status.SUCCEEDED
    assert [m.content for m in slack_memories(connector)] == ["hello"]


@pytest.mark.parametrize(
    ("breakage", "expected"),
    [
        ("revoked", "The Slack bot token was revoked (token_revoked). Reinstall the app and paste its new bot token."),
        ("channel_gone", "Slack cannot find channel C111, or the bot is not in it (channel_not_found)."),
    ],
)
def test_a_revoked_token_or_a_missing_channel_stops_the_connector_with_a_sentence(
    acme: dict[str, Any],
    make_slack_connector: Callable[..., Connector],
    slack: FakeSlack,
    django_capture_on_commit_callbacks: Any,
    breakage: str,
    expected: str,
) -> None:
    slack.post(ENG, ts(1), "hello", user="U111")
    connector = make_slack_connector(acme["exec"], channels=[ENG])
    if breakage == "revoked":
        slack.revoked = True
    else:
        del slack.channels[ENG]  # conversations.history now answers the recorded channel_not_found
    run = start(connector, django_capture_on_commit_callbacks)
    assert run_pages(run) == PageOutcome()  # no retry loop

    run.refresh_from_db()
    connector.refresh_from_db()
    assert run.status == SyncRun.Status.FAILED
    assert connector.status == Connector.Status.ERROR
    assert connector.last_error.startswith(expected)
    assert len(slack.calls("conversations.history")) == 1

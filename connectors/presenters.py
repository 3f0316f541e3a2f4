"""What a connector card says: status, schedule, progress with an estimate, counts — in words.

Pure functions of a connector, its runs and the time, so the page, the htmx poll and the tests
read the same sentences. Nothing here queries beyond the rows it is handed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from connectors.models import Connector, SyncRun
from connectors.services.schedule import effective_cap, is_scheduled, lease_expired

KIND_BLURBS: dict[str, dict[str, str]] = {
    "github": {
        "label": "GitHub",
        "what": "Merged pull requests, with their changed files, as they merge.",
        "how": "Webhook in real time, or polling every 5 minutes where GitHub cannot reach Cortex.",
    },
    "slack": {
        "label": "Slack",
        "what": "Channel messages and their threads; edits and deletions follow at once.",
        "how": "Events API in real time, or Socket Mode without a public address. First run: 50 recent messages per channel.",
    },
    "gmail": {
        "label": "Gmail",
        "what": "Email threads (one memory per thread), optionally filtered by label or search.",
        "how": "Every 15 minutes from Gmail’s change history. First run: the last 3 days, 8 per run.",
    },
    "drive": {
        "label": "Google Drive",
        "what": "Google Docs and .docx, .pdf, .txt, .md files; trashed or unshared files are redacted.",
        "how": "Every 15 minutes from Drive’s change feed. First run: the last 3 days, 4 per run.",
    },
    "notion": {
        "label": "Notion",
        "what": "Pages and database rows (with their properties) the integration can see.",
        "how": "Every 15 minutes by last edit, plus the databases you list. First run: the last 30 days, 8 per run.",
    },
}

STATUS_LABELS = {"active": "Active", "paused": "Paused", "error": "Needs attention", "syncing": "Syncing"}
STATUS_BADGES = {"active": "badge-success", "paused": "badge-neutral", "error": "badge-danger", "syncing": "badge-info"}
RUN_STATUS_BADGES = {
    "queued": "badge-info",
    "running": "badge-info",
    "succeeded": "badge-success",
    "failed": "badge-danger",
    "skipped": "badge-neutral",
}


def duration_text(delta: timedelta) -> str:
    """ "under a minute", "11 min", "2 h 5 min", "3 days"."""
    seconds = max(0, int(delta.total_seconds()))
    if seconds < 60:
        return "under a minute"
    minutes = math.ceil(seconds / 60)
    if minutes < 60:
        return f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return f"{hours} h {minutes} min" if minutes else f"{hours} h"
    return f"{round(hours / 24)} days"


def remaining(run: SyncRun | None) -> int | None:
    """How many items the source said were left after this run's last page, when it said."""
    if run is None or run.progress_total is None:
        return None
    return max(0, run.progress_total - run.progress_done)


@dataclass(frozen=True)
class Progress:
    done: int
    total: int | None
    percent: float | None  # None: the source does not say how many there are
    text: str  # "12 of 35 items"
    estimate: str  # "about 2 min left", or "" when it cannot be told yet


def run_progress(run: SyncRun, now: datetime) -> Progress:
    """The bar and estimate of an open run: the pace so far times what is left (when the source tells)."""
    done, total = run.progress_done, run.progress_total
    if total is None or total <= 0:
        return Progress(done, None, None, f"{done} item{'s' if done != 1 else ''} so far", "")
    total = max(total, done)
    percent = round(100 * done / total, 1)
    estimate = ""
    started = run.started_at
    if started is not None and done > 0 and total > done:
        elapsed = (now - started).total_seconds()
        estimate = f"about {duration_text(timedelta(seconds=elapsed / done * (total - done)))} left"
    elif done == 0:
        estimate = "starting"
    return Progress(done, total, percent, f"{done} of {total} items", estimate)


def schedule_text(connector: Connector, open_run: SyncRun | None, last_run: SyncRun | None, now: datetime) -> str:
    """The card's schedule line, e.g. "8 per run · next run in 11 min · about 23 left"."""
    parts: list[str] = []
    scheduled = is_scheduled(connector)
    cap = effective_cap(connector)
    if not scheduled:
        parts.append("real time (webhook)")
    elif cap:
        parts.append(f"{cap} per run")
    if connector.status == Connector.Status.PAUSED:
        parts.append("paused")
    elif connector.status == Connector.Status.ERROR:
        parts.append("stopped until fixed")
    elif open_run is not None:
        parts.append("running now")
    elif scheduled:
        if connector.next_sync_at is None or connector.next_sync_at <= now:
            parts.append("next run within a minute")
        else:
            parts.append(f"next run in {duration_text(connector.next_sync_at - now)}")
    # A finished run leaves items behind only when it stopped at its cap; otherwise its last hint is stale.
    capped = last_run is not None and last_run.cap is not None and last_run.progress_done >= last_run.cap
    left = remaining(open_run) if open_run is not None else (remaining(last_run) if capped else None)
    if left:
        parts.append(f"about {left} left")
    return " · ".join(parts)


def card(connector: Connector, runs: list[SyncRun], now: datetime, *, item_count: int | None = None) -> dict[str, Any]:
    """Everything the connector card template shows; `runs` are the connector's latest runs, newest first."""
    open_run = next((r for r in runs if r.is_open and not lease_expired(r, now)), None)
    last_run = next((r for r in runs if not r.is_open and r.status != SyncRun.Status.SKIPPED), None)
    state = "syncing" if open_run is not None and connector.status == Connector.Status.ACTIVE else connector.status
    blurb = KIND_BLURBS.get(connector.kind, {"label": connector.kind})
    return {
        "connector": connector,
        "kind_label": blurb["label"],
        "state": state,
        "state_label": STATUS_LABELS.get(state, state.capitalize()),
        "state_badge": STATUS_BADGES.get(state, "badge-neutral"),
        "schedule": schedule_text(connector, open_run, last_run, now),
        "open_run": open_run,
        "progress": run_progress(open_run, now) if open_run is not None else None,
        "last_run": last_run,
        "item_count": item_count,
        "scheduled": is_scheduled(connector),
    }


@dataclass(frozen=True)
class SetupStep:
    text: str
    value: str = ""  # something to copy into the source (a URL), if any
    label: str = ""  # the source's own name for that field


def setup_instructions(connector: Connector) -> list[SetupStep]:
    """What an admin pastes into the source, in the source's own words."""
    from connectors.selectors import webhook_url

    mode = (connector.config or {}).get("mode", "")
    url = webhook_url(connector)
    if connector.kind == "github" and mode != "poll":
        return [
            SetupStep("In the repository (or organization): Settings → Webhooks → Add webhook."),
            SetupStep("Payload URL:", url, "Payload URL"),
            SetupStep("Content type: application/json. Secret: the webhook secret (shown once when generated)."),
            SetupStep("Events: “Let me select individual events” → Pull requests. Save; GitHub sends a ping Cortex answers."),
        ]
    if connector.kind == "github":
        return [SetupStep("Poll mode: Cortex asks GitHub for merged pull requests on its schedule; nothing to paste.")]
    if connector.kind == "slack" and mode != "socket":
        return [
            SetupStep("In your Slack app: Event Subscriptions → Enable Events."),
            SetupStep("Request URL (Slack checks it at once):", url, "Request URL"),
            SetupStep("Subscribe to bot events: message.channels and message.groups; invite the app to each channel."),
        ]
    if connector.kind == "slack":
        return [
            SetupStep("Socket Mode: enable it in your Slack app (Settings → Socket Mode); nothing to paste."),
            SetupStep("Run `python manage.py slack_socket_mode` next to the worker: it connects with the app-level token."),
            SetupStep("Subscribe to bot events message.channels and message.groups; invite the app to each channel."),
        ]
    return [
        SetupStep(
            f"Nothing to paste: Cortex reads {KIND_BLURBS[connector.kind]['label']} on its schedule with these credentials."
        )
    ]

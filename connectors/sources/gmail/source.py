"""Gmail: one memory per thread, kept current through the mailbox history.

Checkpoint: one stream, "history", whose cursor (saved with the items of each page) holds:
- `mode`: "list" (a dated `messages.list`: the first run, or a resync) or "history"
  (`users.history.list` from `history_id`).
- `history_id`: where the next history pass starts. Taken from the profile *before* a listing
  starts, so mail that arrives while listing is seen by the next history pass (and replays of
  it change nothing).
- `after`: the listing's lower bound (epoch seconds); `page_token`: the listing or history page
  to fetch next; `pages_left`: whether the current pass has pages not yet fetched.
- `pending`: thread ids found but not yet read (a page never reads more than `limit`).
- `history_next`: the mailbox's historyId reported by the pass's first history page, adopted when
  the pass ends.
- `pass_started`: when the current pass began; becomes `synced_at` when it ends, the bound of a
  resync if Google expires `history_id` (a 404), so nothing between the two is missed.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import Any, ClassVar

from connectors.base import Page, Source, SourceItem
from connectors.errors import PermanentSourceError
from connectors.models import ConnectorItem
from connectors.sources.gmail.client import GmailClient
from connectors.sources.gmail.google_http import NotFound, clean_credentials
from connectors.sources.gmail.mime import ParsedMessage, headers_of, parse_message
from cortex_site.errors import ValidationFailed

# Listing pages fetched by one fetch_page when they bring no threads (label-only history pages):
# bounds the requests a single page can make.
MAX_LISTING_FETCHES = 5
LIST_PAGE_SIZE = 100
# A resync reaches back this far before the last completed pass: Gmail's `after:` is coarse, and
# a replayed thread whose content did not change is a no-op for the framework.
RESYNC_MARGIN = timedelta(days=1)
STREAM = "history"
# Messages that are not (or no longer) mail of the thread: binned, spam, or a reply still being
# written (Gmail saves a draft into its thread as it is typed; it is not sent, so not shared).
_GONE_LABELS = frozenset({"TRASH", "SPAM", "DRAFT"})


class GmailSource(Source):
    kind: ClassVar[str] = "gmail"
    label: ClassVar[str] = "Gmail"
    default_cap: ClassVar[int | None] = 8
    default_first_run_days: ClassVar[int | None] = 3
    default_interval_minutes: ClassVar[int] = 15
    push: ClassVar[bool] = False
    pull: ClassVar[bool] = True

    @classmethod
    def validate_config(
        cls, config: dict[str, Any], credentials: dict[str, Any], *, organization: Any
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        cleaned = {key: value for key, value in config.items() if key in {"api_url", "label", "query", "mode"}}
        for key in ("label", "query", "api_url"):
            value = cleaned.get(key, "")
            if not isinstance(value, str):
                raise ValidationFailed(f"Gmail {key} must be text.", error_code="INVALID_CONFIG", details={"field": key})
            cleaned[key] = value.strip()
        cleaned["mode"] = "poll"
        per_message = config.get("per_message", False)
        if not isinstance(per_message, bool):
            raise ValidationFailed(
                "Gmail per_message is true or false.", error_code="INVALID_CONFIG", details={"field": "per_message"}
            )
        cleaned["per_message"] = per_message or ""
        secret = clean_credentials(credentials, product="Gmail", needs_subject=True)
        return {k: v for k, v in cleaned.items() if v != ""}, secret

    def _client(self) -> GmailClient:
        return GmailClient(credentials=self.credentials, api_url=self.config.get("api_url") or None)

    def test_connection(self) -> str:
        profile = self._client().profile()
        return f"Connected to the Gmail mailbox {profile.get('emailAddress', '')} ({profile.get('messagesTotal', '?')} messages)."

    # -- the pull ----------------------------------------------------------------------------
    def fetch_page(self, checkpoint: dict[str, Any], *, limit: int, first_run_since: datetime | None) -> Page:
        client = self._client()
        saved = checkpoint.get(STREAM)
        state = dict(saved) if saved else self._first_state(client, first_run_since)
        state["pending"] = list(state.get("pending") or [])
        items: list[SourceItem] = []
        failures: list[tuple[str, str]] = []
        fetches = 0
        if not state["pending"] and not state.get("pages_left"):
            self._start_pass(state)
        while len(items) < limit:
            if state["pending"]:
                thread_id = state["pending"].pop(0)
                items.extend(self._thread_items(client, thread_id))
                continue
            if not state.get("pages_left") or fetches >= MAX_LISTING_FETCHES:
                break
            fetches += 1
            self._fetch_listing(client, state)
        done = not state["pending"] and not state.get("pages_left")
        if done:
            self._end_pass(state)
        return Page(
            items=items, checkpoint={STREAM: state}, done=done, total_hint=len(state["pending"]) or None, failures=failures
        )

    def _first_state(self, client: GmailClient, since: datetime | None) -> dict[str, Any]:
        since = since or datetime.now(UTC) - timedelta(days=self.default_first_run_days or 3)
        return {
            "mode": "list",
            "history_id": str(client.profile()["historyId"]),
            "after": int(since.timestamp()),
            "pages_left": True,
            "pass_started": int(time.time()),
        }

    def _start_pass(self, state: dict[str, Any]) -> None:
        state.update(pages_left=True, page_token=None, pass_started=int(time.time()))
        state.pop("history_next", None)

    def _end_pass(self, state: dict[str, Any]) -> None:
        if state.get("mode") == "history" and state.get("history_next"):
            state["history_id"] = state.pop("history_next")
        state.update(mode="history", page_token=None, pages_left=False, synced_at=state.get("pass_started") or int(time.time()))
        state.pop("after", None)

    def _fetch_listing(self, client: GmailClient, state: dict[str, Any]) -> None:
        label = self.config.get("label") or ""
        if state.get("mode") == "list":
            query = " ".join(part for part in (f"after:{state['after']}", self._query()) if part)
            response = client.list_messages(
                query=query, label_ids=[label] if label else [], page_token=state.get("page_token"), max_results=LIST_PAGE_SIZE
            )
            found = [str(message["threadId"]) for message in response.get("messages") or []]
        else:
            try:
                response = client.list_history(
                    start_history_id=str(state["history_id"]), label_id=label or None, page_token=state.get("page_token")
                )
            except NotFound:
                self._resync(client, state)
                return
            found = _history_threads(response)
            if response.get("historyId") and not state.get("history_next"):
                # The mailbox's position when the pass began reading: later pages may report a later
                # one, but what happened after the first page is read again by the next pass, never skipped.
                state["history_next"] = str(response["historyId"])
        state["page_token"] = response.get("nextPageToken")
        state["pages_left"] = bool(state["page_token"])
        for thread_id in found:
            if thread_id not in state["pending"]:
                state["pending"].append(thread_id)

    def _resync(self, client: GmailClient, state: dict[str, Any]) -> None:
        """Google no longer keeps `history_id` (it expires after about a week): list the messages
        dated since the last completed pass instead, from a fresh baseline. Threads already stored
        unchanged come back identical and change nothing."""
        synced_at = int(state.get("synced_at") or state.get("pass_started") or time.time())
        after = datetime.fromtimestamp(synced_at, tz=UTC) - RESYNC_MARGIN
        state.update(
            mode="list",
            history_id=str(client.profile()["historyId"]),
            after=int(after.timestamp()),
            page_token=None,
            pages_left=True,
            resynced_at=int(time.time()),
        )
        state.pop("history_next", None)

    def _query(self) -> str:
        query = str(self.config.get("query") or "").strip()
        return f"({query})" if query else ""

    # -- one thread --------------------------------------------------------------------------
    def _thread_items(self, client: GmailClient, thread_id: str) -> list[SourceItem]:
        """The thread's memory (or, with `per_message`, one per message), or deletions for what is gone."""
        try:
            thread = client.get_thread(thread_id)
        except NotFound:
            return self._gone(thread_id)
        label = self.config.get("label") or ""
        raw_messages = [m for m in thread.get("messages") or [] if not _GONE_LABELS & set(m.get("labelIds") or [])]
        # A thread is in the connector while one of its messages carries the label.
        if not raw_messages or (label and not any(label in (m.get("labelIds") or []) for m in raw_messages)):
            return self._gone(thread_id)
        if self._query() and not self._matches_query(client, raw_messages[-1]):
            # Not (or no longer) matching the filter: redact what this connector stored of it.
            return self._gone(thread_id, only_known=True)
        messages = [parse_message(m) for m in raw_messages]
        if not self.config.get("per_message"):
            return [thread_item(thread_id, messages)]
        items = [message_item(thread_id, message) for message in messages]
        present = [item.external_id for item in items]
        return items + [
            _deleted(external_id) for external_id in self._stored_messages(thread_id).exclude(external_id__in=present)
        ]

    def _gone(self, thread_id: str, *, only_known: bool = False) -> list[SourceItem]:
        if self.config.get("per_message"):
            return [_deleted(external_id) for external_id in self._stored_messages(thread_id)]
        return [_deleted(thread_id)] if not only_known or self._known(thread_id) else []

    def _stored_messages(self, thread_id: str) -> Any:
        """External ids ("<thread>/<message>") of this thread's messages the connector stored."""
        return ConnectorItem.objects.filter(
            connector_id=self.connector.pk, external_id__startswith=f"{thread_id}/", deleted=False
        ).values_list("external_id", flat=True)

    def _known(self, external_id: str) -> bool:
        return ConnectorItem.objects.filter(connector_id=self.connector.pk, external_id=external_id, deleted=False).exists()

    def _matches_query(self, client: GmailClient, message: dict[str, Any]) -> bool:
        """Whether the thread's latest message matches the configured query (history entries are not
        filtered by query, so each one is checked with Gmail's own search)."""
        message_id_header = headers_of(message.get("payload") or {}).get("message-id", "").strip("<> ")
        if not message_id_header:
            return True
        query = f"{self._query()} rfc822msgid:{message_id_header}"
        response = client.list_messages(query=query, label_ids=[], page_token=None, max_results=1)
        return bool(response.get("messages"))


def _deleted(thread_id: str) -> SourceItem:
    return SourceItem(external_id=thread_id, title="", content="", deleted=True)


def _history_threads(response: dict[str, Any]) -> list[str]:
    """Thread ids touched by a history page, in order: new, deleted and relabelled messages (moving
    to Trash is a label change)."""
    threads: list[str] = []
    for record in response.get("history") or []:
        for key in ("messagesAdded", "messagesDeleted", "labelsAdded", "labelsRemoved"):
            for entry in record.get(key) or []:
                thread_id = str((entry.get("message") or {}).get("threadId") or "")
                if thread_id and thread_id not in threads:
                    threads.append(thread_id)
    return threads


def message_item(thread_id: str, message: ParsedMessage) -> SourceItem:
    """One message's memory (config `per_message`): external id "<thread id>/<message id>"."""
    lines = [message.text or "(no text)"]
    if message.attachments:
        lines += ["", "Attachments: " + ", ".join(message.attachments)]
    return SourceItem(
        external_id=f"{thread_id}/{message.message_id}",
        title=message.subject or "(no subject)",
        content="\n".join(lines),
        source_url=f"https://mail.google.com/mail/u/0/#all/{message.message_id}",
        author_name=message.from_name,
        author_email=message.from_email,
        valid_from=message.date,
        category="email",
        tags=("email",),
    )


def thread_item(thread_id: str, messages: list[ParsedMessage]) -> SourceItem:
    """A thread's memory: titled by its first subject, authored by whoever started it, dated by its
    latest message, with each message's sender, date, text and attachment names in order."""
    if not messages:
        raise PermanentSourceError(f"Gmail thread {thread_id} has no messages.")
    first, last = messages[0], messages[-1]
    sections = []
    for message in messages:
        when = message.date.strftime("%Y-%m-%d %H:%M %Z").strip() if message.date else ""
        sender = (
            f"{message.from_name} <{message.from_email}>"
            if message.from_email and message.from_name != message.from_email
            else message.from_email
        )
        lines = [f"From: {sender}" + (f" · {when}" if when else ""), "", message.text or "(no text)"]
        if message.attachments:
            lines += ["", "Attachments: " + ", ".join(message.attachments)]
        sections.append("\n".join(lines))
    return SourceItem(
        external_id=thread_id,
        title=first.subject or last.subject or "(no subject)",
        content="\n\n---\n\n".join(sections),
        source_url=f"https://mail.google.com/mail/u/0/#all/{thread_id}",
        author_name=first.from_name,
        author_email=first.from_email,
        valid_from=last.date,
        category="email",
        tags=("email",),
    )

"""Slack: Events API (or Socket Mode) in real time, plus a first sync of ~50 recent messages per channel.

One memory per conversation: a top-level message and its thread, ``external_id`` = ``channel:thread_ts``.
A reply, an edit or a deleted reply rebuilds the conversation from ``conversations.replies`` and so
supersedes its memory; deleting the top-level message redacts it.

Config: ``channels`` (ids), ``api_url``, ``mode`` ("webhook" | "socket"), ``channel_scopes``
({channel: scope slug}); ``channel_names`` and ``private_channels`` are filled in by validate_config
from Slack. Credentials: ``bot_token``, ``signing_secret`` (webhook mode), ``app_token`` (socket mode).
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, ClassVar

from django.conf import settings
from slack_sdk.signature import SignatureVerifier

from connectors.base import Page, ParsedDelivery, Source, SourceItem
from connectors.errors import InvalidSignature, PermanentSourceError, SourceError
from connectors.models import ConnectorItem
from connectors.sources.slack import client as slack_client
from connectors.sources.slack.client import SlackClient, SlackItemMissing, SlackUser
from connectors.sources.slack.mrkdwn import rich_text_markup, to_plain_text
from cortex_site.errors import NotFound, ValidationFailed

if TYPE_CHECKING:
    from memories.models import Organization

# The first sync of a channel reads this many of its most recent top-level messages.
BACKFILL_PER_CHANNEL = 50
# Slack's replay window for signed requests (either way).
SIGNATURE_WINDOW_SECONDS = 5 * 60
TITLE_LENGTH = 80
# Ends a conversation cut to the longest content a memory may hold.
CUT_NOTE = "\n\n(The conversation continues in Slack: it is longer than a memory holds.)"

# Event types processed, with what they mean for memories.
EVENTS: dict[str, str] = {
    "message": "a message posted, edited or deleted in a synced channel (threads fold into their parent)",
}
# Message subtypes that carry what a person wrote; anything else is housekeeping (below) or unknown (ignored).
MESSAGE_SUBTYPES: dict[str, str] = {
    "": "a new message or thread reply",
    "thread_broadcast": "a thread reply also sent to the channel (joins its thread)",
    "file_share": "a message with a file (its text is kept; files are not fetched)",
    "me_message": "a /me message",
    "message_changed": "an edit: the conversation's memory is superseded",
    "message_deleted": "a deletion: a top-level message's memory is redacted, a reply's thread superseded",
    "tombstone": "a deleted thread parent whose replies remain: the conversation's memory is redacted",
}
IGNORED_SUBTYPES: dict[str, str] = {
    "bot_message": "a bot's message",
    "channel_join": "someone joined the channel",
    "channel_leave": "someone left the channel",
    "group_join": "someone joined the channel",
    "group_leave": "someone left the channel",
    "channel_topic": "the channel topic changed",
    "channel_purpose": "the channel purpose changed",
    "channel_name": "the channel was renamed",
    "channel_archive": "the channel was archived",
    "channel_unarchive": "the channel was unarchived",
    "group_topic": "the channel topic changed",
    "group_purpose": "the channel purpose changed",
    "group_name": "the channel was renamed",
    "group_archive": "the channel was archived",
    "group_unarchive": "the channel was unarchived",
    "channel_convert_to_private": "the channel became private",
    "channel_convert_to_public": "the channel became public",
    "pinned_item": "an item was pinned",
    "unpinned_item": "an item was unpinned",
    "reminder_add": "a reminder was added",
    "ekm_access_denied": "an enterprise key denied access",
    "message_replied": "a thread parent's reply counters changed (the reply itself arrives as its own event)",
    "huddle_thread": "a huddle started",
    "channel_posting_permissions": "posting permissions changed",
    "assistant_app_thread": "an AI assistant thread",
}
_CHANNEL_ID = re.compile(r"^[CG][A-Z0-9]{2,}$")
PRIVATE_CHANNEL_TYPES = {"group", "private_channel", "mpim", "im"}


def message_time(ts: str) -> datetime:
    return datetime.fromtimestamp(float(ts), tz=UTC)


def ignore_reason(message: Mapping[str, Any]) -> str | None:
    """Why a message (as in history, replies or an event) does not become part of a memory, else None."""
    subtype = str(message.get("subtype") or "")
    if subtype in IGNORED_SUBTYPES:
        return IGNORED_SUBTYPES[subtype]
    if subtype not in MESSAGE_SUBTYPES:
        return f"message subtype {subtype!r} is not synced"
    if message.get("bot_id") and subtype not in {"message_changed", "message_deleted"}:
        return "a bot's message"
    return None


class SlackSource(Source):
    kind: ClassVar[str] = "slack"
    label: ClassVar[str] = "Slack"
    default_cap: ClassVar[int | None] = 50
    default_first_run_days: ClassVar[int | None] = None  # the backfill is counted in messages, not days
    # Events arrive as they happen; the scheduled run only finishes backfills and catches up on
    # messages posted while Cortex could not be reached.
    default_interval_minutes: ClassVar[int] = 60
    push: ClassVar[bool] = True
    pull: ClassVar[bool] = True

    # -- configuration ---------------------------------------------------------------------------
    @classmethod
    def validate_config(
        cls, config: dict[str, Any], credentials: dict[str, Any], *, organization: Organization
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        from memories.models import Scope

        config = dict(config)
        credentials = {key: str(value).strip() for key, value in credentials.items() if value not in (None, "")}
        channels = config.get("channels")
        if not isinstance(channels, list) or not channels:
            raise ValidationFailed(
                "Slack needs at least one channel id in config.channels (e.g. C0123ABCD).", error_code="INVALID_CONFIG"
            )
        channels = list(dict.fromkeys(str(channel).strip() for channel in channels))
        bad = [channel for channel in channels if not _CHANNEL_ID.match(channel)]
        if bad:
            raise ValidationFailed(
                f"These are not Slack channel ids: {', '.join(bad)}. Use the id from the channel's details (C…), not its name.",
                error_code="INVALID_CONFIG",
            )
        mode = config.get("mode") or "webhook"
        if mode not in {"webhook", "socket"}:
            raise ValidationFailed(
                "config.mode must be 'webhook' (Events API) or 'socket' (Socket Mode).", error_code="INVALID_CONFIG"
            )
        if not credentials.get("bot_token"):
            raise ValidationFailed(
                "Slack needs credentials.bot_token (the app's Bot User OAuth Token, xoxb-…).", error_code="INVALID_CREDENTIALS"
            )
        if mode == "webhook" and not credentials.get("signing_secret"):
            raise ValidationFailed(
                "The Events API needs credentials.signing_secret (Basic Information → Signing Secret).",
                error_code="INVALID_CREDENTIALS",
            )
        if mode == "socket" and not credentials.get("app_token", "").startswith("xapp-"):
            raise ValidationFailed(
                "Socket Mode needs credentials.app_token, an app-level token (xapp-…) with connections:write.",
                error_code="INVALID_CREDENTIALS",
            )
        raw_scopes = config.get("channel_scopes") or {}
        if not isinstance(raw_scopes, dict):
            raise ValidationFailed("config.channel_scopes maps channel ids to scope slugs.", error_code="INVALID_CONFIG")
        channel_scopes = {str(channel): str(slug) for channel, slug in raw_scopes.items()}
        unknown_channels = sorted(set(channel_scopes) - set(channels))
        if unknown_channels:
            raise ValidationFailed(
                f"config.channel_scopes names channels that are not synced: {', '.join(unknown_channels)}.",
                error_code="INVALID_CONFIG",
            )
        scopes = {
            scope.slug: scope for scope in Scope.objects.filter(organization=organization, slug__in=set(channel_scopes.values()))
        }
        missing = sorted(set(channel_scopes.values()) - set(scopes))
        if missing:
            raise NotFound(f"No scope named {', '.join(missing)} in this organization.", error_code="UNKNOWN_SCOPE")

        # Ask Slack what each channel is: its name (for titles) and whether it is private.
        client = SlackClient(token=credentials["bot_token"], api_url=config.get("api_url") or None)
        names: dict[str, str] = {}
        private: list[str] = []
        for channel in channels:
            try:
                info = client.channel_info(channel)
            except SourceError as error:
                raise ValidationFailed(error.message, error_code="SOURCE_REFUSED") from error
            names[channel] = str(info.get("name") or channel)
            if info.get("is_private") or info.get("is_group") or info.get("is_mpim") or info.get("is_im"):
                private.append(channel)
        for channel in private:
            scope = scopes.get(channel_scopes.get(channel, ""))
            if scope is None or scope.visibility != Scope.Visibility.GRANTED:
                where = f"scope {scope.slug!r}, which every member can read" if scope else "no scope of its own"
                raise ValidationFailed(
                    f"#{names[channel]} is a private Slack channel and is mapped to {where}. Map it in "
                    "channel_scopes to a granted scope, so only the people granted it can read what was said there.",
                    error_code="PRIVATE_CHANNEL_NEEDS_GRANTED_SCOPE",
                    details={"channel": channel},
                )
        config.update(mode=mode, channels=channels, channel_scopes=channel_scopes, channel_names=names, private_channels=private)
        return config, credentials

    def uses_pull(self) -> bool:
        return True

    @property
    def client(self) -> SlackClient:
        if not hasattr(self, "_client"):
            self._client = SlackClient(
                token=self.credentials.get("bot_token", ""),
                api_url=self.config.get("api_url") or None,
                cache_namespace=str(self.connector.pk),
            )
        return self._client

    def test_connection(self) -> str:
        who = self.client.auth_test()
        for channel in self.channels:
            self.client.channel_info(channel)
        count = len(self.channels)
        return (
            f"Connected to the Slack workspace {who.get('team', '?')} as {who.get('user', '?')}; "
            f"{count} channel{'s' if count != 1 else ''} readable."
        )

    @property
    def channels(self) -> list[str]:
        return [str(channel) for channel in self.config.get("channels") or []]

    # -- webhooks --------------------------------------------------------------------------------
    def verify_delivery(self, *, headers: Mapping[str, str], body: bytes) -> None:
        lowered = {name.lower(): value for name, value in headers.items()}
        timestamp = lowered.get("x-slack-request-timestamp", "")
        signature = lowered.get("x-slack-signature", "")
        if not timestamp or not signature:
            raise InvalidSignature("The X-Slack-Signature and X-Slack-Request-Timestamp headers are required.")
        try:
            sent_at = int(timestamp)
        except ValueError:
            raise InvalidSignature("X-Slack-Request-Timestamp is not a Unix time.") from None
        if abs(time.time() - sent_at) > SIGNATURE_WINDOW_SECONDS:
            raise InvalidSignature("The request timestamp is more than 5 minutes away from now (a replay, or a wrong clock).")
        secret = self.credentials.get("signing_secret", "")
        # Slack signs UTF-8 JSON with a hex digest; anything else is forged, and would make the SDK's
        # verifier raise (it decodes the body and compares the signature as text) rather than refuse.
        if not signature.isascii() or not _is_utf8(body):
            raise InvalidSignature("The Slack signature does not match this connector's signing secret.")
        # The SDK's verifier: v0=HMAC-SHA256(secret, "v0:{timestamp}:{raw body}"), compared in constant time.
        if not secret or not SignatureVerifier(secret).is_valid(body=body, timestamp=timestamp, signature=signature):
            raise InvalidSignature("The Slack signature does not match this connector's signing secret.")

    def parse_delivery(self, *, headers: Mapping[str, str], body: bytes, payload: dict[str, Any]) -> ParsedDelivery:
        return self.parse_payload(payload)

    def parse_payload(self, payload: dict[str, Any]) -> ParsedDelivery:
        """What a Slack event envelope (from the Events API or Socket Mode) asks of Cortex."""
        kind = str(payload.get("type") or "")
        if kind == "url_verification":
            challenge = str(payload.get("challenge") or "")
            return ParsedDelivery(
                delivery_id=f"url_verification:{_digest(challenge.encode())}",
                event="url_verification",
                ignored=True,
                reason="Slack's URL verification handshake",
                immediate_response={"challenge": challenge},
            )
        delivery_id = str(payload.get("event_id") or _digest(json.dumps(payload, sort_keys=True).encode()))
        if kind != "event_callback":
            return ParsedDelivery(
                delivery_id=delivery_id,
                event=kind or "unknown",
                ignored=True,
                reason=f"Slack {kind or 'unknown'} envelopes are not synced",
            )
        event = payload.get("event")
        if not isinstance(event, dict):
            return ParsedDelivery(
                delivery_id=delivery_id, event="unknown", ignored=True, reason="the envelope has no event object"
            )
        event_type = str(event.get("type") or "")
        subtype = str(event.get("subtype") or "")
        name = f"{event_type}.{subtype}" if subtype else event_type
        if event_type not in EVENTS:
            return ParsedDelivery(
                delivery_id=delivery_id, event=name, ignored=True, reason=f"Slack {event_type!r} events are not synced"
            )
        channel = str(event.get("channel") or "")
        if channel not in self.channels:
            return ParsedDelivery(
                delivery_id=delivery_id, event=name, ignored=True, reason=f"channel {channel} is not synced by this connector"
            )
        inner = event.get("message") if subtype == "message_changed" else event
        reason = ignore_reason(event) or (
            ignore_reason(inner) if subtype == "message_changed" and isinstance(inner, dict) else None
        )
        if reason:
            return ParsedDelivery(delivery_id=delivery_id, event=name, ignored=True, reason=reason)
        return ParsedDelivery(delivery_id=delivery_id, event=name, payload=payload)

    def items_from_delivery(self, payload: dict[str, Any]) -> list[SourceItem]:
        event = payload.get("event") or {}
        channel = str(event.get("channel") or "")
        self._check_private(channel, str(event.get("channel_type") or ""))
        subtype = str(event.get("subtype") or "")
        if subtype == "message_deleted":
            previous = event.get("previous_message") or {}
            deleted_ts = str(event.get("deleted_ts") or previous.get("ts") or "")
            thread_ts = str(previous.get("thread_ts") or "")
            if thread_ts and thread_ts != deleted_ts:
                return [self._thread_item(channel, thread_ts)]  # a reply went: the thread is rebuilt without it
            return [self._deleted(channel, deleted_ts)]
        message = event.get("message") if subtype == "message_changed" else event
        if not isinstance(message, dict) or not message.get("ts"):
            return []
        if message.get("subtype") == "tombstone":  # the parent of a thread was deleted; its replies stay in Slack
            return [self._deleted(channel, str(message["ts"]))]
        ts = str(message["ts"])
        thread_ts = str(message.get("thread_ts") or "")
        if thread_ts and (thread_ts != ts or message.get("reply_count")):
            return [self._thread_item(channel, thread_ts)]
        if subtype != "message_changed" and self._stored(f"{channel}:{ts}"):
            # A new message's event holds its text as first posted: arriving after Cortex stored the
            # message (a late retry, after an edit or a catch-up sync), it is older than what is stored.
            return []
        return [self.item_for(channel, message, replies=[])]

    # -- pull: first-sync backfill and catch-up ----------------------------------------------------
    def fetch_page(self, checkpoint: dict[str, Any], *, limit: int, first_run_since: datetime | None) -> Page:
        """One conversations.history call for the channel the checkpoint points at.

        Checkpoint streams: ``channel:<id>`` = {"backfilled", "fetched", "cursor", "newest", "oldest"} per
        channel, and ``position`` = {"next": index of the channel being read}. A first sync reads up to
        BACKFILL_PER_CHANNEL recent messages, newest first, following Slack's cursor; later runs read
        what is newer than the newest seen. Each page's checkpoint is committed with its memories, so a
        killed run resumes where it stopped: nothing lost, nothing read twice.
        """
        channels = self.channels
        if not channels:
            return Page(items=[], checkpoint={}, done=True)
        states = {channel: dict(checkpoint.get(f"channel:{channel}") or {}) for channel in channels}
        index = int((checkpoint.get("position") or {}).get("next") or 0)
        if index >= len(channels):
            index = 0
        channel = channels[index]
        current = states[channel]
        self._check_private(channel, "")

        if not current.get("backfilled"):
            wanted = max(1, min(limit, BACKFILL_PER_CHANNEL - int(current.get("fetched") or 0)))
            oldest = f"{first_run_since.timestamp():.6f}" if first_run_since else None
            messages, cursor = self.client.history(channel, limit=wanted, cursor=current.get("cursor"), oldest=oldest)
            current["fetched"] = int(current.get("fetched") or 0) + len(messages)
            finished = cursor is None or current["fetched"] >= BACKFILL_PER_CHANNEL
        else:
            # Catch-up: what is newer than the newest message seen, paged with the cursor; `oldest` stays
            # fixed for the whole catch-up so a resumed cursor means the same listing.
            if not current.get("cursor"):
                current["oldest"] = current.get("newest")
            messages, cursor = self.client.history(
                channel, limit=max(1, min(limit, 200)), cursor=current.get("cursor"), oldest=current.get("oldest")
            )
            finished = cursor is None
        items, failures = self._items_for_history(channel, messages)
        seen = [str(m["ts"]) for m in messages if m.get("ts")] + ([str(current["newest"])] if current.get("newest") else [])
        current["newest"] = max(seen, key=float) if seen else None
        if finished:
            current.update(backfilled=True, cursor=None, oldest=None)
            index += 1
        else:
            current["cursor"] = cursor
        done = index >= len(channels)
        remaining = sum(
            BACKFILL_PER_CHANNEL - int(state.get("fetched") or 0) for state in states.values() if not state.get("backfilled")
        )
        saved: dict[str, Any] = {f"channel:{channel}": current, "position": {"next": 0 if done else index}}
        return Page(items=items, checkpoint=saved, done=done, total_hint=remaining or None, failures=failures)

    def _items_for_history(self, channel: str, messages: list[dict[str, Any]]) -> tuple[list[SourceItem], list[tuple[str, str]]]:
        items: list[SourceItem] = []
        failures: list[tuple[str, str]] = []
        for message in reversed(messages):  # oldest first, so memories are written in the order things were said
            ts = str(message.get("ts") or "")
            if not ts or ignore_reason(message):
                continue
            if message.get("thread_ts") and message["thread_ts"] != ts:
                continue  # a reply broadcast to the channel: it is folded into its thread
            if message.get("subtype") == "tombstone":
                items.append(self._deleted(channel, ts))  # the parent went; nothing of it is kept
                continue
            try:
                if message.get("reply_count"):
                    items.append(self._thread_item(channel, ts))
                else:
                    items.append(self.item_for(channel, message, replies=[]))
            except SlackItemMissing as error:  # connector-wide errors (token, channel) propagate and stop the run
                failures.append((f"{channel}:{ts}", error.message))
        return items, failures

    # -- mapping ---------------------------------------------------------------------------------
    def _thread_item(self, channel: str, thread_ts: str) -> SourceItem:
        try:
            messages = self.client.replies(channel, thread_ts)
        except SlackItemMissing as error:
            if error.code == "thread_not_found":
                return self._deleted(channel, thread_ts)  # the whole conversation is gone
            raise
        parent = next((m for m in messages if str(m.get("ts")) == thread_ts), None)
        if parent is None or parent.get("subtype") == "tombstone":
            return self._deleted(channel, thread_ts)
        replies = [m for m in messages if str(m.get("ts")) != thread_ts and ignore_reason(m) is None]
        # The client folds at most MAX_THREAD_REPLIES; when it stopped there, the parent says how many more there are.
        fetched = len(messages) - 1
        later = max(0, _count(parent.get("reply_count")) - fetched) if fetched >= slack_client.MAX_THREAD_REPLIES else 0
        return self.item_for(channel, parent, replies=replies, later_replies=later)

    def item_for(
        self, channel: str, message: Mapping[str, Any], *, replies: list[dict[str, Any]], later_replies: int = 0
    ) -> SourceItem:
        """The memory for a conversation: the message, then its thread (who said what), oldest first,
        and how many `later_replies` it leaves out."""
        ts = str(message["ts"])
        author = self._user(str(message.get("user") or ""))
        text = self._text(message)
        lines = [text]
        if replies:
            lines += ["", "Thread:"]
            lines += [f"{self._user(str(reply.get('user') or '')).name}: {self._text(reply)}" for reply in replies]
        if later_replies:
            lines += ["", f"({later_replies} later repl{'y is' if later_replies == 1 else 'ies are'} in Slack only.)"]
        channel_name = (self.config.get("channel_names") or {}).get(channel, channel)
        first_line = next((line.strip() for line in text.splitlines() if line.strip()), "(no text)")
        if len(first_line) > TITLE_LENGTH:
            first_line = first_line[: TITLE_LENGTH - 1].rstrip() + "…"
        content = "\n".join(lines).strip() or "(no text)"
        if len(content) > settings.CORTEX_MAX_CONTENT_CHARS:
            # A memory past the limit would be refused, and with it every later reply: keep the start.
            content = content[: settings.CORTEX_MAX_CONTENT_CHARS - len(CUT_NOTE)].rsplit("\n", 1)[0].rstrip() + CUT_NOTE
        return SourceItem(
            external_id=f"{channel}:{ts}",
            title=f"#{channel_name}: {first_line}",
            content=content,
            source_url=self.client.permalink(channel, ts),
            author_name=author.name,
            author_email=author.email,
            valid_from=message_time(ts),
            category="discussion",
            tags=("slack", channel_name),
            scope=(self.config.get("channel_scopes") or {}).get(channel) or None,
        )

    def _deleted(self, channel: str, ts: str) -> SourceItem:
        return SourceItem(external_id=f"{channel}:{ts}", title="", content="", deleted=True)

    def _text(self, message: Mapping[str, Any]) -> str:
        """What the message says: its text (else its rich-text blocks, else its attachments' text), the
        messages it shares, and the names of its files."""
        attachments = [a for a in message.get("attachments") or [] if isinstance(a, dict)]
        text = str(message.get("text") or "").strip() or rich_text_markup(message.get("blocks"))
        if not text:
            text = "\n".join(str(a.get("text") or a.get("fallback") or "") for a in attachments if not a.get("is_share"))
        lines = [self._plain(text)] if text.strip() else []
        for shared in (a for a in attachments if a.get("is_share")):  # a forwarded message: what was forwarded
            said = self._plain(str(shared.get("text") or shared.get("fallback") or ""))
            lines.append(f"{shared.get('author_name') or 'someone'} (shared): {said}")
        files = [f for f in message.get("files") or [] if isinstance(f, dict)]
        if files:
            # Files past a free plan's limit, or that need files.info, come without a name.
            names = [str(f.get("name") or f.get("title") or "") for f in files]
            lines.append("Files: " + (", ".join(n for n in names if n) or f"{len(files)} file{'s' if len(files) != 1 else ''}"))
        return "\n".join(lines).strip()

    def _plain(self, markup: str) -> str:
        names = self.config.get("channel_names") or {}
        return to_plain_text(
            markup,
            user_name=lambda user_id: self._user(user_id).name,
            channel_name=lambda channel: str(names.get(channel) or channel),
        )

    def _stored(self, external_id: str) -> bool:
        return ConnectorItem.objects.filter(connector_id=self.connector.pk, external_id=external_id).exists()

    def _user(self, user_id: str) -> SlackUser:
        if not user_id:
            return SlackUser(id="", name="someone", handle="", email="", is_bot=False)
        return self.client.user(user_id)

    def _check_private(self, channel: str, channel_type: str) -> None:
        """A channel that became private after setup must not keep flowing into a scope everyone reads."""
        from memories.models import Scope

        private = channel in (self.config.get("private_channels") or []) or channel_type in PRIVATE_CHANNEL_TYPES
        if not private:
            return
        slug = (self.config.get("channel_scopes") or {}).get(channel)
        scope = Scope.objects.filter(organization_id=self.connector.organization_id, slug=slug).first() if slug else None
        if scope is None or scope.visibility != Scope.Visibility.GRANTED:
            raise PermanentSourceError(
                f"Slack channel {channel} is private but is not mapped to a granted scope; map it in the "
                "connector's channel scopes to a granted scope (nothing from it was stored)."
            )


def _count(value: Any) -> int:
    try:
        return max(0, int(value))
    except (TypeError, ValueError):
        return 0


def _is_utf8(raw: bytes) -> bool:
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _digest(raw: bytes) -> str:
    return hashlib.sha256(raw).hexdigest()[:32]

"""Every call Cortex makes to Slack's Web API, through slack-sdk's WebClient.

The base URL comes from the connector's ``api_url`` (Enterprise Grid proxies, and the loopback stub
in tests); every call has a timeout. Slack's failures are translated into the two kinds the
framework treats differently: RetryableSourceError (429 with its Retry-After, 5xx, timeouts) and
PermanentSourceError (a revoked or wrong token, a channel the bot cannot read) with a sentence
saying what to fix. Nothing here retries by itself; the framework re-enqueues after the backoff.
"""

from __future__ import annotations

import hashlib
import urllib.error
from dataclasses import asdict, dataclass
from typing import Any

from django.core.cache import cache
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError, SlackClientError

from connectors.errors import PermanentSourceError, RetryableSourceError

DEFAULT_API_URL = "https://slack.com/api/"
DEFAULT_TIMEOUT = 10.0
# A workspace member's name and email change rarely; a day keeps users.info calls to one per
# author per day and still picks up renames.
USER_CACHE_SECONDS = 24 * 3600
# Threads longer than this are folded up to this many replies (the memory says how many it leaves out).
MAX_THREAD_REPLIES = 200

# Slack error codes that a person must fix; the sentence is what the connector card shows.
PERMANENT_ERRORS: dict[str, str] = {
    "invalid_auth": "Slack rejected the bot token (invalid_auth). Paste the app's current Bot User OAuth Token.",
    "not_authed": "No bot token was sent to Slack (not_authed). Paste the app's Bot User OAuth Token.",
    "account_inactive": "The Slack app's account is deactivated "
    "(account_inactive). Reinstall the app and paste its new bot token.",
    "token_revoked": "The Slack bot token was revoked (token_revoked). Reinstall the app and paste its new bot token.",
    "token_expired": "The Slack bot token expired (token_expired). Reinstall the app and paste a fresh token.",
    "missing_scope": "The Slack app lacks a permission it needs "
    "(missing_scope: {needed}). Add it under OAuth & Permissions and reinstall.",
    "channel_not_found": "Slack cannot find channel {channel}, or the bot is not in it "
    "(channel_not_found). Invite the app to the channel or remove it from the connector.",
    "not_in_channel": "The Slack app is not a member of channel {channel} (not_in_channel). Invite it with /invite.",
    "team_access_not_granted": "The Slack app is not installed in this "
    "workspace (team_access_not_granted). Install it and paste its bot token.",
    "invalid_arguments": "Slack refused the request as malformed (invalid_arguments); check the channel ids in the connector.",
    "is_archived": "Channel {channel} is archived in Slack (is_archived). Unarchive it or remove it from the connector.",
    "ekm_access_denied": "Slack's Enterprise Key Management denies access to channel {channel} "
    "(ekm_access_denied). A workspace admin must restore access to the key.",
}
# Codes about one message or user, not the connector: the item is skipped (or marked gone), the run goes on.
# user_not_visible: a Slack Connect member of another organization the bot may not look up.
ITEM_ERRORS = {"thread_not_found", "message_not_found", "user_not_found", "users_not_found", "user_not_visible"}
# Slack's own "try again later" answers that come with HTTP 200 and ok=false.
RETRYABLE_ERRORS = {"ratelimited", "internal_error", "fatal_error", "service_unavailable", "request_timeout"}


class SlackItemMissing(PermanentSourceError):
    """One message, thread or user Slack no longer has (``code`` is Slack's error)."""

    def __init__(self, message: str, code: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class SlackUser:
    id: str
    name: str  # the real name, else the display name, else the handle
    handle: str
    email: str
    is_bot: bool


class SlackClient:
    """One connector's view of the Slack Web API."""

    def __init__(
        self,
        *,
        token: str,
        api_url: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        cache_namespace: str = "",
    ) -> None:
        base_url = (api_url or DEFAULT_API_URL).rstrip("/") + "/"
        # retry_handlers=[]: the SDK would retry connection errors on its own; the framework decides instead.
        self.web = WebClient(token=token, base_url=base_url, timeout=int(max(1, timeout)), retry_handlers=[])
        # Keyed by a digest of the token when no namespace is given, so two workspaces never share cached users.
        self._cache_namespace = cache_namespace or hashlib.sha256(token.encode()).hexdigest()[:16]

    # -- calls -----------------------------------------------------------------------------------
    def auth_test(self) -> dict[str, Any]:
        return self._call("auth.test")

    def channel_info(self, channel: str) -> dict[str, Any]:
        channel_data: dict[str, Any] = self._call("conversations.info", channel=channel)["channel"]
        return channel_data

    def history(
        self, channel: str, *, limit: int, cursor: str | None = None, oldest: str | None = None
    ) -> tuple[list[dict[str, Any]], str | None]:
        """One page of a channel's top-level messages, newest first, and the cursor to older ones."""
        arguments: dict[str, Any] = {"channel": channel, "limit": limit}
        if cursor:
            arguments["cursor"] = cursor
        if oldest:
            arguments["oldest"] = oldest
        data = self._call("conversations.history", **arguments)
        next_cursor = (data.get("response_metadata") or {}).get("next_cursor") or None
        return list(data.get("messages") or []), next_cursor if data.get("has_more") else None

    def replies(self, channel: str, thread_ts: str) -> list[dict[str, Any]]:
        """A thread: the parent first, then its replies oldest first (at most MAX_THREAD_REPLIES)."""
        messages: list[dict[str, Any]] = []
        cursor: str | None = None
        while True:
            arguments: dict[str, Any] = {"channel": channel, "ts": thread_ts, "limit": 200}
            if cursor:
                arguments["cursor"] = cursor
            data = self._call("conversations.replies", **arguments)
            messages.extend(data.get("messages") or [])
            cursor = (data.get("response_metadata") or {}).get("next_cursor") or None
            if not (data.get("has_more") and cursor) or len(messages) > MAX_THREAD_REPLIES:
                return messages[: MAX_THREAD_REPLIES + 1]

    def user(self, user_id: str) -> SlackUser:
        """users.info, cached (in the Django cache, shared by workers) per workspace and user."""
        key = f"slack:user:{self._cache_namespace}:{user_id}"
        cached = cache.get(key)
        if isinstance(cached, dict):
            return SlackUser(**cached)
        try:
            data = self._call("users.info", user=user_id)["user"]
        except SlackItemMissing:
            data = {"name": user_id}  # a deleted or foreign user: shown by id rather than failing the message
        profile = data.get("profile") or {}
        found = SlackUser(
            id=user_id,
            name=data.get("real_name") or profile.get("real_name") or profile.get("display_name") or data.get("name") or user_id,
            handle=data.get("name") or "",
            email=profile.get("email") or "",
            is_bot=bool(data.get("is_bot")),
        )
        cache.set(key, asdict(found), USER_CACHE_SECONDS)
        return found

    def permalink(self, channel: str, message_ts: str) -> str:
        try:
            link: str = self._call("chat.getPermalink", channel=channel, message_ts=message_ts)["permalink"]
        except SlackItemMissing:
            return ""  # the message went between the event and now; the memory has no link rather than none at all
        return link

    # -- the one place Slack is called -----------------------------------------------------------
    def _call(self, method: str, **arguments: Any) -> dict[str, Any]:
        try:
            response = self.web.api_call(method, http_verb="GET", params=arguments)
        except SlackApiError as error:
            raise translate_error(error, method, arguments) from error
        except (TimeoutError, urllib.error.URLError, ConnectionError) as error:
            raise RetryableSourceError(f"Slack did not answer {method} in time or could not be reached ({error}).") from error
        except SlackClientError as error:
            raise RetryableSourceError(f"Slack call {method} failed: {error}") from error
        data: dict[str, Any] = response.data if isinstance(response.data, dict) else {}
        return data


def translate_error(error: SlackApiError, method: str, arguments: dict[str, Any]) -> Exception:
    """Slack's refusal as the framework's RetryableSourceError / PermanentSourceError (or SlackItemMissing)."""
    response = error.response
    status = response.status_code
    data = response.data if isinstance(response.data, dict) else {}
    code = str(data.get("error") or "")
    if status == 429 or code == "ratelimited":
        retry_after = _retry_after(response.headers)
        wait = f"; Slack asks to wait {retry_after:g} s" if retry_after is not None else ""
        return RetryableSourceError(f"Slack rate-limited {method}{wait}.", retry_after=retry_after)
    if status >= 500 or code in RETRYABLE_ERRORS:
        return RetryableSourceError(f"Slack answered {method} with {status} {code or 'a server error'}; trying again later.")
    if code in ITEM_ERRORS:
        return SlackItemMissing(f"Slack has no such item any more ({method}: {code}).", code)
    if code in PERMANENT_ERRORS:
        return PermanentSourceError(
            PERMANENT_ERRORS[code].format(channel=arguments.get("channel", "?"), needed=data.get("needed", "?"))
        )
    return PermanentSourceError(f"Slack refused {method} ({code or status}); check the connector's token and channels.")


def _retry_after(headers: Any) -> float | None:
    for name, value in dict(headers or {}).items():
        if str(name).lower() == "retry-after":
            raw = value[0] if isinstance(value, list) else value
            try:
                return max(0.0, float(raw))
            except (TypeError, ValueError):
                return None
    return None

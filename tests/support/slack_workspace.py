"""A Slack workspace served at the HTTP boundary: slack-sdk's WebClient really runs against the
loopback stub, which answers the Web API methods Cortex calls from this in-memory workspace.

Recorded payloads (``fixtures/``, copied as they are from the shared fixtures) are the webhook
bodies and the conversations.history answers. For users.info, conversations.info,
conversations.replies, chat.getPermalink and auth.test no licensed capture exists; those answers
follow the documented response shapes on api.slack.com (same keys, sanitised values).
"""

from __future__ import annotations

import base64
import copy
import hashlib
import hmac
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from support.stub_server import Received, StubResponse, StubServer

FIXTURES = Path(__file__).resolve().parents[1] / "connectors" / "slack" / "fixtures"
SIGNING_SECRET = "8f742231b10e8888abcd99yyyzzz85a5"  # Slack's documented test secret
BOT_TOKEN = "xoxb-test-bot-token"
HISTORY_TEMPLATE = json.loads((FIXTURES / "conversations.history__ok.json").read_text())


def fixture(name: str) -> Any:
    return json.loads((FIXTURES / f"{name}.json").read_text())


def fixture_bytes(name: str) -> bytes:
    return (FIXTURES / f"{name}.json").read_bytes()


def sign(body: bytes, *, secret: str = SIGNING_SECRET, timestamp: int | None = None) -> dict[str, str]:
    """The headers Slack sends with a request: v0=HMAC-SHA256(secret, "v0:{ts}:{body}")."""
    ts = str(int(time.time()) if timestamp is None else timestamp)
    digest = hmac.new(secret.encode(), f"v0:{ts}:".encode() + body, hashlib.sha256).hexdigest()
    return {"X-Slack-Request-Timestamp": ts, "X-Slack-Signature": f"v0={digest}"}


def envelope(event: dict[str, Any], *, event_id: str, team: str = "T111") -> dict[str, Any]:
    """The Events API wrapper around an inner event (the recorded message_changed / message_deleted
    fixtures are inner events only), with the keys of the recorded event_callback capture."""
    return {
        "token": "CqCsBJmXoNSHaNCt3wGWYSEe",
        "team_id": team,
        "api_app_id": "A0757RM31HN",
        "event": event,
        "type": "event_callback",
        "event_id": event_id,
        "event_time": int(float(event.get("event_ts") or event.get("ts") or time.time())),
    }


@dataclass
class FakeSlack:
    """One workspace: channels, their messages (top level and threads) and users."""

    stub: StubServer
    channels: dict[str, dict[str, Any]] = field(default_factory=dict)
    messages: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # channel -> top-level messages
    threads: dict[tuple[str, str], list[dict[str, Any]]] = field(default_factory=dict)  # (channel, ts) -> replies
    users: dict[str, dict[str, Any]] = field(default_factory=dict)
    revoked: bool = False
    # method -> answers to give before the workspace answers normally (e.g. a 429)
    interrupts: dict[str, list[StubResponse]] = field(default_factory=dict)
    # method -> (calls still to answer normally, then this answer once)
    faults: dict[str, tuple[int, StubResponse]] = field(default_factory=dict)

    @property
    def api_url(self) -> str:
        return f"{self.stub.url}/api/"

    def install(self) -> None:
        for method in (
            "auth.test",
            "conversations.info",
            "conversations.history",
            "conversations.replies",
            "users.info",
            "chat.getPermalink",
        ):
            handler = getattr(self, "_" + method.replace(".", "_"))
            self.stub.route("GET", f"/api/{method}", self._guarded(method, handler))
            self.stub.route("POST", f"/api/{method}", self._guarded(method, handler))

    # -- the workspace ---------------------------------------------------------------------------
    def add_channel(self, channel_id: str, name: str, *, private: bool = False) -> None:
        self.channels[channel_id] = {
            "id": channel_id,
            "name": name,
            "is_channel": not private,
            "is_group": private,
            "is_private": private,
            "is_archived": False,
            "is_member": True,
            "created": 1449252889,
        }
        self.messages.setdefault(channel_id, [])

    def add_user(self, user_id: str, real_name: str, email: str = "") -> None:
        handle = real_name.split()[0].lower()
        self.users[user_id] = {
            "id": user_id,
            "team_id": "T111",
            "name": handle,
            "real_name": real_name,
            "is_bot": False,
            "profile": {"real_name": real_name, "display_name": handle, "email": email},
        }

    def post(self, channel: str, ts: str, text: str, *, user: str = "U111", **extra: Any) -> dict[str, Any]:
        message = {"type": "message", "user": user, "text": text, "ts": ts, **extra}
        self.messages[channel].append(message)
        return message

    def reply(self, channel: str, thread_ts: str, ts: str, text: str, *, user: str = "U111") -> dict[str, Any]:
        parent = next(m for m in self.messages[channel] if m["ts"] == thread_ts)
        parent["thread_ts"] = thread_ts
        reply = {
            "type": "message",
            "user": user,
            "text": text,
            "ts": ts,
            "thread_ts": thread_ts,
            "parent_user_id": parent["user"],
        }
        self.threads.setdefault((channel, thread_ts), []).append(reply)
        parent["reply_count"] = len(self.threads[(channel, thread_ts)])
        return reply

    def fail_after(self, method: str, calls: int, answer: StubResponse) -> None:
        """Answer ``method`` normally ``calls`` more times, then once with ``answer``."""
        self.faults[method] = (calls, answer)

    def calls(self, method: str) -> list[Received]:
        return self.stub.requests_to(f"/api/{method}")

    # -- the Web API -----------------------------------------------------------------------------
    def _guarded(self, method: str, handler: Callable[[dict[str, str]], dict[str, Any]]) -> Callable[[Received], StubResponse]:
        def answer(request: Received) -> StubResponse:
            pending = self.interrupts.get(method)
            if pending:
                return pending.pop(0)
            if method in self.faults:
                calls_left, fault = self.faults[method]
                if calls_left == 0:
                    del self.faults[method]
                    return fault
                self.faults[method] = (calls_left - 1, fault)
            if self.revoked:
                return StubResponse(json={"ok": False, "error": "token_revoked"})
            if request.headers.get("authorization") != f"Bearer {BOT_TOKEN}":
                return StubResponse(json={"ok": False, "error": "invalid_auth"})
            return StubResponse(json=handler(request.params()))

        return answer

    def _auth_test(self, params: dict[str, str]) -> dict[str, Any]:
        return {
            "ok": True,
            "url": "https://acme.slack.com/",
            "team": "Acme",
            "user": "cortex",
            "team_id": "T111",
            "user_id": "U0CORTEX",
        }

    def _conversations_info(self, params: dict[str, str]) -> dict[str, Any]:
        channel = self.channels.get(params.get("channel", ""))
        return {"ok": True, "channel": channel} if channel else {"ok": False, "error": "channel_not_found"}

    def _conversations_history(self, params: dict[str, str]) -> dict[str, Any]:
        if params.get("channel") not in self.channels:
            return fixture("conversations.history__channel_not_found")
        newest_first = sorted(self.messages[params["channel"]], key=lambda m: float(m["ts"]), reverse=True)
        if params.get("oldest"):
            newest_first = [m for m in newest_first if float(m["ts"]) > float(params["oldest"])]
        start = int(base64.b64decode(params["cursor"]).decode().removeprefix("offset:")) if params.get("cursor") else 0
        limit = int(params.get("limit") or 100)
        page = newest_first[start : start + limit]
        has_more = start + limit < len(newest_first)
        answer = copy.deepcopy(HISTORY_TEMPLATE)  # the recorded answer's shape, with this channel's messages
        answer.update(messages=copy.deepcopy(page), has_more=has_more)
        answer["response_metadata"] = {
            "next_cursor": base64.b64encode(f"offset:{start + limit}".encode()).decode() if has_more else ""
        }
        return answer

    def _conversations_replies(self, params: dict[str, str]) -> dict[str, Any]:
        channel, ts = params.get("channel", ""), params.get("ts", "")
        parent = next((m for m in self.messages.get(channel, []) if m["ts"] == ts), None)
        if parent is None:
            return {"ok": False, "error": "thread_not_found"}
        thread = sorted(self.threads.get((channel, ts), []), key=lambda m: float(m["ts"]))
        return {
            "ok": True,
            "messages": copy.deepcopy([parent, *thread]),
            "has_more": False,
            "response_metadata": {"next_cursor": ""},
        }

    def _users_info(self, params: dict[str, str]) -> dict[str, Any]:
        user = self.users.get(params.get("user", ""))
        return {"ok": True, "user": user} if user else {"ok": False, "error": "user_not_found"}

    def _chat_getPermalink(self, params: dict[str, str]) -> dict[str, Any]:
        channel, ts = params.get("channel", ""), params.get("message_ts", "")
        return {"ok": True, "channel": channel, "permalink": f"https://acme.slack.com/archives/{channel}/p{ts.replace('.', '')}"}

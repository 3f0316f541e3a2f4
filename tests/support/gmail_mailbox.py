"""A Gmail mailbox served at the HTTP boundary: the real google-api-python-client (static discovery
document, httplib2, google-auth token refresh) talks to the loopback stub, which answers the
Gmail v1 endpoints from this in-memory mailbox. Messages are copies of the recorded
`messages.get` payloads with their ids, dates and text changed.

No real `messages.list` / `history.list` capture exists (see the shared fixtures' SOURCES.md);
those answers follow the documented response shape: `{"messages": [{"id", "threadId"}],
"nextPageToken", "resultSizeEstimate"}` and `{"history": [{"id", "messagesAdded": [{"message":
{...}}], ...}], "nextPageToken", "historyId"}`.
"""

from __future__ import annotations

import base64
import copy
import json
import re
from dataclasses import dataclass, field
from datetime import datetime
from email.utils import format_datetime
from pathlib import Path
from typing import Any

from support.stub_server import Received, StubResponse, StubServer

FIXTURES = Path(__file__).resolve().parent.parent / "connectors" / "gmail" / "fixtures"
TEMPLATE = json.loads((FIXTURES / "messages.get.full.text_plain.gmail-api-parse-message.json").read_text())
ALTERNATIVE = json.loads((FIXTURES / "messages.get.full.multipart_alternative.gmail-api-parse-message.json").read_text())


def _b64(text: str) -> str:
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


@dataclass
class FakeMailbox:
    stub: StubServer
    messages: dict[str, dict[str, Any]] = field(default_factory=dict)
    history: list[dict[str, Any]] = field(default_factory=list)
    history_id: int = 1000
    # history ids below this are "expired": history.list answers 404 for them.
    oldest_history: int = 0
    token_status: int = 200
    _counter: int = 0

    def add(
        self,
        *,
        text: str,
        date: datetime,
        thread_id: str | None = None,
        subject: str = "Quarterly plan",
        sender: str = "Ada Lovelace <ada@acme.test>",
        labels: tuple[str, ...] = ("INBOX",),
        html: bool = False,
    ) -> dict[str, Any]:
        """Deliver a message (recorded shape) and record a messageAdded history entry."""
        self._counter += 1
        self.history_id += 1
        message_id = f"msg{self._counter:04d}"
        message = copy.deepcopy(ALTERNATIVE if html else TEMPLATE)
        message.update(
            id=message_id,
            threadId=thread_id or f"thr{self._counter:04d}",
            labelIds=list(labels),
            historyId=str(self.history_id),
            internalDate=str(int(date.timestamp() * 1000)),
            snippet=text[:50],
        )
        payload = message["payload"]
        headers = [h for h in payload.get("headers", []) if h["name"].lower() not in {"date", "subject", "from", "message-id"}]
        headers += [
            {"name": "Date", "value": format_datetime(date)},
            {"name": "Subject", "value": subject},
            {"name": "From", "value": sender},
            {"name": "Message-ID", "value": f"<{message_id}@mail.acme.test>"},
        ]
        payload["headers"] = headers
        if html:
            payload["parts"][0]["body"] = {"size": len(text), "data": _b64(text)}
            payload["parts"][1]["body"] = {"size": len(text), "data": _b64(f"<div dir='ltr'>{text}</div>")}
        else:
            payload["body"] = {"size": len(text), "data": _b64(text)}
        self.messages[message_id] = message
        self.history.append(
            {
                "id": str(self.history_id),
                "messages": [{"id": message_id, "threadId": message["threadId"]}],
                "messagesAdded": [{"message": {"id": message_id, "threadId": message["threadId"], "labelIds": list(labels)}}],
            }
        )
        return message

    def delete(self, message_id: str) -> None:
        message = self.messages.pop(message_id)
        self.history_id += 1
        self.history.append(
            {"id": str(self.history_id), "messagesDeleted": [{"message": {"id": message_id, "threadId": message["threadId"]}}]}
        )

    def trash(self, message_id: str) -> None:
        message = self.messages[message_id]
        message["labelIds"] = ["TRASH"]
        self.history_id += 1
        self.history.append(
            {
                "id": str(self.history_id),
                "labelsAdded": [{"message": {"id": message_id, "threadId": message["threadId"]}, "labelIds": ["TRASH"]}],
            }
        )

    def expire_history(self) -> None:
        self.oldest_history = self.history_id

    # -- the endpoints ---------------------------------------------------------------------
    def install(self) -> None:
        self.stub.route("POST", "/token", self._token)
        self.stub.route(
            "GET",
            "/gmail/v1/users/me/profile",
            lambda r: StubResponse(
                json={
                    "emailAddress": "ada@acme.test",
                    "messagesTotal": len(self.messages),
                    "threadsTotal": len(self._threads()),
                    "historyId": str(self.history_id),
                }
            ),
        )
        self.stub.route("GET", "/gmail/v1/users/me/messages", self._list)
        self.stub.route("GET", "/gmail/v1/users/me/history", self._history)
        self.stub.route("GET", r"/gmail/v1/users/me/threads/[^/]+", self._thread)

    def _token(self, request: Received) -> StubResponse:
        if self.token_status != 200:
            return StubResponse(
                status=self.token_status,
                json={"error": "invalid_grant", "error_description": "Token has been expired or revoked."},
            )
        return StubResponse(
            json={
                "access_token": "ya29.stub-access",
                "expires_in": 3599,
                "token_type": "Bearer",
                "scope": "https://www.googleapis.com/auth/gmail.readonly",
            }
        )

    def _threads(self) -> dict[str, list[dict[str, Any]]]:
        threads: dict[str, list[dict[str, Any]]] = {}
        for message in self.messages.values():
            threads.setdefault(message["threadId"], []).append(message)
        return threads

    def _list(self, request: Received) -> StubResponse:
        query = request.query.get("q", "")
        after = re.search(r"after:(\d+)", query)
        msgid = re.search(r"rfc822msgid:(\S+)", query)
        words = [w for w in re.sub(r"after:\d+|rfc822msgid:\S+|[()]", " ", query).split() if w]
        label = request.query.get("labelIds")
        found = []
        for message in sorted(self.messages.values(), key=lambda m: int(m["internalDate"]), reverse=True):
            if "TRASH" in message["labelIds"] or "SPAM" in message["labelIds"]:
                continue
            if after and int(message["internalDate"]) // 1000 <= int(after.group(1)):
                continue
            if msgid and f"<{msgid.group(1)}>" not in json.dumps(message["payload"]["headers"]):
                continue
            if label and label not in message["labelIds"]:
                continue
            body = base64.urlsafe_b64decode(_body_data(message) + "==").decode()
            if any(w.lower() not in body.lower() for w in words):
                continue
            found.append({"id": message["id"], "threadId": message["threadId"]})
        size = int(request.query.get("maxResults", "100"))
        start = int(request.query.get("pageToken", "0"))
        page = found[start : start + size]
        answer: dict[str, Any] = {"messages": page, "resultSizeEstimate": len(found)} if page else {"resultSizeEstimate": 0}
        if start + size < len(found):
            answer["nextPageToken"] = str(start + size)
        return StubResponse(json=answer)

    def _history(self, request: Received) -> StubResponse:
        start = int(request.query["startHistoryId"])
        if start < self.oldest_history:
            return StubResponse(
                status=404,
                json={
                    "error": {
                        "code": 404,
                        "message": "Requested entity was not found.",
                        "status": "NOT_FOUND",
                        "errors": [{"message": "Requested entity was not found.", "domain": "global", "reason": "notFound"}],
                    }
                },
            )
        records = [h for h in self.history if int(h["id"]) > start]
        size = 2  # small pages, so paging is exercised
        offset = int(request.query.get("pageToken", "0"))
        answer: dict[str, Any] = {"historyId": str(self.history_id)}
        if records[offset : offset + size]:
            answer["history"] = records[offset : offset + size]
        if offset + size < len(records):
            answer["nextPageToken"] = str(offset + size)
        return StubResponse(json=answer)

    def _thread(self, request: Received) -> StubResponse:
        thread_id = request.path.rsplit("/", 1)[1]
        messages = sorted(self._threads().get(thread_id, []), key=lambda m: int(m["internalDate"]))
        if not messages:
            return StubResponse(
                status=404, json={"error": {"code": 404, "message": "Requested entity was not found.", "status": "NOT_FOUND"}}
            )
        return StubResponse(json={"id": thread_id, "historyId": messages[-1]["historyId"], "messages": messages})


def _body_data(message: dict[str, Any]) -> str:
    payload = message["payload"]
    return payload["parts"][0]["body"]["data"] if payload.get("parts") else payload["body"]["data"]

"""Every call Cortex makes to the Gmail API (google-api-python-client, users/me, read-only)."""

from __future__ import annotations

from typing import Any

from connectors.sources.gmail.google_http import build_service, credentials_from, execute

SCOPES = ["https://www.googleapis.com/auth/gmail.readonly"]
PRODUCT = "Gmail"


class GmailClient:
    def __init__(self, *, credentials: dict[str, Any], api_url: str | None = None) -> None:
        self._service = build_service("gmail", "v1", credentials=credentials_from(credentials, scopes=SCOPES), api_url=api_url)
        self._users = self._service.users()

    def profile(self) -> dict[str, Any]:
        """The mailbox address and its current historyId."""
        return execute(self._users.getProfile(userId="me").execute, what="the mailbox profile", product=PRODUCT)  # type: ignore[no-any-return]

    def list_messages(self, *, query: str, label_ids: list[str], page_token: str | None, max_results: int) -> dict[str, Any]:
        request = self._users.messages().list(
            userId="me",
            q=query or None,
            labelIds=label_ids or None,
            pageToken=page_token or None,
            maxResults=max_results,
            includeSpamTrash=False,
        )
        return execute(request.execute, what="the message list", product=PRODUCT)  # type: ignore[no-any-return]

    def list_history(self, *, start_history_id: str, label_id: str | None, page_token: str | None) -> dict[str, Any]:
        """Mailbox changes after `start_history_id`; NotFound when Google no longer keeps that id."""
        request = self._users.history().list(
            userId="me",
            startHistoryId=start_history_id,
            historyTypes=["messageAdded", "messageDeleted", "labelAdded", "labelRemoved"],
            labelId=label_id or None,
            pageToken=page_token or None,
            maxResults=500,
        )
        return execute(request.execute, what="the mailbox history", product=PRODUCT)  # type: ignore[no-any-return]

    def get_thread(self, thread_id: str) -> dict[str, Any]:
        """A thread with every message in full; NotFound when it was deleted."""
        request = self._users.threads().get(userId="me", id=thread_id, format="full")
        return execute(request.execute, what=f"thread {thread_id}", product=PRODUCT)  # type: ignore[no-any-return]

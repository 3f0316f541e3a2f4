"""Google Drive: one memory per document, kept current through the Drive change feed.

Checkpoint: one stream, "changes", whose cursor holds:
- `mode`: "list" (the first run: documents modified in the window, newest first) or "changes".
- `start_token`: the change feed position taken *before* the first listing, so an edit made
  while listing is seen by the first change pass (a replay of an unchanged document is a no-op).
- `page_token`: the listing page, or the change page, to fetch next.

Each page asks Drive for at most `limit` files or changes, so a page never holds more than the
framework asked for. A change that says `removed` (deleted, or the connector's account lost
access) or a trashed file comes back deleted, which redacts its memory.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import PurePath
from typing import Any, ClassVar

from connectors.base import Page, Source, SourceItem
from connectors.errors import PermanentSourceError, RetryableSourceError
from connectors.models import ConnectorItem
from connectors.sources.drive.client import DriveClient
from connectors.sources.gmail.google_http import NotFound, clean_credentials
from cortex_site.errors import CortexError, ValidationFailed
from memories.services.documents import check_size, extract_text

STREAM = "changes"
GOOGLE_DOC = "application/vnd.google-apps.document"
# Files downloaded and run through Cortex's own extraction, by MIME type → the extension it expects.
DOWNLOADED = {
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document": ".docx",
    "application/pdf": ".pdf",
    "text/plain": ".txt",
    "text/markdown": ".md",
    "text/x-markdown": ".md",
}
SUPPORTED_EXTENSIONS = (".docx", ".pdf", ".txt", ".md")
MAX_FETCHES = 5
_FOLDER_ID_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_")


class DriveSource(Source):
    kind: ClassVar[str] = "drive"
    label: ClassVar[str] = "Google Drive"
    default_cap: ClassVar[int | None] = 4
    default_first_run_days: ClassVar[int | None] = 3
    default_interval_minutes: ClassVar[int] = 15
    push: ClassVar[bool] = False
    pull: ClassVar[bool] = True

    @classmethod
    def validate_config(
        cls, config: dict[str, Any], credentials: dict[str, Any], *, organization: Any
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        cleaned: dict[str, Any] = {"mode": "poll"}
        for key in ("api_url", "folder_id"):
            value = config.get(key, "")
            if not isinstance(value, str):
                raise ValidationFailed(f"Drive {key} must be text.", error_code="INVALID_CONFIG", details={"field": key})
            if value.strip():
                cleaned[key] = value.strip()
        folder = cleaned.get("folder_id", "")
        if folder and not set(folder) <= _FOLDER_ID_CHARS:
            # The id goes into a Drive query string: only the characters Drive ids use are accepted.
            raise ValidationFailed(
                "The folder id is the last part of the folder's address (letters, digits, - and _).",
                error_code="INVALID_FOLDER_ID",
                details={"field": "folder_id"},
            )
        secret = clean_credentials(credentials, product="Google Drive", needs_subject=False)
        return cleaned, secret

    def _client(self) -> DriveClient:
        return DriveClient(credentials=self.credentials, api_url=self.config.get("api_url") or None)

    def test_connection(self) -> str:
        user = self._client().about().get("user") or {}
        return f"Connected to Google Drive as {user.get('displayName') or user.get('emailAddress') or 'the account'}."

    # -- the pull ----------------------------------------------------------------------------
    def fetch_page(self, checkpoint: dict[str, Any], *, limit: int, first_run_since: datetime | None) -> Page:
        client = self._client()
        saved = checkpoint.get(STREAM)
        if saved:
            state = dict(saved)
        else:
            since = first_run_since or datetime.now(UTC) - timedelta(days=self.default_first_run_days or 3)
            state = {"mode": "list", "start_token": client.start_page_token(), "since": since.isoformat(), "page_token": None}
        items: list[SourceItem] = []
        failures: list[tuple[str, str]] = []
        done = False
        for _ in range(MAX_FETCHES):
            room = limit - len(items)
            if room <= 0:
                break
            if state["mode"] == "list":
                response = client.list_files(
                    query=self._listing_query(state["since"]), page_token=state.get("page_token"), page_size=room
                )
                for file in response.get("files") or []:
                    self._add(client, file, items, failures)
                state["page_token"] = response.get("nextPageToken")
                if not state["page_token"]:
                    state = {"mode": "changes", "page_token": state["start_token"]}
                    done = True
                    break
            else:
                response = client.list_changes(page_token=state["page_token"], page_size=room)
                # A file edited several times appears once per edit: only its last change is read.
                latest = {str(c.get("fileId") or (c.get("file") or {}).get("id") or ""): c for c in response.get("changes") or []}
                for change in latest.values():
                    self._change(client, change, items, failures)
                if response.get("nextPageToken"):
                    state["page_token"] = response["nextPageToken"]
                else:
                    # The end of the feed: newStartPageToken is where the next pass starts.
                    state["page_token"] = response.get("newStartPageToken") or state["page_token"]
                    done = True
                    break
        return Page(items=items, checkpoint={STREAM: state}, done=done, failures=failures)

    def _listing_query(self, since: str) -> str:
        when = datetime.fromisoformat(since).astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S")
        types = " or ".join(f"mimeType = '{mime}'" for mime in (GOOGLE_DOC, *DOWNLOADED))
        query = f"({types}) and modifiedTime > '{when}' and trashed = false"
        folder = self.config.get("folder_id")
        if folder:
            query += f" and '{folder}' in parents"
        return query

    def _change(
        self, client: DriveClient, change: dict[str, Any], items: list[SourceItem], failures: list[tuple[str, str]]
    ) -> None:
        if change.get("changeType", "file") != "file":
            return  # a shared drive itself changed (renamed, ...): no document to update
        file_id = str(change.get("fileId") or (change.get("file") or {}).get("id") or "")
        file = change.get("file") or {}
        if change.get("removed") or not file:
            # Deleted for good, or the account lost access (unshared): both mean "gone" for Cortex.
            if self._known(file_id):
                items.append(_deleted(file_id))
            return
        if file.get("trashed"):
            if self._known(file_id):
                items.append(_deleted(file_id))
            return
        if not self._in_scope(file):
            # Moved out of the folder, or a type Cortex does not read: drop what was stored of it.
            if self._known(file_id):
                items.append(_deleted(file_id))
            return
        self._add(client, file, items, failures)

    def _in_scope(self, file: dict[str, Any]) -> bool:
        if _extension_for(file) is None and file.get("mimeType") != GOOGLE_DOC:
            return False
        folder = self.config.get("folder_id")
        return not folder or folder in (file.get("parents") or [])

    def _known(self, file_id: str) -> bool:
        return ConnectorItem.objects.filter(connector_id=self.connector.pk, external_id=file_id, deleted=False).exists()

    def _add(self, client: DriveClient, file: dict[str, Any], items: list[SourceItem], failures: list[tuple[str, str]]) -> None:
        file_id = str(file["id"])
        try:
            text = self._text(client, file)
        except NotFound:
            # Gone between the listing and the download.
            if self._known(file_id):
                items.append(_deleted(file_id))
            return
        except (CortexError, PermanentSourceError) as exc:
            # This file cannot be read (too large, damaged, an export Drive refuses): the others still sync.
            failures.append((file_id, f"{file.get('name', file_id)}: {getattr(exc, 'message', str(exc))}"))
            return
        except RetryableSourceError:
            raise
        user = file.get("lastModifyingUser") or {}
        items.append(
            SourceItem(
                external_id=file_id,
                title=str(file.get("name") or "Untitled document"),
                content=text,
                source_url=str(file.get("webViewLink") or f"https://drive.google.com/file/d/{file_id}/view"),
                author_name=str(user.get("displayName") or ""),
                author_email=str(user.get("emailAddress") or ""),
                valid_from=_parse_time(file.get("modifiedTime")),
                category="document",
                tags=("drive",),
            )
        )

    def _text(self, client: DriveClient, file: dict[str, Any]) -> str:
        name = str(file.get("name") or file["id"])
        if file.get("mimeType") == GOOGLE_DOC:
            data = client.export_text(str(file["id"]))
            # Drive's text/plain export starts with a UTF-8 byte order mark.
            text = data.decode("utf-8-sig", errors="replace").replace("\r\n", "\n").strip()
            if not text:
                raise ValidationFailed(f"{name} is empty.", error_code="EMPTY_CONTENT")
            return text
        extension = _extension_for(file) or ".txt"
        if file.get("size") and str(file["size"]).isdigit():
            check_size(name, int(file["size"]))  # refuse before downloading, not after
        filename = name if PurePath(name).suffix.lower() == extension else f"{name}{extension}"
        return extract_text(filename, client.download(str(file["id"]))).text


def _extension_for(file: dict[str, Any]) -> str | None:
    if str(file.get("mimeType") or "").startswith("application/vnd.google-apps."):
        # Drive's own kinds (shortcuts, folders, Sheets) have no bytes to download, whatever their
        # name ends with: a shortcut takes its target's name ("Q3 plan.pdf").
        return None
    suffix = PurePath(str(file.get("name") or "")).suffix.lower()
    if suffix in SUPPORTED_EXTENSIONS:
        return suffix
    return DOWNLOADED.get(str(file.get("mimeType") or ""))


def _deleted(file_id: str) -> SourceItem:
    return SourceItem(external_id=file_id, title="", content="", deleted=True)


def _parse_time(value: Any) -> datetime | None:
    if not value:
        return None
    try:
        return datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        return None

"""Every call Cortex makes to the Google Drive v3 API (google-api-python-client, read-only)."""

from __future__ import annotations

from typing import Any

from connectors.sources.gmail.google_http import build_service, credentials_from, execute

SCOPES = ["https://www.googleapis.com/auth/drive.readonly"]
PRODUCT = "Google Drive"
FILE_FIELDS = "id,name,mimeType,modifiedTime,webViewLink,trashed,size,parents,lastModifyingUser(displayName,emailAddress)"


def service_endpoint(api_url: str | None) -> str | None:
    """The client's api_endpoint replaces the discovery document's root URL *and* service path, so
    a root like "https://www.googleapis.com/" (what people copy) gets Drive's "drive/v3/" added."""
    if not api_url:
        return None
    base = api_url.rstrip("/")
    return base + "/" if base.endswith("/drive/v3") else base + "/drive/v3/"


class DriveClient:
    def __init__(self, *, credentials: dict[str, Any], api_url: str | None = None) -> None:
        self._service = build_service(
            "drive", "v3", credentials=credentials_from(credentials, scopes=SCOPES), api_url=service_endpoint(api_url)
        )
        self._files = self._service.files()
        self._changes = self._service.changes()

    def about(self) -> dict[str, Any]:
        request = self._service.about().get(fields="user(displayName,emailAddress)")
        return execute(request.execute, what="the account", product=PRODUCT)  # type: ignore[no-any-return]

    def list_files(self, *, query: str, page_token: str | None, page_size: int) -> dict[str, Any]:
        request = self._files.list(
            q=query,
            orderBy="modifiedTime desc",
            pageSize=page_size,
            pageToken=page_token or None,
            fields=f"nextPageToken,files({FILE_FIELDS})",
            spaces="drive",
            includeItemsFromAllDrives=True,
            supportsAllDrives=True,
        )
        return execute(request.execute, what="the file list", product=PRODUCT)  # type: ignore[no-any-return]

    def start_page_token(self) -> str:
        request = self._changes.getStartPageToken(supportsAllDrives=True)
        return str(execute(request.execute, what="the change feed's start", product=PRODUCT)["startPageToken"])

    def list_changes(self, *, page_token: str, page_size: int) -> dict[str, Any]:
        request = self._changes.list(
            pageToken=page_token,
            pageSize=page_size,
            includeRemoved=True,
            includeItemsFromAllDrives=True,
            supportsAllDrives=True,
            spaces="drive",
            fields=f"nextPageToken,newStartPageToken,changes(kind,changeType,removed,fileId,time,file({FILE_FIELDS}))",
        )
        return execute(request.execute, what="the change feed", product=PRODUCT)  # type: ignore[no-any-return]

    def export_text(self, file_id: str) -> bytes:
        """A Google Doc as text/plain (Drive exports at most 10 MB); NotFound when it is gone."""
        request = self._files.export(fileId=file_id, mimeType="text/plain")
        return execute(request.execute, what=f"the export of file {file_id}", product=PRODUCT)  # type: ignore[no-any-return]

    def download(self, file_id: str) -> bytes:
        request = self._files.get_media(fileId=file_id, supportsAllDrives=True)
        return execute(request.execute, what=f"the content of file {file_id}", product=PRODUCT)  # type: ignore[no-any-return]

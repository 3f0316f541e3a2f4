"""A Google Drive served at the HTTP boundary, in the documented v3 shapes (see fixtures/SOURCES.md:
no real Drive payloads exist to record). The real google-api-python-client, with its shipped
static discovery document, httplib2 and google-auth's token refresh, talks to the loopback stub.
"""

from __future__ import annotations

import copy
import json
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from support.stub_server import Received, StubResponse, StubServer

FIXTURES = Path(__file__).resolve().parent.parent / "connectors" / "drive" / "fixtures"
FILE_TEMPLATE = json.loads((FIXTURES / "files.get__google_doc.json").read_text())
GOOGLE_DOC = "application/vnd.google-apps.document"
FOLDER = "0AbCdEfGhIjKlUk9PVA"


def _stamp(when: datetime) -> str:
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.000Z")


def _not_found(file_id: str) -> StubResponse:
    return StubResponse(
        status=404,
        json={
            "error": {
                "code": 404,
                "message": f"File not found: {file_id}.",
                "errors": [{"domain": "global", "reason": "notFound", "message": f"File not found: {file_id}."}],
            }
        },
    )


@dataclass
class FakeDrive:
    stub: StubServer
    files: dict[str, dict[str, Any]] = field(default_factory=dict)
    content: dict[str, bytes] = field(default_factory=dict)
    changes: list[dict[str, Any]] = field(default_factory=list)
    _counter: int = 0

    def put(
        self,
        name: str,
        data: bytes | str,
        *,
        modified: datetime,
        mime: str = GOOGLE_DOC,
        file_id: str | None = None,
        folder: str = FOLDER,
        editor: tuple[str, str] = ("Ada Lovelace", "ada@acme.test"),
    ) -> dict[str, Any]:
        """Create or edit a file and record the change."""
        if file_id is None:
            self._counter += 1
            file_id = f"1doc{self._counter:04d}XyZ"
        file = copy.deepcopy(FILE_TEMPLATE)
        file.update(
            id=file_id,
            name=name,
            mimeType=mime,
            parents=[folder],
            modifiedTime=_stamp(modified),
            trashed=False,
            lastModifyingUser={"kind": "drive#user", "displayName": editor[0], "emailAddress": editor[1]},
            webViewLink=f"https://docs.google.com/document/d/{file_id}/edit?usp=drivesdk",
        )
        raw = data.encode() if isinstance(data, str) else data
        if mime == GOOGLE_DOC:
            raw = "\ufeff".encode() + raw  # Drive's text/plain export starts with a BOM
        else:
            file["size"] = str(len(raw))
        self.files[file_id] = file
        self.content[file_id] = raw
        self._record(file_id, file)
        return file

    def trash(self, file_id: str) -> None:
        self.files[file_id]["trashed"] = True
        self._record(file_id, self.files[file_id])

    def remove(self, file_id: str) -> None:
        """Deleted for good, or unshared from the connector's account: the change has no file."""
        self.files.pop(file_id, None)
        self._record(file_id, None)

    def move(self, file_id: str, folder: str) -> None:
        self.files[file_id]["parents"] = [folder]
        self._record(file_id, self.files[file_id])

    def _record(self, file_id: str, file: dict[str, Any] | None) -> None:
        change: dict[str, Any] = {
            "kind": "drive#change",
            "changeType": "file",
            "time": _stamp(datetime.now(UTC)),
            "removed": file is None,
            "fileId": file_id,
        }
        if file is not None:
            change["file"] = copy.deepcopy(file)
        self.changes.append(change)

    def install(self) -> None:
        self.stub.route(
            "POST", "/token", StubResponse(json={"access_token": "ya29.stub-drive", "expires_in": 3599, "token_type": "Bearer"})
        )
        self.stub.route(
            "GET",
            "/drive/v3/changes/startPageToken",
            lambda r: StubResponse(json={"kind": "drive#startPageToken", "startPageToken": str(len(self.changes) + 1)}),
        )
        self.stub.route("GET", "/drive/v3/changes", self._changes)
        self.stub.route("GET", "/drive/v3/files", self._list)
        self.stub.route("GET", r"/drive/v3/files/[^/]+/export", self._export)
        self.stub.route("GET", r"/drive/v3/files/[^/]+", self._get)
        self.stub.route(
            "GET",
            "/drive/v3/about",
            StubResponse(json={"user": {"displayName": "Ada Lovelace", "emailAddress": "ada@acme.test"}}),
        )

    def _list(self, request: Received) -> StubResponse:
        query = request.query["q"]
        mimes = set(re.findall(r"mimeType = '([^']+)'", query))
        after = re.search(r"modifiedTime > '([^']+)'", query)
        folder = re.search(r"'([^']+)' in parents", query)
        found = []
        for file in sorted(self.files.values(), key=lambda f: f["modifiedTime"], reverse=True):
            if file["trashed"] or (mimes and file["mimeType"] not in mimes):
                continue
            if after and file["modifiedTime"][:19] <= after.group(1):
                continue
            if folder and folder.group(1) not in file["parents"]:
                continue
            found.append(file)
        size = int(request.query.get("pageSize", "100"))
        start = int(request.query.get("pageToken", "0"))
        answer: dict[str, Any] = {"kind": "drive#fileList", "incompleteSearch": False, "files": found[start : start + size]}
        if start + size < len(found):
            answer["nextPageToken"] = str(start + size)
        return StubResponse(json=answer)

    def _changes(self, request: Received) -> StubResponse:
        position = int(request.query["pageToken"])  # 1-based, like Drive's numeric tokens
        size = int(request.query.get("pageSize", "100"))
        page = self.changes[position - 1 : position - 1 + size]
        answer: dict[str, Any] = {"kind": "drive#changeList", "changes": page}
        if position - 1 + size < len(self.changes):
            answer["nextPageToken"] = str(position + size)
        else:
            answer["newStartPageToken"] = str(len(self.changes) + 1)
        return StubResponse(json=answer)

    def _export(self, request: Received) -> StubResponse:
        file_id = request.path.split("/")[-2]
        if file_id not in self.files:
            return _not_found(file_id)
        assert request.query.get("mimeType") == "text/plain"
        return StubResponse(body=self.content[file_id], headers={"Content-Type": "text/plain; charset=UTF-8"})

    def _get(self, request: Received) -> StubResponse:
        file_id = request.path.rsplit("/", 1)[1]
        if file_id not in self.files:
            return _not_found(file_id)
        if request.query.get("alt") == "media":
            return StubResponse(body=self.content[file_id], headers={"Content-Type": self.files[file_id]["mimeType"]})
        return StubResponse(json=self.files[file_id])

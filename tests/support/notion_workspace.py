"""A Notion workspace served at the HTTP boundary: notion-client (Notion-Version 2025-09-03) talks
to the loopback stub through its base URL. Pages are copies of the recorded search result page
(notion-sdk-py cassette) with ids, titles and times changed; blocks are built in the recorded
block shapes; the recorded paginated block lists are served as they are where a test says so.
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

FIXTURES = Path(__file__).resolve().parent.parent / "connectors" / "notion" / "fixtures"
SEARCH = json.loads((FIXTURES / "search.response.notion-sdk-py.json").read_text())
PAGE_TEMPLATE = next(r for r in SEARCH["results"] if r["object"] == "page")


def stamp(when: datetime) -> str:
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:00.000Z")  # Notion keeps minutes


def rich(text: str) -> list[dict[str, Any]]:
    return [
        {
            "type": "text",
            "text": {"content": text, "link": None},
            "plain_text": text,
            "href": None,
            "annotations": {
                "bold": False,
                "italic": False,
                "strikethrough": False,
                "underline": False,
                "code": False,
                "color": "default",
            },
        }
    ]


def block(kind: str, text: str = "", *, children: list[dict[str, Any]] | None = None, **body: Any) -> dict[str, Any]:
    content: dict[str, Any] = {"rich_text": rich(text), "color": "default", **body}
    return {
        "object": "block",
        "type": kind,
        kind: content,
        "has_children": bool(children),
        "_children": children or [],
        "archived": False,
        "in_trash": False,
    }


def _error(status: int, code: str, message: str, headers: dict[str, str] | None = None) -> StubResponse:
    return StubResponse(
        status=status,
        headers=headers or {},
        json={
            "object": "error",
            "status": status,
            "code": code,
            "message": message,
            "request_id": "00000000-0000-4000-8000-000000000000",
        },
    )


@dataclass
class FakeNotion:
    stub: StubServer
    pages: dict[str, dict[str, Any]] = field(default_factory=dict)
    blocks: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    databases: dict[str, list[str]] = field(default_factory=dict)  # database id → data source ids
    hidden_from_search: set[str] = field(default_factory=set)
    _counter: int = 0

    def _id(self) -> str:
        self._counter += 1
        return f"26899f72-bada-80{self._counter:02d}-a8ed-c01b19c0effb"

    def page(
        self,
        title: str,
        body: list[dict[str, Any]] | None = None,
        *,
        edited: datetime,
        page_id: str | None = None,
        data_source: str | None = None,
        properties: dict[str, Any] | None = None,
        in_search: bool = True,
    ) -> dict[str, Any]:
        """Create or edit a page (a database row when `data_source` is given)."""
        page = copy.deepcopy(self.pages.get(page_id) or PAGE_TEMPLATE) if page_id else copy.deepcopy(PAGE_TEMPLATE)
        page_id = page_id or self._id()
        page.update(
            id=page_id,
            last_edited_time=stamp(edited),
            archived=False,
            in_trash=False,
            url=f"https://www.notion.so/{re.sub('[^A-Za-z0-9]+', '-', title)}-{page_id.replace('-', '')}",
        )
        page["properties"] = {"Name": {"id": "title", "type": "title", "title": rich(title)}, **(properties or {})}
        if data_source:
            page["parent"] = {"type": "data_source_id", "data_source_id": data_source, "database_id": f"db-of-{data_source}"}
        else:
            page["parent"] = {"type": "workspace", "workspace": True}
        self.pages[page_id] = page
        self._set_blocks(page_id, body or [])
        if not in_search:
            self.hidden_from_search.add(page_id)
        return page

    def _set_blocks(self, parent_id: str, blocks: list[dict[str, Any]]) -> None:
        stored = []
        for index, item in enumerate(blocks):
            item = dict(item)
            item["id"] = f"{parent_id}_c{index}"
            children = item.pop("_children", [])
            self._set_blocks(item["id"], children)
            stored.append(item)
        self.blocks[parent_id] = stored

    def archive(self, page_id: str) -> None:
        self.pages[page_id]["archived"] = True
        self.pages[page_id]["in_trash"] = True

    def delete(self, page_id: str) -> None:
        """Gone for the integration (deleted for good, or unshared): every read answers 404."""
        del self.pages[page_id]

    # -- the endpoints ---------------------------------------------------------------------
    def install(self) -> None:
        self.stub.route("POST", "/v1/search", self._search)
        self.stub.route("POST", r"/v1/data_sources/[^/]+/query", self._query)
        self.stub.route("GET", r"/v1/databases/[^/]+", self._database)
        self.stub.route("GET", r"/v1/data_sources/[^/]+", self._data_source)
        self.stub.route("GET", r"/v1/blocks/[^/]+/children", self._children)
        self.stub.route("GET", r"/v1/pages/[^/]+", self._page)
        self.stub.route(
            "GET",
            "/v1/users/me",
            StubResponse(
                json={"object": "user", "id": "bot-1", "type": "bot", "name": "Cortex", "bot": {"workspace_name": "Acme"}}
            ),
        )
        self.stub.route(
            "GET",
            r"/v1/users/[^/]+",
            lambda r: StubResponse(
                json={
                    "object": "user",
                    "id": r.path.rsplit("/", 1)[1],
                    "type": "person",
                    "name": "Ada Lovelace",
                    "person": {"email": "ada@acme.test"},
                }
            ),
        )

    def _paged(self, results: list[dict[str, Any]], body: dict[str, Any], kind: str) -> StubResponse:
        size = int(body.get("page_size") or 100)
        start = int(body.get("start_cursor") or 0)
        more = start + size < len(results)
        return StubResponse(
            json={
                "object": "list",
                "results": results[start : start + size],
                "next_cursor": str(start + size) if more else None,
                "has_more": more,
                "type": kind,
                kind: {},
                "request_id": "11111111-1111-4111-8111-111111111111",
            }
        )

    def _search(self, request: Received) -> StubResponse:
        body = request.json()
        assert body["filter"] == {"property": "object", "value": "page"}
        assert body["sort"] == {"timestamp": "last_edited_time", "direction": "descending"}
        found = [
            p for p in self.pages.values() if not p["archived"] and not p["in_trash"] and p["id"] not in self.hidden_from_search
        ]
        found.sort(key=lambda p: p["last_edited_time"], reverse=True)
        return self._paged(found, body, "page_or_data_source")

    def _query(self, request: Received) -> StubResponse:
        source = request.path.split("/")[3]
        body = request.json()
        since = body["filter"]["last_edited_time"]["on_or_after"]
        rows = [
            p
            for p in self.pages.values()
            if p["parent"].get("data_source_id") == source and not p["archived"] and p["last_edited_time"] >= since
        ]
        rows.sort(key=lambda p: p["last_edited_time"])
        return self._paged(rows, body, "page_or_data_source")

    def _database(self, request: Received) -> StubResponse:
        database_id = request.path.rsplit("/", 1)[1]
        if database_id not in self.databases:
            return _error(404, "object_not_found", f"Could not find database with ID: {database_id}.")
        return StubResponse(
            json={
                "object": "database",
                "id": database_id,
                "title": rich("Accounts"),
                "data_sources": [{"id": ds, "name": "Accounts"} for ds in self.databases[database_id]],
            }
        )

    def _data_source(self, request: Received) -> StubResponse:
        source = request.path.rsplit("/", 1)[1]
        if not any(source in sources for sources in self.databases.values()):
            return _error(404, "object_not_found", f"Could not find data source with ID: {source}.")
        return StubResponse(json={"object": "data_source", "id": source, "title": rich("Accounts")})

    def _children(self, request: Received) -> StubResponse:
        parent = request.path.split("/")[3]
        owner = parent.split("_c")[0]
        if owner not in self.pages and parent not in self.blocks:
            return _error(404, "object_not_found", f"Could not find block with ID: {parent}.")
        query = {"page_size": request.query.get("page_size"), "start_cursor": request.query.get("start_cursor")}
        return self._paged(self.blocks.get(parent, []), query, "block")

    def _page(self, request: Received) -> StubResponse:
        page_id = request.path.rsplit("/", 1)[1]
        if page_id not in self.pages:
            return _error(404, "object_not_found", f"Could not find page with ID: {page_id}.")
        return StubResponse(json=self.pages[page_id])

"""Notion: one memory per page (database rows included, with their properties), kept current by
passes over what changed.

Each pass has three phases, each bounded per page by the framework's `limit`:
1. "search": pages shared with the integration, most recently edited first, down to the pass's
   `floor` (the newest edit seen by the previous pass; on the first run, the first-run window).
2. "databases": each configured database's data sources queried for rows edited on or after
   `floor` — search can miss rows inside databases, a query does not.
3. "sweep": a bounded slice of the pages this connector stored is re-read; a page now archived,
   in the trash, or no longer shared (404) comes back deleted, which redacts its memory. Search
   never returns such pages, so this is how deletions are seen. The slice moves on each pass
   (`sweep_after`), so every stored page is checked in turn.
Notion's `last_edited_time` has minute precision, so the floor is inclusive: a page edited in the
same minute is read again, and the framework turns an unchanged replay into nothing.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any, ClassVar

from django.core.cache import cache

from connectors.base import Page, Source, SourceItem
from connectors.errors import PermanentSourceError
from connectors.models import ConnectorItem
from connectors.sources.notion.blocks import Block, page_text, page_title
from connectors.sources.notion.client import NotFound, NotionClient
from cortex_site.errors import ValidationFailed

STREAM = "search"
MAX_DEPTH = 6  # nesting levels of blocks read under a page
MAX_BLOCKS = 2000  # blocks read for one page; the rest of a huge page is left out (and said so)
SWEEP_PER_PASS = 25
USER_CACHE_SECONDS = 3600


class NotionSource(Source):
    kind: ClassVar[str] = "notion"
    label: ClassVar[str] = "Notion"
    default_cap: ClassVar[int | None] = 8
    default_first_run_days: ClassVar[int | None] = 30
    default_interval_minutes: ClassVar[int] = 15
    push: ClassVar[bool] = False
    pull: ClassVar[bool] = True

    @classmethod
    def validate_config(
        cls, config: dict[str, Any], credentials: dict[str, Any], *, organization: Any
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        cleaned: dict[str, Any] = {"mode": "poll"}
        api_url = config.get("api_url", "")
        if not isinstance(api_url, str):
            raise ValidationFailed("Notion api_url must be text.", error_code="INVALID_CONFIG", details={"field": "api_url"})
        if api_url.strip():
            cleaned["api_url"] = api_url.strip()
        databases = config.get("databases") or []
        if isinstance(databases, str):
            databases = [part for part in databases.replace(",", " ").split() if part]
        if not isinstance(databases, list) or not all(isinstance(d, str) and d.strip() for d in databases):
            raise ValidationFailed(
                "databases is a list of Notion database ids.", error_code="INVALID_CONFIG", details={"field": "databases"}
            )
        if databases:
            cleaned["databases"] = [d.strip() for d in databases]
        token = str(credentials.get("token") or credentials.get("access_token") or "").strip()
        if not token:
            raise ValidationFailed(
                "Notion needs an integration secret (an internal integration's token, or a public integration's access token).",
                error_code="MISSING_CREDENTIALS",
                details={"field": "token"},
            )
        return cleaned, {"token": token}

    def _client(self) -> NotionClient:
        token = str(self.credentials.get("token") or "")
        if not token:
            raise PermanentSourceError("The Notion connector has no integration secret: paste one in its settings.")
        return NotionClient(token=token, api_url=self.config.get("api_url") or None)

    def test_connection(self) -> str:
        me = self._client().me()
        workspace = (me.get("bot") or {}).get("workspace_name") or "the workspace"
        return f"Connected to Notion ({workspace}) as {me.get('name') or 'the integration'}."

    # -- the pull ----------------------------------------------------------------------------
    def fetch_page(self, checkpoint: dict[str, Any], *, limit: int, first_run_since: datetime | None) -> Page:
        client = self._client()
        saved = checkpoint.get(STREAM)
        if saved:
            state = dict(saved)
        else:
            since = first_run_since or datetime.now(UTC) - timedelta(days=self.default_first_run_days or 30)
            state = {"phase": "search", "floor": _iso(since), "cursor": None, "high": None}
        items: list[SourceItem] = []
        failures: list[tuple[str, str]] = []
        done = False
        while len(items) < limit and not done:
            room = limit - len(items)
            phase = state["phase"]
            if phase == "search":
                self._search(client, state, room, items, failures)
            elif phase == "databases":
                self._databases(client, state, room, items, failures)
            else:
                self._sweep(client, state, room, items)
                if state["phase"] == "search":  # the sweep ended the pass
                    done = True
        return Page(items=items, checkpoint={STREAM: state}, done=done, failures=failures)

    def _search(
        self, client: NotionClient, state: dict[str, Any], room: int, items: list[SourceItem], failures: list[tuple[str, str]]
    ) -> None:
        response = client.search_pages(start_cursor=state.get("cursor"), page_size=room)
        floor = _parse(state["floor"])
        reached_floor = False
        for page in response.get("results") or []:
            if page.get("object") != "page":
                continue
            edited = _parse(page.get("last_edited_time"))
            if edited is not None and floor is not None and edited < floor:
                reached_floor = True
                break
            high = _parse(state.get("high"))
            if edited is not None and (high is None or edited > high):
                state["high"] = page.get("last_edited_time")
            self._add(client, page, items, failures)
        if reached_floor or not response.get("has_more"):
            state.update(phase="databases", cursor=None, db_index=0, db_sources=None)
        else:
            state["cursor"] = response.get("next_cursor")

    def _databases(
        self, client: NotionClient, state: dict[str, Any], room: int, items: list[SourceItem], failures: list[tuple[str, str]]
    ) -> None:
        if state.get("db_sources") is None:
            sources: list[str] = []
            for database_id in self.config.get("databases") or []:
                sources.extend(source for source in client.database_sources(database_id) if source not in sources)
            state["db_sources"] = sources
        sources = state["db_sources"]
        index = int(state.get("db_index") or 0)
        if index >= len(sources):
            state.update(phase="sweep", cursor=None, db_index=0, db_sources=None)
            return
        response = client.query_rows(
            sources[index], edited_since=state["floor"], start_cursor=state.get("cursor"), page_size=room
        )
        for row in response.get("results") or []:
            if row.get("object") == "page":
                self._add(client, row, items, failures)
        if response.get("has_more"):
            state["cursor"] = response.get("next_cursor")
        else:
            state.update(db_index=index + 1, cursor=None)

    def _sweep(self, client: NotionClient, state: dict[str, Any], room: int, items: list[SourceItem]) -> None:
        after = str(state.get("sweep_after") or "")
        budget = min(room, SWEEP_PER_PASS - int(state.get("swept") or 0))
        known = list(
            ConnectorItem.objects.filter(connector_id=self.connector.pk, deleted=False, external_id__gt=after)
            .order_by("external_id")
            .values_list("external_id", flat=True)[: max(0, budget)]
        )
        for page_id in known:
            try:
                page = client.retrieve_page(page_id)
            except NotFound:
                items.append(_deleted(page_id))
                continue
            if page.get("archived") or page.get("in_trash"):
                items.append(_deleted(page_id))
        state["swept"] = int(state.get("swept") or 0) + len(known)
        state["sweep_after"] = known[-1] if known else ""
        if not known or state["swept"] >= SWEEP_PER_PASS:
            # The pass ends: the next one reads what was edited since the newest edit seen now,
            # and sweeps on from where this one stopped (from the start once all were checked).
            state.update(phase="search", cursor=None, floor=state.get("high") or state["floor"], high=None, swept=0)
            if not known:
                state["sweep_after"] = ""

    # -- one page ----------------------------------------------------------------------------
    def _add(self, client: NotionClient, page: dict[str, Any], items: list[SourceItem], failures: list[tuple[str, str]]) -> None:
        page_id = str(page["id"])
        if page.get("archived") or page.get("in_trash"):
            items.append(_deleted(page_id))
            return
        try:
            blocks, truncated = self._blocks(client, page_id)
        except NotFound:
            items.append(_deleted(page_id))
            return
        text = page_text(page, blocks, lambda block: block.get("_children") or [])
        title = page_title(page) or "Untitled"
        if not text:
            text = title  # an empty page (or a row with no properties) is still its title
        name, email = self._author(client, page)
        items.append(
            SourceItem(
                external_id=page_id,
                title=title,
                content=text,
                source_url=str(page.get("url") or ""),
                author_name=name,
                author_email=email,
                valid_from=_parse(page.get("last_edited_time")),
                category="document",
                tags=("notion",),
                warning=f"Only the first {MAX_BLOCKS} blocks of this page were read." if truncated else "",
            )
        )

    def _blocks(self, client: NotionClient, block_id: str) -> tuple[list[Block], bool]:
        """The page's blocks with their children (under `_children`), paginated, to MAX_DEPTH levels
        and MAX_BLOCKS blocks. Child pages and databases are not entered: they are pages of their own."""
        budget = [MAX_BLOCKS]
        cut = [False]  # blocks were left unread

        def read(parent_id: str, depth: int) -> list[Block]:
            found: list[Block] = []
            cursor: str | None = None
            while not cut[0]:
                if budget[0] <= 0:
                    cut[0] = True
                    break
                try:
                    response = client.block_children(parent_id, start_cursor=cursor)
                except NotFound:
                    if depth == 1:
                        raise  # the page itself is gone
                    # A nested block deleted while the page is read, or a synced copy whose original is
                    # not shared with the integration: only that block's content is missing, not the page.
                    break
                for block in response.get("results") or []:
                    if budget[0] <= 0:
                        cut[0] = True
                        break
                    budget[0] -= 1
                    found.append(block)
                if not response.get("has_more"):
                    break
                cursor = response.get("next_cursor")
            for block in found:
                if block.get("has_children") and depth < MAX_DEPTH and block.get("type") not in {"child_page", "child_database"}:
                    block["_children"] = read(str(block["id"]), depth + 1)
            return found

        blocks = read(block_id, 1)
        return blocks, cut[0]

    def _author(self, client: NotionClient, page: dict[str, Any]) -> tuple[str, str]:
        user = page.get("last_edited_by") or page.get("created_by") or {}
        user_id = str(user.get("id") or "")
        if not user_id:
            return "", ""
        if user.get("name"):
            return str(user["name"]), str((user.get("person") or {}).get("email") or "")
        key = f"connectors:notion:user:{self.connector.pk}:{user_id}"
        cached = cache.get(key)
        if cached is None:
            try:
                found = client.retrieve_user(user_id)
            except (NotFound, PermanentSourceError):
                # Without the "read user information" capability Notion refuses: the page stays, unattributed.
                found = {}
            cached = [str(found.get("name") or ""), str((found.get("person") or {}).get("email") or "")]
            cache.set(key, cached, USER_CACHE_SECONDS)
        return cached[0], cached[1]


def _deleted(page_id: str) -> SourceItem:
    return SourceItem(external_id=page_id, title="", content="", deleted=True)


def _parse(value: Any) -> datetime | None:
    if not value:
        return None
    try:
        return datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        return None


def _iso(value: datetime) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.000Z")

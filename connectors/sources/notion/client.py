"""Every call Cortex makes to the Notion API (notion-client, Notion-Version 2025-09-03).

The SDK's own retries are off: a 429 becomes a RetryableSourceError carrying Notion's
Retry-After, so the framework's shared backoff holds every worker of the connector, not just
this request. Requests are also paced to Notion's documented average of about 3 per second per
integration token, counted in Redis so parallel workers share one budget.
"""

from __future__ import annotations

import hashlib
import time
from typing import Any

import httpx
from django.conf import settings
from django.core.cache import cache
from notion_client import APIErrorCode, APIResponseError, Client
from notion_client.errors import HTTPResponseError, RequestTimeoutError

from connectors.errors import PermanentSourceError, RetryableSourceError
from connectors.sources.gmail.google_http import retry_after_seconds

DEFAULT_BASE_URL = "https://api.notion.com"
TIMEOUT_MS = 30_000
PAGE_SIZE = 100
# Waiting for a free request slot longer than this means something else hogs the token: give the
# page back to the framework rather than hold a worker.
MAX_PACING_WAIT = 20.0


class NotFound(Exception):
    """The page or block is gone, or no longer shared with the integration."""


class NotionClient:
    def __init__(self, *, token: str, api_url: str | None = None) -> None:
        self._token_key = hashlib.sha256(token.encode()).hexdigest()[:24]
        self._client = Client(auth=token, base_url=(api_url or DEFAULT_BASE_URL).rstrip("/"), timeout_ms=TIMEOUT_MS, retry=False)

    # -- calls -------------------------------------------------------------------------------
    def me(self) -> dict[str, Any]:
        return self._call(lambda: self._client.users.me(), what="the integration")

    def search_pages(self, *, start_cursor: str | None, page_size: int) -> dict[str, Any]:
        """Pages shared with the integration, most recently edited first."""
        body: dict[str, Any] = {
            "filter": {"property": "object", "value": "page"},
            "sort": {"timestamp": "last_edited_time", "direction": "descending"},
            "page_size": min(page_size, PAGE_SIZE),
        }
        if start_cursor:
            body["start_cursor"] = start_cursor
        return self._call(lambda: self._client.search(**body), what="the page search")

    def database_sources(self, database_id: str) -> list[str]:
        """The data sources (tables) of a database; a data source id is accepted as its own source."""
        try:
            database = self._call(
                lambda: self._client.databases.retrieve(database_id=database_id), what=f"database {database_id}"
            )
        except NotFound:
            try:
                source = self._call(
                    lambda: self._client.data_sources.retrieve(data_source_id=database_id), what=f"data source {database_id}"
                )
            except NotFound:
                raise PermanentSourceError(
                    f"Notion database {database_id} was not found: share it with the integration (⋯ → Connections) or "
                    "remove it from the connector's databases."
                ) from None
            return [str(source["id"])]
        return [str(item["id"]) for item in database.get("data_sources") or []]

    def query_rows(self, data_source_id: str, *, edited_since: str, start_cursor: str | None, page_size: int) -> dict[str, Any]:
        """Rows edited at or after `edited_since` (ISO time), oldest first."""
        body: dict[str, Any] = {
            "filter": {"timestamp": "last_edited_time", "last_edited_time": {"on_or_after": edited_since}},
            "sorts": [{"timestamp": "last_edited_time", "direction": "ascending"}],
            "page_size": min(page_size, PAGE_SIZE),
        }
        if start_cursor:
            body["start_cursor"] = start_cursor
        return self._call(
            lambda: self._client.data_sources.query(data_source_id=data_source_id, **body), what=f"data source {data_source_id}"
        )

    def block_children(self, block_id: str, *, start_cursor: str | None) -> dict[str, Any]:
        kwargs: dict[str, Any] = {"block_id": block_id, "page_size": PAGE_SIZE}
        if start_cursor:
            kwargs["start_cursor"] = start_cursor
        return self._call(lambda: self._client.blocks.children.list(**kwargs), what=f"the blocks of {block_id}")

    def retrieve_page(self, page_id: str) -> dict[str, Any]:
        return self._call(lambda: self._client.pages.retrieve(page_id=page_id), what=f"page {page_id}")

    def retrieve_user(self, user_id: str) -> dict[str, Any]:
        return self._call(lambda: self._client.users.retrieve(user_id=user_id), what=f"user {user_id}")

    # -- pacing and errors -------------------------------------------------------------------
    def _pace(self) -> None:
        """Take one of this token's request slots for the current second, waiting for the next
        second when they are used up."""
        per_second = settings.CORTEX_NOTION_REQUESTS_PER_SECOND
        if per_second <= 0:
            return
        waited = 0.0
        while True:
            now = time.time()
            key = f"connectors:notion:pace:{self._token_key}:{int(now)}"
            cache.add(key, 0, timeout=5)
            try:
                taken = cache.incr(key)
            except ValueError:  # the key expired between add and incr
                continue
            if taken <= per_second:
                return
            pause = max(0.01, int(now) + 1 - now)
            waited += pause
            if waited > MAX_PACING_WAIT:
                raise RetryableSourceError("Notion's request budget for this integration is in use elsewhere.", retry_after=1.0)
            time.sleep(pause)

    def _call(self, request: Any, *, what: str) -> Any:
        self._pace()
        try:
            return request()
        except APIResponseError as exc:
            raise _translate(exc, what) from exc
        except HTTPResponseError as exc:  # a non-JSON error answer (a proxy, an outage page)
            if exc.status == 429 or exc.status >= 500:
                raise RetryableSourceError(
                    f"Notion answered {exc.status} to {what}.", retry_after=retry_after_seconds(exc.headers.get("retry-after"))
                ) from exc
            raise PermanentSourceError(f"Notion refused {what} ({exc.status}).") from exc
        except RequestTimeoutError as exc:
            raise RetryableSourceError(f"Notion did not answer {what} in time.") from exc
        except httpx.HTTPError as exc:
            raise RetryableSourceError(f"Notion could not be reached for {what} ({type(exc).__name__}).") from exc


def _translate(exc: APIResponseError, what: str) -> Exception:
    code = exc.code.value if isinstance(exc.code, APIErrorCode) else str(exc.code)
    if exc.status == 404 or code == APIErrorCode.ObjectNotFound.value:
        return NotFound(what)
    if exc.status == 429 or code == APIErrorCode.RateLimited.value:
        return RetryableSourceError(
            f"Notion rate-limited {what}.", retry_after=retry_after_seconds(exc.headers.get("retry-after"))
        )
    if exc.status >= 500 or code in {APIErrorCode.InternalServerError.value, APIErrorCode.ServiceUnavailable.value}:
        return RetryableSourceError(
            f"Notion answered {exc.status} to {what}.", retry_after=retry_after_seconds(exc.headers.get("retry-after"))
        )
    if exc.status == 401 or code == APIErrorCode.Unauthorized.value:
        return PermanentSourceError(
            "Notion refused the integration token (401 unauthorized): paste a current internal integration secret "
            "(Settings → Connections → Develop or manage integrations) in the connector's settings."
        )
    if exc.status == 403 or code == APIErrorCode.RestrictedResource.value:
        return PermanentSourceError(
            f"Notion forbade reading {what} (403): give the integration "
            "the 'Read content' capability and share the pages with it."
        )
    return PermanentSourceError(f"Notion refused {what} ({exc.status} {code}).")

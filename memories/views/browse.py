"""The memories page's two modes: browsing (filters, newest first, cursor pages) and recall (a query)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import date
from typing import Any

from django.http import QueryDict
from django.utils import timezone

from cortex_site.errors import NotFound, ServiceUnavailable, ValidationFailed
from memories.access import Principal
from memories.retrieval.terms import query_terms
from memories.selectors.memories import STATUS_FILTERS, MemoryFilters, memory_list
from memories.selectors.recall import MAX_LIMIT, RecallQuery, recall
from memories.services.read_events import memory_list_audit
from memories.views.common import keyset_page, memory_rows

PAGE_SIZE = 20
RECALL_LIMIT = 20
# "relevance" is a search's own order; browsing without a query knows only newest and oldest.
SORTS = {"relevance": "Best match", "newest": "Newest first", "oldest": "Oldest first"}


def _day(value: str) -> date | None:
    try:
        return date.fromisoformat(value) if value else None
    except ValueError:
        return None


@dataclass(frozen=True)
class ListParams:
    q: str = ""
    scope: str = ""
    category: str = ""
    source: str = ""
    tag: str = ""
    author: str = ""
    status: str = "active"
    sort: str = ""  # "" is the mode's default: relevance for a search, newest for browsing
    added_from: date | None = None
    added_to: date | None = None
    cursor: str = ""
    limit: int = RECALL_LIMIT

    @classmethod
    def from_query(cls, query: QueryDict) -> ListParams:
        def text(name: str, limit: int = 200) -> str:
            return (query.get(name) or "").strip()[:limit]

        status = text("status") or "active"
        sort = text("sort")
        added_from, added_to = _day(text("from", 10)), _day(text("to", 10))
        if added_from and added_to and added_from > added_to:
            added_from, added_to = added_to, added_from  # a range typed backwards means the same days
        try:
            limit = min(max(int(query.get("limit") or RECALL_LIMIT), 1), MAX_LIMIT)
        except ValueError:
            limit = RECALL_LIMIT
        return cls(
            q=(query.get("q") or "").strip()[:2000],
            scope=text("scope"),
            category=text("category"),
            source=text("source"),
            tag=text("tag").lstrip("#").lower(),
            author=text("author"),
            status=status if status in STATUS_FILTERS else "active",
            sort=sort if sort in SORTS else "",
            added_from=added_from,
            added_to=added_to,
            cursor=text("cursor", 500),
            limit=limit,
        )

    def querystring(self) -> str:
        """ "?q=…&scope=…" with only the parameters that are set (no cursor), or ""."""
        query = QueryDict(mutable=True)
        for name in ("q", "scope", "category", "source", "tag", "author"):
            if getattr(self, name):
                query[name] = getattr(self, name)
        if self.status != "active":
            query["status"] = self.status
        if self.sort:
            query["sort"] = self.sort
        if self.added_from:
            query["from"] = self.added_from.isoformat()
        if self.added_to:
            query["to"] = self.added_to.isoformat()
        if self.limit != RECALL_LIMIT:
            query["limit"] = str(self.limit)
        return f"?{query.urlencode()}" if query else ""

    @property
    def filtered(self) -> bool:
        return (
            any((self.scope, self.category, self.source, self.tag, self.author, self.added_from, self.added_to))
            or self.status != "active"
        )

    @property
    def effective_sort(self) -> str:
        if self.q:
            return self.sort or "relevance"
        return self.sort if self.sort in {"newest", "oldest"} else "newest"

    @property
    def sort_choices(self) -> list[tuple[str, str]]:
        return [(key, label) for key, label in SORTS.items() if self.q or key != "relevance"]

    @property
    def browse_only_filters(self) -> list[str]:
        """Filters recall does not apply (it searches active memories and has no author filter)."""
        ignored = []
        if self.author:
            ignored.append("author")
        if self.status != "active":
            ignored.append("status")
        return ignored


def list_results(principal: Principal, params: ListParams, query: QueryDict) -> dict[str, Any]:
    filters = MemoryFilters(
        scope=params.scope or None,
        category=params.category or None,
        source=params.source or None,
        tag=params.tag or None,
        author=params.author or None,
        status=params.status,
        added_from=params.added_from,
        added_to=params.added_to,
        oldest_first=params.effective_sort == "oldest",
    )
    page, next_cursor = keyset_page(memory_list(principal, filters), params.cursor, PAGE_SIZE, ascending=filters.oldest_first)
    memory_list_audit(principal=principal, filters=filters, memories=page, via="ui")
    next_url = None
    if next_cursor:
        following = query.copy()
        following["cursor"] = next_cursor
        next_url = "/memories/?" + following.urlencode()
    return {"mode": "list", "rows": memory_rows(principal, page), "next_url": next_url}


def recall_results(principal: Principal, params: ListParams) -> dict[str, Any]:
    dated = params.added_from is not None or params.added_to is not None
    recall_query = RecallQuery(
        query=params.q,
        # A date range narrows the ranked results afterwards, so it starts from the longest list.
        limit=MAX_LIMIT if dated else params.limit,
        scopes=[params.scope] if params.scope else None,
        category=params.category or None,
        tags=[params.tag] if params.tag else (),
        source=params.source or None,
    )
    try:
        result = recall(principal, recall_query)
    except ServiceUnavailable:
        return {
            "mode": "recall",
            "rows": [],
            "error": "Search is unavailable right now: the embedding service did not answer. Try again in a moment.",
        }
    except (ValidationFailed, NotFound) as exc:  # a bad filter, or a scope that is not there (UNKNOWN_SCOPE)
        return {"mode": "recall", "rows": [], "error": exc.message}
    hits = [hit for hit in result.hits if _added_within(timezone.localdate(hit.memory.created_at), params)][: params.limit]
    if params.effective_sort in {"newest", "oldest"}:
        hits.sort(key=lambda hit: (hit.memory.created_at, hit.memory.pk), reverse=params.effective_sort == "newest")
    rows = memory_rows(principal, [hit.memory for hit in hits], hits=hits, terms=query_terms(params.q))
    more_url = None
    if len(hits) == params.limit and params.limit < MAX_LIMIT:
        more_url = replace(params, limit=MAX_LIMIT).querystring()
    return {"mode": "recall", "rows": rows, "confident": result.confident, "took_ms": result.took_ms, "more_url": more_url}


def _added_within(day: date, params: ListParams) -> bool:
    return (params.added_from is None or day >= params.added_from) and (params.added_to is None or day <= params.added_to)

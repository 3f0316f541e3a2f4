"""The Notion source through notion-client against a loopback workspace: first-run window, cap and
continuation, nested blocks and pagination (recorded lists), database rows that search does not
return, edit → supersede, archive/unshare → redact, 401, 429, pacing, and an outsider."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from support import principal
from support.notion_workspace import FakeNotion
from support.stub_server import Received, StubResponse, StubServer

from connectors.errors import RetryableSourceError
from connectors.models import Connector, ConnectorItem, SyncRun
from connectors.registry import source_for
from connectors.selectors import access_connector
from connectors.services import backoff
from connectors.services.connectors import connector_create
from connectors.sources.notion.client import NotionClient
from cortex_site.errors import NotFound
from memories.models import Memory

pytestmark = pytest.mark.django_db
FIXTURES = Path(__file__).parent / "fixtures"


def now() -> datetime:
    return datetime.now(UTC)


def rich(text: str) -> list[dict[str, Any]]:
    return [{"type": "text", "text": {"content": text, "link": None}, "plain_text": text, "href": None}]


def block(kind: str, text: str = "", *, children: list[dict[str, Any]] | None = None, **body: Any) -> dict[str, Any]:
    return {
        "object": "block",
        "type": kind,
        kind: {"rich_text": rich(text), **body},
        "has_children": bool(children),
        "_children": children or [],
    }


@pytest.fixture
def connector(acme: dict[str, Any], stub_server: StubServer) -> Callable[..., Connector]:
    def make(per_run_cap: int | None = None, **config: Any) -> Connector:
        return connector_create(
            principal=principal(acme["exec"]),
            kind="notion",
            name="Wiki",
            config={"api_url": stub_server.url, **config},
            credentials={"token": "ntn_stub_secret"},
            scope="engineering",
            per_run_cap=per_run_cap,
        ).connector

    return make


def pull(connector: Connector, checkpoint: dict[str, Any], *, limit: int = 8) -> Any:
    return source_for(connector).fetch_page(checkpoint, limit=limit, first_run_since=now() - timedelta(days=30))


def memory_of(connector: Connector, page_id: str) -> Memory:
    item = ConnectorItem.objects.get(connector=connector, external_id=page_id)
    assert item.memory_id is not None
    return Memory.objects.get(pk=item.memory_id)


def test_first_run_reads_pages_edited_in_the_last_thirty_days(
    notion: FakeNotion, connector: Callable[..., Connector], stub_server: StubServer
) -> None:
    notion.page("Archive 2019", [block("paragraph", "old")], edited=now() - timedelta(days=40))
    recent = notion.page(
        "Onboarding", [block("heading_1", "Welcome"), block("paragraph", "Read the handbook.")], edited=now() - timedelta(days=2)
    )
    page = pull(connector(), {})
    assert [i.external_id for i in page.items] == [recent["id"]]
    item = page.items[0]
    assert item.title == "Onboarding"
    assert item.content == "# Welcome\n\nRead the handbook."
    assert item.source_url == recent["url"]
    assert (item.author_name, item.author_email) == ("Ada Lovelace", "ada@acme.test")
    assert item.valid_from == datetime.fromisoformat(recent["last_edited_time"].replace("Z", "+00:00"))
    assert page.done
    auth = stub_server.requests_to("/v1/search")[0].headers
    assert auth["authorization"] == "Bearer ntn_stub_secret" and auth["notion-version"] == "2025-09-03"


def test_nested_blocks_are_read_recursively_with_toggles_opened(notion: FakeNotion, connector: Callable[..., Connector]) -> None:
    body = [
        block(
            "toggle",
            "Escalation",
            children=[block("bulleted_list_item", "Page the on-call", children=[block("to_do", "Ack in 5 min", checked=False)])],
        ),
        block("callout", "Never restart prod on Friday", icon={"type": "emoji", "emoji": "⚠️"}),
    ]
    notion.page("Runbook", body, edited=now())
    item = pull(connector(), {}).items[0]
    assert item.content == "▸ Escalation\n  - Page the on-call\n    - [ ] Ack in 5 min\n\n> ⚠️ Never restart prod on Friday"


def test_block_pagination_follows_next_cursor_on_the_recorded_lists(
    notion: FakeNotion, connector: Callable[..., Connector], stub_server: StubServer
) -> None:
    page = notion.page("Paged", edited=now())
    first = (FIXTURES / "blocks.children.list.page1_has_more.notion-sdk-py.json").read_bytes()
    last = (FIXTURES / "blocks.children.list.page3_last.notion-sdk-py.json").read_bytes()

    def children(request: Received) -> StubResponse:
        if request.path != f"/v1/blocks/{page['id']}/children":
            return notion._children(request)
        recorded = last if request.query.get("start_cursor") == "393abc1e-edcd-817b-900d-c75ec8d2f272" else first
        return StubResponse(body=recorded, headers={"Content-Type": "application/json"})

    stub_server.route("GET", r"/v1/blocks/[^/]+/children", children)  # replaces the fake's answer
    item = pull(connector(), {}).items[0]
    assert item.content == "paragraph 0\n\nparagraph 1\n\nparagraph 4"
    assert len(stub_server.requests_to(f"/v1/blocks/{page['id']}/children")) == 2


def test_database_rows_are_read_by_query_even_when_search_misses_them(
    notion: FakeNotion, connector: Callable[..., Connector]
) -> None:
    notion.databases["db-accounts"] = ["ds-accounts"]
    properties = {
        "Stage": {"id": "s", "type": "select", "select": {"name": "Renewal"}},
        "ARR": {"id": "a", "type": "number", "number": 48000},
        "Owner": {"id": "o", "type": "people", "people": [{"object": "user", "id": "u1", "name": "Mo Ahmed"}]},
    }
    row = notion.page(
        "Globex",
        [block("paragraph", "Asked for SSO.")],
        edited=now(),
        data_source="ds-accounts",
        properties=properties,
        in_search=False,
    )
    page = pull(connector(databases=["db-accounts"]), {})
    assert [i.external_id for i in page.items] == [row["id"]]
    assert page.items[0].content == "Stage: Renewal\nARR: 48000\nOwner: Mo Ahmed\n\nAsked for SSO."


def test_the_cap_and_checkpoint_continue_across_pages_without_repeats(
    notion: FakeNotion, connector: Callable[..., Connector]
) -> None:
    pages = [notion.page(f"Page {n}", [block("paragraph", f"text {n}")], edited=now() - timedelta(hours=n)) for n in range(11)]
    source = connector()
    first = pull(source, {}, limit=8)
    assert len(first.items) == 8 and not first.done
    second = pull(source, first.checkpoint, limit=8)
    assert second.done
    assert sorted(i.external_id for i in first.items + second.items) == sorted(p["id"] for p in pages)
    # The next pass starts at the newest edit seen: only pages edited in that minute are read again.
    third = pull(source, second.checkpoint, limit=8)
    assert [i.external_id for i in third.items] == [pages[0]["id"]]


def test_edit_supersedes_and_archive_or_unshare_redacts(
    notion: FakeNotion, connector: Callable[..., Connector], run_sync: Callable[..., SyncRun]
) -> None:
    edited = notion.page("Pricing", [block("paragraph", "Seats cost 30 EUR.")], edited=now() - timedelta(hours=3))
    archived = notion.page("Old plan", [block("paragraph", "Plan A")], edited=now() - timedelta(hours=3))
    unshared = notion.page("Private notes", [block("paragraph", "secret")], edited=now() - timedelta(hours=3))
    source = connector(per_run_cap=50)
    first = run_sync(source)
    assert (first.status, first.items_created) == (SyncRun.Status.SUCCEEDED, 3)
    original = memory_of(source, edited["id"])

    notion.page("Pricing", [block("paragraph", "Seats cost 35 EUR.")], edited=now(), page_id=edited["id"])
    notion.archive(archived["id"])
    notion.delete(unshared["id"])
    second = run_sync(source)
    assert second.status == SyncRun.Status.SUCCEEDED
    assert (second.items_updated, second.items_redacted) == (1, 2)
    original.refresh_from_db()
    assert original.status == Memory.Status.SUPERSEDED
    assert memory_of(source, edited["id"]).content == "Seats cost 35 EUR."
    for page in (archived, unshared):
        assert Memory.objects.get(organization=source.organization, external_id=page["id"]).status == Memory.Status.REDACTED


def test_a_401_puts_the_connector_in_error_with_a_sentence(
    notion: FakeNotion, connector: Callable[..., Connector], run_sync: Callable[..., SyncRun], stub_server: StubServer
) -> None:
    stub_server.route(
        "POST",
        "/v1/search",
        StubResponse(
            status=401, json={"object": "error", "status": 401, "code": "unauthorized", "message": "API token is invalid."}
        ),
    )
    source = connector()
    run = run_sync(source)
    source.refresh_from_db()
    assert run.status == SyncRun.Status.FAILED
    assert source.status == Connector.Status.ERROR
    assert "integration secret" in source.last_error and "ntn_stub_secret" not in source.last_error


def test_a_429_sets_the_shared_backoff_from_retry_after(
    notion: FakeNotion, connector: Callable[..., Connector], run_sync: Callable[..., SyncRun], stub_server: StubServer
) -> None:
    notion.page("Doc", [block("paragraph", "x")], edited=now())
    stub_server.route(
        "POST",
        "/v1/search",
        StubResponse(
            status=429,
            headers={"Retry-After": "12"},
            json={"object": "error", "status": 429, "code": "rate_limited", "message": "Rate limited"},
        ),
    )
    source = connector()
    run = run_sync(source)
    assert run.status == SyncRun.Status.RUNNING and "Retrying in 12 s" in run.error
    assert 8 < backoff.remaining(source.pk) <= 12
    assert len(stub_server.requests_to("/v1/search")) == 1  # the SDK's own retries are off: the framework waits


def test_requests_are_paced_to_about_three_a_second_per_token(notion: FakeNotion, stub_server: StubServer, settings: Any) -> None:
    settings.CORTEX_NOTION_REQUESTS_PER_SECOND = 3
    client = NotionClient(token="ntn_pace", api_url=stub_server.url)
    other = NotionClient(token="ntn_pace", api_url=stub_server.url)  # another worker, same token, same budget
    started = time.monotonic()
    for n in range(7):
        (client if n % 2 else other).me()
    # 7 requests at 3 per clock second need at least three seconds' slots, so more than a second passes.
    assert time.monotonic() - started > 1.0
    assert len(stub_server.requests_to("/v1/users/me")) == 7


def test_a_timeout_is_retryable(stub_server: StubServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("connectors.sources.notion.client.TIMEOUT_MS", 300)
    stub_server.route("GET", "/v1/users/me", StubResponse(json={}, delay=2.0))
    with pytest.raises(RetryableSourceError):
        NotionClient(token="ntn_slow", api_url=stub_server.url).me()


def test_an_outsider_sees_neither_the_connector_nor_its_memories(
    notion: FakeNotion,
    connector: Callable[..., Connector],
    run_sync: Callable[..., SyncRun],
    outsider: Any,
    api: Callable[..., Any],
) -> None:
    page = notion.page("Board", [block("paragraph", "Acquisition talks.")], edited=now())
    source = connector()
    run_sync(source)
    memory = memory_of(source, page["id"])
    with pytest.raises(NotFound):
        access_connector(principal(outsider), source.pk)
    assert api(outsider).get(f"/api/memories/{memory.pk}").status_code == 404


def test_test_connection_names_the_workspace(
    notion: FakeNotion, connector: Callable[..., Connector], acme: dict[str, Any]
) -> None:
    from connectors.services.connectors import connector_test

    result = connector_test(principal=principal(acme["exec"]), connector_id=connector().pk)
    assert result.ok and result.message == "Connected to Notion (Acme) as Cortex."


def test_a_notion_connector_needs_an_integration_secret(acme: dict[str, Any]) -> None:
    from cortex_site.errors import Unprocessable

    with pytest.raises(Unprocessable) as caught:
        connector_create(principal=principal(acme["exec"]), kind="notion", name="x", config={}, credentials={})
    assert caught.value.error_code == "MISSING_CREDENTIALS"


def test_a_data_source_id_is_accepted_where_a_database_id_is_expected(
    notion: FakeNotion, connector: Callable[..., Connector]
) -> None:
    notion.databases["db-deals"] = ["ds-deals"]
    row = notion.page("Initech", [block("paragraph", "Pilot in May.")], edited=now(), data_source="ds-deals", in_search=False)
    page = pull(connector(databases=["ds-deals"]), {})
    assert [i.external_id for i in page.items] == [row["id"]]


def test_a_database_not_shared_with_the_integration_puts_the_connector_in_error(
    notion: FakeNotion, connector: Callable[..., Connector], run_sync: Callable[..., SyncRun]
) -> None:
    source = connector(databases=["db-missing"])
    run = run_sync(source)
    source.refresh_from_db()
    assert run.status == SyncRun.Status.FAILED and source.status == Connector.Status.ERROR
    assert "db-missing was not found: share it with the integration" in source.last_error


def test_a_very_long_page_is_cut_at_the_block_budget_with_a_warning(
    notion: FakeNotion, connector: Callable[..., Connector], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("connectors.sources.notion.source.MAX_BLOCKS", 3)
    notion.page("Long", [block("paragraph", f"line {n}") for n in range(5)], edited=now())
    item = pull(connector(), {}).items[0]
    assert item.content == "line 0\n\nline 1\n\nline 2"
    assert item.warning == "Only the first 3 blocks of this page were read."


def test_nesting_deeper_than_the_cap_is_not_read(
    notion: FakeNotion, connector: Callable[..., Connector], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("connectors.sources.notion.source.MAX_DEPTH", 2)
    deep = block(
        "bulleted_list_item",
        "one",
        children=[block("bulleted_list_item", "two", children=[block("bulleted_list_item", "three")])],
    )
    notion.page("Deep", [deep], edited=now())
    assert pull(connector(), {}).items[0].content == "- one\n  - two"


def test_a_page_exactly_at_the_block_budget_has_no_warning(
    notion: FakeNotion, connector: Callable[..., Connector], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("connectors.sources.notion.source.MAX_BLOCKS", 3)
    notion.page("Exact", [block("paragraph", f"line {n}") for n in range(3)], edited=now())
    item = pull(connector(), {}).items[0]
    assert item.content == "line 0\n\nline 1\n\nline 2" and item.warning == ""


def test_a_nested_block_that_answers_404_leaves_out_that_block_and_never_redacts_the_page(
    notion: FakeNotion, connector: Callable[..., Connector], run_sync: Callable[..., SyncRun], stub_server: StubServer
) -> None:
    body = [
        block("paragraph", "Restart the queue, then the workers."),
        block("synced_block", children=[block("paragraph", "Footer")]),
    ]
    page = notion.page("Runbook", body, edited=now() - timedelta(hours=2))
    source = connector()
    assert run_sync(source).items_created == 1
    # The synced block's original now lives on a page not shared with the integration (or the block
    # was deleted while the page was read): Notion answers 404 for its children, not for the page.
    notion.page("Runbook", [*body[:1], block("paragraph", "Then page on-call."), body[1]], edited=now(), page_id=page["id"])
    synced = f"{page['id']}_c2"

    def children(request: Received) -> StubResponse:
        if request.path.split("/")[3] == synced:
            return StubResponse(
                status=404,
                json={
                    "object": "error",
                    "status": 404,
                    "code": "object_not_found",
                    "message": f"Could not find block with ID: {synced}.",
                },
            )
        return notion._children(request)

    stub_server.route("GET", r"/v1/blocks/[^/]+/children", children)
    second = run_sync(source)
    assert (second.status, second.items_updated, second.items_redacted) == (SyncRun.Status.SUCCEEDED, 1, 0)
    current = memory_of(source, page["id"])
    assert current.status == Memory.Status.ACTIVE
    assert current.content == "Restart the queue, then the workers.\n\nThen page on-call."

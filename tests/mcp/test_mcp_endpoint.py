"""The MCP endpoint end to end: the real ASGI app on a loopback port, the official `mcp` client.

Covers the tools and their schemas, permission parity with REST for several principals
(an outsider from another organization among them), token auth (401 + challenge, revocation,
expiry, read-only), the protected-resource metadata, Origin checks, bad input, audit and
request ids, and both protocol eras (2025-06-18 handshake, 2026-07-28 per-request).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import timedelta
from types import SimpleNamespace
from typing import Any

import anyio
import httpx
import mcp.types as types
import pytest
from django.conf import settings
from django.db import connections
from django.utils import timezone
from mcp import MCPError

from audit.models import AuditEvent
from memories.access import Principal
from memories.mcp.auth import verify_api_token
from memories.mcp.server import Answer, run_tool
from memories.models import ApiToken, Membership, Memory, MemoryChunk, Organization, Scope
from memories.services import memories as services
from memories.services import tenancy

ACCEPT = "application/json, text/event-stream"
TOOLS = {
    "remember",
    "recall",
    "list_memories",
    "get_memory",
    "list_scopes",
    "supersede",
    "redact",
    "request_redaction",
    "recall_about",
    "recall_timeline",
}


@pytest.fixture
def world(
    make_org: Callable[..., Organization],
    make_scope: Callable[..., Scope],
    make_member: Callable[..., Membership],
    make_token: Callable[..., str],
    principal_of: Callable[[Membership], Principal],
) -> SimpleNamespace:
    """Acme with memories across scopes and clearances; Globex next door with its own."""
    acme = make_org("acme", "Acme Robotics")
    make_scope(acme, "engineering")
    make_scope(acme, "sales")
    make_scope(acme, "handbook", visibility=Scope.Visibility.ALL_MEMBERS, members_can_write=False)
    executive = make_member(acme, "Executive", admin=True, grants={"engineering": True, "sales": True, "handbook": True})
    contractor = make_member(acme, "Contractor", grants={"engineering": False})
    outsider = make_member(make_org("globex", "Globex"), "Executive", admin=True)

    def store(member: Membership, **fields: Any) -> str:
        return str(services.memory_create(principal=principal_of(member), draft=services.MemoryDraft(**fields)).memory.pk)

    memories = {
        "freeze": store(
            executive, title="Deploy freeze", content="Deploy freeze: no deploys between Dec 20 and Jan 2.", scope="public-docs"
        ),
        "checklist": store(
            executive,
            title="Deploy checklist",
            content="Deploy checklist: run migrations before every deploy.",
            scope="engineering",
            clearance_min="Employee",
        ),
        "falcon": store(
            executive,
            title="Falcon deploy",
            content="The Project Falcon deploy is scheduled for March.",
            scope="engineering",
            clearance_min="Executive",
        ),
        "pricing": store(
            executive, title="Pricing deploys", content="Deploy pricing page changes only on Tuesdays.", scope="sales"
        ),
        "etiquette": store(
            executive, title="Deploy etiquette", content="Announce each deploy in the eng channel.", scope="handbook"
        ),
        "globex": store(
            outsider, title="Globex deploys", content="Deploy Globex rockets from pad 39A only.", scope="public-docs"
        ),
    }
    tokens = {
        "executive": make_token(executive),
        "contractor": make_token(contractor),
        "sales_only": make_token(executive, scope_slugs=["sales"]),
        "outsider": make_token(outsider),
        "read_only": make_token(executive, read_only=True),
    }
    return SimpleNamespace(
        acme=acme, executive=executive, contractor=contractor, outsider=outsider, memories=memories, tokens=tokens
    )


def _counts() -> tuple[int, int]:
    return Memory.objects.count(), MemoryChunk.objects.count()


def _text(result: types.CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, types.TextContent) and len(result.content) == 1
    return block.text


def _error(result: types.CallToolResult) -> dict[str, Any]:
    """A tool error: isError, the REST error envelope as structured content, the code in the text."""
    assert result.is_error, result
    body = result.structured_content
    assert set(body) == {"error_code", "message", "request_id", "details"}, body
    assert _text(result) == f"{body['error_code']}: {body['message']}"
    return body


def _ids(result: types.CallToolResult) -> list[str]:
    assert not result.is_error, result
    return [hit["id"] for hit in result.structured_content["results"]]


# -- discovery -------------------------------------------------------------------------------------
@pytest.mark.django_db(transaction=True)
def test_tools_list_publishes_input_and_output_schemas_and_annotations(world: SimpleNamespace, mcp_client: Any) -> None:
    async def flow() -> types.ListToolsResult:
        async with mcp_client.connect(world.tokens["contractor"]) as client:
            return await client.list_tools()

    tools = {tool.name: tool for tool in mcp_client.run(flow).tools}
    assert set(tools) == TOOLS
    for tool in tools.values():
        assert tool.description and tool.title
        assert tool.input_schema["type"] == "object"
        assert tool.input_schema["additionalProperties"] is False
        assert tool.output_schema is not None and tool.output_schema["type"] == "object"
        assert tool.annotations is not None and tool.annotations.open_world_hint is False
    remember = tools["remember"]
    assert remember.input_schema["required"] == ["content"]
    assert set(remember.input_schema["properties"]) == {
        "content",
        "title",
        "scope",
        "category",
        "tags",
        "source_url",
        "clearance_min",
        "valid_from",
        "valid_until",
    }
    assert remember.annotations.read_only_hint is False and remember.annotations.destructive_hint is False
    assert set(remember.output_schema["required"]) >= {"id", "title", "scope", "scope_resolution", "status", "url"}
    assert tools["recall"].input_schema["required"] == ["query"]
    assert tools["recall"].input_schema["properties"]["limit"]["default"] == 5
    assert set(tools["recall"].input_schema["properties"]) == {"query", "limit", "scopes", "category", "tags", "max_tokens"}
    assert tools["list_memories"].input_schema["properties"]["limit"]["default"] == 20
    assert tools["get_memory"].input_schema["required"] == ["id"]
    for name in ("recall", "list_memories", "get_memory"):
        assert tools[name].annotations.read_only_hint is True
    # Who is asking never comes from arguments: no tool takes an organization, user or clearance of the caller.
    for tool in tools.values():
        assert not set(tool.input_schema["properties"]) & {"organization", "org", "user", "user_id", "token"}


# -- remember --------------------------------------------------------------------------------------
@pytest.mark.django_db(transaction=True)
def test_remember_stores_an_mcp_memory_authored_by_the_tokens_user(world: SimpleNamespace, mcp_client: Any) -> None:
    result = mcp_client.call(
        world.tokens["executive"],
        "remember",
        content="All external API endpoints must implement rate limiting.",
        title="API Rate Limiting Policy",
        scope="engineering",
        category="policy",
        tags=["API", "security"],
        source_url="https://github.com/acme/api/pull/123",
        clearance_min="Manager",
        valid_from="2025-01-15T10:30:00Z",
    )
    assert not result.is_error, result
    data = result.structured_content
    memory = Memory.objects.get(pk=data["id"])
    assert data == {
        "id": str(memory.pk),
        "title": "API Rate Limiting Policy",
        "scope": "engineering",
        "scope_resolution": "explicit",
        "readers": "members granted the scope engineering with clearance Manager or above",
        "status": "active",
        "deduplicated": False,
        "url": f"{settings.CORTEX_BASE_URL}/memories/{memory.pk}/",
    }
    assert (memory.source, memory.author_id, memory.created_by_id) == ("MCP", world.executive.user_id, world.executive.user_id)
    assert (memory.organization_id, memory.category, memory.tags) == (world.acme.pk, "policy", ["api", "security"])
    assert memory.clearance_rank == 2 and memory.valid_from.isoformat() == "2025-01-15T10:30:00+00:00"
    assert data["url"] in _text(result) and "engineering" in _text(result)

    # The write is audited by the service and the call by the endpoint, both as the token, under one request id.
    created = AuditEvent.objects.get(action="memory.create", target_id=str(memory.pk))
    call = AuditEvent.objects.get(action="mcp.call", details__tool="remember")
    token_id = ApiToken.objects.get(membership=world.executive, read_only=False, scopes=None).pk
    for event in (created, call):
        assert (event.actor_kind, event.actor_token_id, event.organization_id) == ("token", token_id, world.acme.pk)
    assert created.request_id and created.request_id == call.request_id
    assert (call.outcome, call.target_type, call.target_id, call.details["error_code"]) == ("ok", "memory", str(memory.pk), None)


@pytest.mark.django_db(transaction=True)
def test_remember_without_scope_says_how_the_scope_was_chosen(world: SimpleNamespace, mcp_client: Any) -> None:
    data = mcp_client.call(
        world.tokens["contractor"], "remember", content="# Parking\n\nVisitors park on level 2."
    ).structured_content
    assert (data["title"], data["scope"], data["scope_resolution"]) == ("Parking", "public-docs", "default")
    again = mcp_client.call(world.tokens["contractor"], "remember", content="# Parking\n\nVisitors park on level 2.")
    assert again.structured_content["deduplicated"] is True and again.structured_content["id"] == data["id"]
    assert "nothing new was stored" in _text(again)


@pytest.mark.django_db(transaction=True)
def test_read_only_token_cannot_remember_and_nothing_is_stored(world: SimpleNamespace, mcp_client: Any) -> None:
    before = _counts()
    error = _error(mcp_client.call(world.tokens["read_only"], "remember", content="Should not be stored."))
    assert error["error_code"] == "TOKEN_READ_ONLY"
    assert "read-only" in error["message"]
    assert _counts() == before
    call = AuditEvent.objects.get(action="mcp.call", details__tool="remember")
    assert (call.outcome, call.details["error_code"], call.actor_kind) == ("denied", "TOKEN_READ_ONLY", "token")


@pytest.mark.parametrize(
    ("token", "arguments", "error_code"),
    [
        ("executive", {"scope": "no-such-scope"}, "UNKNOWN_SCOPE"),
        ("contractor", {"scope": "sales"}, "UNKNOWN_SCOPE"),  # exists, but invisible: reported like a missing one
        ("contractor", {"scope": "engineering"}, "SCOPE_NOT_WRITABLE"),  # readable, not writable
        ("contractor", {"scope": "handbook"}, "SCOPE_NOT_WRITABLE"),
        ("contractor", {"clearance_min": "Executive"}, "CLEARANCE_ABOVE_OWN"),  # no write-up
        ("executive", {"clearance_min": "Galactic"}, "UNKNOWN_CLEARANCE"),
        ("executive", {"content": "x" * (settings.CORTEX_MAX_CONTENT_CHARS + 1)}, "CONTENT_TOO_LONG"),
        ("executive", {"content": "   "}, "EMPTY_CONTENT"),
        ("executive", {"source_url": "javascript:alert(1)"}, "INVALID_SOURCE_URL"),
        ("executive", {"valid_from": "not a date"}, "VALIDATION_ERROR"),
        ("executive", {"valid_from": "2025-02-01T00:00:00Z", "valid_until": "2025-01-01T00:00:00Z"}, "INVALID_VALIDITY_WINDOW"),
    ],
)
@pytest.mark.django_db(transaction=True)
def test_remember_follows_the_rest_write_rules_and_never_writes_partially(
    world: SimpleNamespace, mcp_client: Any, token: str, arguments: dict[str, Any], error_code: str
) -> None:
    before = _counts()
    error = _error(mcp_client.call(world.tokens[token], "remember", **{"content": "A new memory about deploys.", **arguments}))
    assert error["error_code"] == error_code, error
    assert error["message"] and error["request_id"]
    assert _counts() == before
    # The same request through REST is refused with the same code.
    response = httpx.post(
        f"{mcp_client.server_url}/api/memories",
        json={"content": "A new memory about deploys.", **arguments},
        headers={"Authorization": f"Bearer {world.tokens[token]}"},
    )
    assert response.status_code >= 400 and response.json()["error_code"] == error_code
    assert _counts() == before


# -- recall ----------------------------------------------------------------------------------------
@pytest.mark.django_db(transaction=True)
def test_recall_numbers_the_results_and_ends_each_with_its_citation(world: SimpleNamespace, mcp_client: Any) -> None:
    result = mcp_client.call(world.tokens["executive"], "recall", query="deploy freeze", limit=3)
    data = result.structured_content
    assert (data["query"], data["limit"]) == ("deploy freeze", 3)
    top = data["results"][0]
    assert top["id"] == world.memories["freeze"] and top["rank"] == 1
    assert top["snippet"] and 0 <= top["recency"] <= 1 and 0 < top["relevance"] <= 1
    assert top["score"] == pytest.approx(0.7 * top["relevance"] + 0.3 * top["recency"], abs=1e-4)
    assert top["citation"]["source"] == "Manual" and top["citation"]["scope"] == "public-docs"
    assert set(top["citation"]) == {"title", "source", "source_url", "author", "valid_from", "scope"}
    assert top["url"] == f"{settings.CORTEX_BASE_URL}/memories/{top['id']}/"
    blocks = _text(result).split("\n\n")[1:]
    assert len(blocks) == len(data["results"])
    for rank, (block, hit) in enumerate(zip(blocks, data["results"], strict=True), start=1):
        assert block.startswith(f"[{rank}] {hit['title']}")
        assert block.splitlines()[-1].strip().startswith("Cite: ") and block.endswith(hit["id"])
    recalled = AuditEvent.objects.get(action="memory.recall")
    assert recalled.details["results"] == [hit["id"] for hit in data["results"]]
    assert recalled.request_id == AuditEvent.objects.get(action="mcp.call").request_id


@pytest.mark.parametrize(
    ("principal", "visible"),
    [
        ("executive", {"freeze", "checklist", "falcon", "pricing", "etiquette"}),
        ("contractor", {"freeze", "etiquette"}),
        ("sales_only", {"pricing"}),
        ("outsider", {"globex"}),
    ],
)
@pytest.mark.django_db(transaction=True)
def test_recall_over_mcp_returns_what_rest_returns_in_the_same_order(
    world: SimpleNamespace, mcp_client: Any, principal: str, visible: set[str]
) -> None:
    token = world.tokens[principal]
    for query in ("deploy", "deploy freeze pricing Falcon rockets"):
        over_mcp = _ids(mcp_client.call(token, "recall", query=query, limit=10))
        response = httpx.post(
            f"{mcp_client.server_url}/api/recall",
            json={"query": query, "limit": 10},
            headers={"Authorization": f"Bearer {token}"},
        )
        assert response.status_code == 200, response.text
        assert over_mcp == [hit["memory"]["id"] for hit in response.json()["results"]]
        assert set(over_mcp) <= {world.memories[name] for name in visible}
    assert set(_ids(mcp_client.call(token, "recall", query="deploy", limit=10))) == {world.memories[name] for name in visible}


@pytest.mark.django_db(transaction=True)
def test_recall_filters_narrow_within_what_the_token_sees(world: SimpleNamespace, mcp_client: Any) -> None:
    assert _ids(mcp_client.call(world.tokens["executive"], "recall", query="deploy", scopes=["sales"])) == [
        world.memories["pricing"]
    ]
    # A scope the token cannot read is reported like a missing one, through the same selector as REST.
    assert (
        _error(mcp_client.call(world.tokens["sales_only"], "recall", query="deploy", scopes=["engineering"]))["error_code"]
        == "UNKNOWN_SCOPE"
    )


@pytest.mark.django_db(transaction=True)
def test_recall_refuses_a_limit_rest_refuses_and_answers_an_empty_query_with_nothing(
    world: SimpleNamespace, mcp_client: Any
) -> None:
    token = world.tokens["executive"]
    for limit in (1000, 51, 0, -3):  # REST answers 400 to each: one rule for both interfaces
        refused = mcp_client.call(token, "recall", query="deploy", limit=limit)
        assert refused.is_error and refused.structured_content["error_code"] == "INVALID_ARGUMENTS", limit
    most = mcp_client.call(token, "recall", query="deploy", limit=50)
    assert most.structured_content["limit"] == 50 and len(most.structured_content["results"]) == 5
    one = mcp_client.call(token, "recall", query="deploy", limit=1)
    assert one.structured_content["limit"] == 1 and len(one.structured_content["results"]) == 1
    for query in ("", "   "):
        empty = mcp_client.call(token, "recall", query=query)
        assert not empty.is_error and empty.structured_content["results"] == []
        assert "No memories" in _text(empty)


@pytest.mark.django_db(transaction=True)
def test_recall_says_when_nothing_is_a_confident_match(world: SimpleNamespace, mcp_client: Any) -> None:
    token = world.tokens["executive"]
    answer = mcp_client.call(token, "recall", query="deploy freeze")
    assert answer.structured_content["confident"] is True
    top = answer.structured_content["results"][0]
    assert top["confidence"] in {"strong", "partial"} and 0 < top["match"] <= 1
    assert f"{top['confidence']} match {top['match']:.2f}" in _text(answer)

    noise = mcp_client.call(token, "recall", query="banana bread walnuts")
    assert noise.structured_content["confident"] is False
    assert all(hit["confidence"] == "weak" for hit in noise.structured_content["results"])
    if noise.structured_content["results"]:
        assert _text(noise).startswith('No confident match for "banana bread walnuts"')


# -- list_memories and get_memory ------------------------------------------------------------------
@pytest.mark.django_db(transaction=True)
def test_list_memories_is_newest_first_visible_only_and_bounds_the_limit(world: SimpleNamespace, mcp_client: Any) -> None:
    listed = mcp_client.call(world.tokens["contractor"], "list_memories")
    assert _ids(listed) == [world.memories["etiquette"], world.memories["freeze"]]
    assert listed.structured_content["limit"] == 20
    assert _text(listed).splitlines()[0].startswith("The 2 most recent memories")
    assert mcp_client.call(world.tokens["executive"], "list_memories", limit=500).is_error
    everything = _ids(mcp_client.call(world.tokens["executive"], "list_memories", limit=50))
    rest = httpx.get(
        f"{mcp_client.server_url}/api/memories",
        params={"limit": 50},
        headers={"Authorization": f"Bearer {world.tokens['executive']}"},
    )
    assert everything == [m["id"] for m in rest.json()["results"]]
    assert len(everything) == 5 and world.memories["globex"] not in everything
    assert mcp_client.call(world.tokens["executive"], "list_memories", limit=0).is_error
    one = mcp_client.call(world.tokens["executive"], "list_memories", limit=1)
    assert one.structured_content["limit"] == 1 and _ids(one) == [world.memories["etiquette"]]
    assert _ids(mcp_client.call(world.tokens["executive"], "list_memories", scope="engineering")) == [
        world.memories["falcon"],
        world.memories["checklist"],
    ]
    assert _ids(mcp_client.call(world.tokens["outsider"], "list_memories")) == [world.memories["globex"]]


@pytest.mark.django_db(transaction=True)
def test_get_memory_returns_the_memory_with_its_citation_and_history(
    world: SimpleNamespace, mcp_client: Any, principal_of: Callable[[Membership], Principal]
) -> None:
    newer = services.memory_supersede(
        principal=principal_of(world.executive),
        memory_id=world.memories["freeze"],
        changes={"content": "Deploy freeze: Dec 18 to Jan 3."},
    ).memory
    result = mcp_client.call(world.tokens["contractor"], "get_memory", id=str(newer.pk))
    data = result.structured_content
    assert (data["id"], data["content"], data["status"], data["supersedes"]) == (
        str(newer.pk),
        "Deploy freeze: Dec 18 to Jan 3.",
        "active",
        world.memories["freeze"],
    )
    assert data["citation"]["title"] == "Deploy freeze" and data["clearance_min"] == "Contractor"
    assert [(h["id"], h["status"]) for h in data["history"]] == [
        (world.memories["freeze"], "superseded"),
        (str(newer.pk), "active"),
    ]
    assert data["url"] == f"{settings.CORTEX_BASE_URL}/memories/{newer.pk}/"
    rest = httpx.get(
        f"{mcp_client.server_url}/api/memories/{newer.pk}", headers={"Authorization": f"Bearer {world.tokens['contractor']}"}
    ).json()
    assert {k: data[k] for k in rest if k in data and k != "history"} == {
        k: rest[k] for k in rest if k in data and k != "history"
    }
    text = _text(result)
    assert (
        text.startswith("# Deploy freeze") and "Dec 18 to Jan 3" in text and "Versions, oldest first" in text and "Cite: " in text
    )
    # The superseded version stays readable by id, as in REST.
    assert (
        mcp_client.call(world.tokens["contractor"], "get_memory", id=world.memories["freeze"]).structured_content["status"]
        == "superseded"
    )


@pytest.mark.django_db(transaction=True)
def test_get_memory_does_not_leak_a_version_the_reader_cannot_see(
    world: SimpleNamespace, mcp_client: Any, principal_of: Callable[[Membership], Principal]
) -> None:
    secret = services.memory_supersede(
        principal=principal_of(world.executive),
        memory_id=world.memories["freeze"],
        changes={"content": "Deploy freeze moves because of the Falcon launch.", "clearance_min": "Executive"},
    ).memory
    data = mcp_client.call(world.tokens["contractor"], "get_memory", id=world.memories["freeze"]).structured_content
    assert (data["status"], data["superseded_by"]) == ("superseded", None)
    assert [h["id"] for h in data["history"]] == [world.memories["freeze"]]
    assert str(secret.pk) not in str(data)
    seen_by_executive = mcp_client.call(world.tokens["executive"], "get_memory", id=world.memories["freeze"]).structured_content
    assert seen_by_executive["superseded_by"] == str(secret.pk)


@pytest.mark.django_db(transaction=True)
def test_recall_leads_from_an_earlier_version_to_the_current_one_the_reader_may_see(
    world: SimpleNamespace, mcp_client: Any, principal_of: Callable[[Membership], Principal]
) -> None:
    moratorium = services.memory_supersede(
        principal=principal_of(world.executive),
        memory_id=world.memories["freeze"],
        changes={"title": "Holiday moratorium", "content": "Nothing ships to production from Dec 22 to Jan 3."},
    ).memory

    result = mcp_client.call(world.tokens["contractor"], "recall", query="deploy freeze dec 20")
    top = result.structured_content["results"][0]
    assert (top["id"], top["earlier_version_id"]) == (str(moratorium.pk), world.memories["freeze"])
    assert world.memories["freeze"] not in _ids(result)
    assert "Found through an earlier version it replaced: Deploy freeze" in _text(result)
    # A reader who may not see the current version gets nothing from the old one.
    services.memory_patch(
        principal=principal_of(world.executive), memory_id=moratorium.pk, changes={"clearance_min": "Executive"}
    )
    hidden = mcp_client.call(world.tokens["contractor"], "recall", query="deploy freeze dec 20")
    assert str(moratorium.pk) not in _ids(hidden) and world.memories["freeze"] not in _ids(hidden)


@pytest.mark.django_db(transaction=True)
def test_another_organizations_memory_is_the_same_not_found_as_a_random_id(world: SimpleNamespace, mcp_client: Any) -> None:
    token = world.tokens["executive"]
    foreign = _error(mcp_client.call(token, "get_memory", id=world.memories["globex"]))
    random_id = _error(mcp_client.call(token, "get_memory", id=str(uuid.uuid4())))
    forbidden = _error(mcp_client.call(world.tokens["contractor"], "get_memory", id=world.memories["falcon"]))
    for error in (foreign, random_id, forbidden):
        assert (error["error_code"], error["message"], error["details"]) == ("NOT_FOUND", "Memory not found.", {})
    # A malformed id is bad input (as in REST), never evidence about what exists.
    assert _error(mcp_client.call(token, "get_memory", id="not-a-uuid"))["error_code"] == "INVALID_ARGUMENTS"
    assert (
        _error(mcp_client.call(world.tokens["outsider"], "get_memory", id=world.memories["freeze"]))["error_code"] == "NOT_FOUND"
    )


# -- bad calls -------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("name", "arguments", "error_code", "says"),
    [
        ("forget_everything", {}, "UNKNOWN_TOOL", "Cortex offers: remember, recall, list_memories, get_memory"),
        ("recall", {"query": "deploy", "limit": "many"}, "INVALID_ARGUMENTS", "limit: Input should be a valid integer"),
        ("recall", {}, "INVALID_ARGUMENTS", "query: Field required"),
        ("remember", {"content": ["not", "text"]}, "INVALID_ARGUMENTS", "content: Input should be a valid string"),
        ("recall", {"query": "deploy", "organization": "globex"}, "INVALID_ARGUMENTS", "Unknown argument: organization"),
        (
            "get_memory",
            {"id": "x", "user_id": "someone", "clearance": "Executive"},
            "INVALID_ARGUMENTS",
            "Unknown arguments: clearance, user_id",
        ),
    ],
)
@pytest.mark.django_db(transaction=True)
def test_bad_calls_are_tool_errors_that_say_what_is_wrong(
    world: SimpleNamespace, mcp_client: Any, name: str, arguments: dict[str, Any], error_code: str, says: str
) -> None:
    before = _counts()
    error = _error(mcp_client.call(world.tokens["executive"], name, **arguments))
    assert error["error_code"] == error_code and says in error["message"], error
    assert _counts() == before
    call = AuditEvent.objects.get(action="mcp.call")
    assert (call.details["tool"], call.outcome, call.details["error_code"], call.actor_kind) == (
        name,
        "error",
        error_code,
        "token",
    )


@pytest.mark.django_db(transaction=True)
def test_malformed_http_requests_are_refused_cleanly(world: SimpleNamespace, mcp_client: Any) -> None:
    headers = {"Authorization": f"Bearer {world.tokens['executive']}", "Accept": ACCEPT, "Content-Type": "application/json"}
    not_json = httpx.post(mcp_client.url, content=b'{"jsonrpc": "2.0", "id": 1, "method": ', headers=headers)
    assert not_json.status_code == 400 and not_json.json()["error"]["code"] == types.PARSE_ERROR
    unknown_method = httpx.post(mcp_client.url, json={"jsonrpc": "2.0", "id": 2, "method": "memories/dump"}, headers=headers)
    assert unknown_method.json()["error"]["code"] == types.METHOD_NOT_FOUND
    before = _counts()
    call = {"name": "remember", "arguments": {"content": "x" * (settings.DATA_UPLOAD_MAX_MEMORY_SIZE + 1)}}
    too_big = httpx.post(
        mcp_client.url, json={"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": call}, headers=headers
    )
    assert too_big.status_code == 413 and _counts() == before
    assert httpx.get(mcp_client.url, headers=headers).status_code == 405


@pytest.mark.django_db(transaction=True)
def test_a_crash_is_an_internal_error_that_tells_nothing_but_the_request_id(
    world: SimpleNamespace, mcp_client: Any, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("secret internals: password=hunter2")

    monkeypatch.setattr("memories.mcp.server.memory_list", broken)  # the server runs in this process
    error = _error(mcp_client.call(world.tokens["executive"], "list_memories"))
    assert error["error_code"] == "INTERNAL_ERROR" and "hunter2" not in str(error) and error["request_id"]
    assert "MCP tool list_memories crashed" in caplog.text
    call = AuditEvent.objects.get(action="mcp.call")
    assert (call.outcome, call.details["error_code"], call.request_id) == ("error", "INTERNAL_ERROR", error["request_id"])


# -- authentication --------------------------------------------------------------------------------
def _initialize(url: str, headers: dict[str, str] | None = None) -> httpx.Response:
    """One raw initialize POST, to look at the HTTP answer itself."""
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}},
    }
    return httpx.post(url, json=body, headers={"Accept": ACCEPT, **(headers or {})})


@pytest.mark.parametrize(
    "authorization",
    [None, "Bearer ctx_deadbeef_not-a-real-secret", "Bearer", "Basic dXNlcjpwdw==", "Bearer garbage"],
)
@pytest.mark.django_db(transaction=True)
def test_a_missing_or_bad_token_is_401_with_a_challenge_before_any_mcp_message(
    world: SimpleNamespace, mcp_client: Any, authorization: str | None
) -> None:
    response = _initialize(mcp_client.url, {"Authorization": authorization} if authorization else {})
    assert response.status_code == 401
    challenge = response.headers["WWW-Authenticate"]
    assert challenge.startswith("Bearer ") and 'error="invalid_token"' in challenge
    assert f'resource_metadata="{settings.CORTEX_BASE_URL}/.well-known/oauth-protected-resource/mcp/"' in challenge
    assert response.json()["error"] == "invalid_token"
    assert not AuditEvent.objects.filter(action="mcp.call").exists()
    if authorization and authorization.startswith("Bearer ") and authorization.strip() != "Bearer":
        assert AuditEvent.objects.filter(action="auth.token_rejected", outcome="denied", organization=None).exists()


@pytest.mark.django_db(transaction=True)
def test_protected_resource_metadata_names_the_endpoint_and_header_tokens(mcp_client: Any) -> None:
    for path in ("/.well-known/oauth-protected-resource/mcp/", "/.well-known/oauth-protected-resource/mcp"):
        response = httpx.get(f"{mcp_client.server_url}{path}")
        assert response.status_code == 200
        document = response.json()
        assert document["resource"] == f"{settings.CORTEX_BASE_URL}/mcp/"
        assert document["bearer_methods_supported"] == ["header"]
        assert [s.rstrip("/") for s in document["authorization_servers"]] == [settings.CORTEX_BASE_URL]


@pytest.mark.django_db(transaction=True)
def test_the_endpoint_answers_with_and_without_the_trailing_slash_and_echoes_request_ids(
    world: SimpleNamespace, mcp_client: Any
) -> None:
    auth = {"Authorization": f"Bearer {world.tokens['contractor']}"}
    for url in (mcp_client.url, mcp_client.url.rstrip("/")):
        response = _initialize(url, auth)
        assert response.status_code == 200, response.text
        assert response.json()["result"]["protocolVersion"] == "2025-06-18"
        assert len(response.headers["X-Request-ID"]) == 32
    assert _initialize(mcp_client.url, {**auth, "X-Request-ID": "agent-run-42"}).headers["X-Request-ID"] == "agent-run-42"
    assert _initialize(mcp_client.url, {"X-Request-ID": "agent-run-43"}).headers["X-Request-ID"] == "agent-run-43"  # the 401 too


@pytest.mark.django_db(transaction=True)
def test_an_agents_request_id_ties_the_calls_audit_events_together(world: SimpleNamespace, mcp_client: Any) -> None:
    async def flow() -> None:
        async with mcp_client.connect(world.tokens["executive"], **{"X-Request-ID": "agent-run-7"}) as client:
            await client.call_tool("recall", {"query": "deploy"})

    mcp_client.run(flow)
    events = AuditEvent.objects.filter(request_id="agent-run-7").order_by("id")
    assert [e.action for e in events] == ["memory.recall", "mcp.call"]
    assert {e.actor_token_id for e in events} == {
        ApiToken.objects.get(membership=world.executive, read_only=False, scopes=None).pk
    }


@pytest.mark.django_db(transaction=True)
def test_an_invalid_origin_is_403_and_our_own_origin_is_allowed(world: SimpleNamespace, mcp_client: Any) -> None:
    auth = {"Authorization": f"Bearer {world.tokens['contractor']}"}
    assert _initialize(mcp_client.url, {**auth, "Origin": "https://evil.example"}).status_code == 403
    assert _initialize(mcp_client.url, {**auth, "Origin": mcp_client.server_url}).status_code == 200
    assert _initialize(mcp_client.url, {**auth, "Origin": settings.CORTEX_BASE_URL}).status_code == 200
    assert _initialize(mcp_client.url, {**auth, "Host": "evil.example"}).status_code == 421


def _revoke_in_a_thread(membership: Membership) -> None:
    # The client flow holds this thread's event loop; the revocation runs beside it and cleans up after itself.
    try:
        tenancy.token_revoke(token=ApiToken.objects.get(membership=membership))
    finally:
        connections.close_all()


@pytest.mark.django_db(transaction=True)
def test_a_revoked_token_stops_working_on_the_next_call(
    make_org: Callable[..., Organization], make_member: Callable[..., Membership], make_token: Callable[..., str], mcp_client: Any
) -> None:
    member = make_member(make_org("initech"), "Employee")
    token = make_token(member)

    async def flow() -> tuple[types.CallToolResult, MCPError | None]:
        async with mcp_client.connect(token) as client:
            before = await client.call_tool("list_memories", {})
            await anyio.to_thread.run_sync(_revoke_in_a_thread, member)
            try:
                await client.call_tool("list_memories", {})
            except MCPError as exc:  # the SDK client reports the HTTP 401 as an MCP error
                return before, exc
            return before, None

    before, refused = mcp_client.run(flow)
    assert not before.is_error
    assert refused is not None
    assert _initialize(mcp_client.url, {"Authorization": f"Bearer {token}"}).status_code == 401
    assert AuditEvent.objects.filter(action="mcp.call").count() == 1


@pytest.mark.django_db(transaction=True)
def test_an_expired_token_is_refused(world: SimpleNamespace, mcp_client: Any, make_token: Callable[..., str]) -> None:
    token = make_token(world.contractor, name="short-lived", expires_at=timezone.now() + timedelta(days=1))
    assert _initialize(mcp_client.url, {"Authorization": f"Bearer {token}"}).status_code == 200
    ApiToken.objects.filter(name="short-lived").update(expires_at=timezone.now() - timedelta(seconds=1))  # time passes
    assert _initialize(mcp_client.url, {"Authorization": f"Bearer {token}"}).status_code == 401


@pytest.mark.django_db(transaction=True)
def test_a_token_revoked_after_the_http_check_is_refused_by_the_tool(
    world: SimpleNamespace, make_token: Callable[..., str]
) -> None:
    token = make_token(world.contractor, name="revoked mid-request")
    access = verify_api_token(token)
    assert access is not None
    tenancy.token_revoke(token=ApiToken.objects.get(name="revoked mid-request"))

    def work(principal: Principal) -> Answer:
        raise AssertionError("the tool body must not run for a revoked token")

    error = _error(run_tool("list_memories", access, work))
    assert error["error_code"] == "INVALID_TOKEN" and "revoked" in error["message"]
    call = AuditEvent.objects.get(action="mcp.call")
    assert (call.outcome, call.organization_id, call.actor_kind) == ("denied", world.acme.pk, "token")


@pytest.mark.django_db(transaction=True)
def test_concurrent_agents_each_get_their_own_answers(world: SimpleNamespace, mcp_client: Any) -> None:
    results: dict[tuple[str, int], list[str]] = {}

    async def agent(principal: str, n: int) -> None:
        async with mcp_client.connect(world.tokens[principal]) as client:
            results[principal, n] = _ids(await client.call_tool("recall", {"query": "deploy", "limit": 10}))

    async def flow() -> None:
        async with anyio.create_task_group() as group:
            for n in range(3):
                for principal in ("executive", "contractor", "sales_only", "outsider"):
                    group.start_soon(agent, principal, n)

    mcp_client.run(flow)
    for principal in ("executive", "contractor", "sales_only", "outsider"):
        assert results[principal, 0] == results[principal, 1] == results[principal, 2]
    assert results["outsider", 0] == [world.memories["globex"]] and results["sales_only", 0] == [world.memories["pricing"]]
    assert AuditEvent.objects.filter(action="mcp.call", outcome="ok").count() == 12


# -- protocol revisions ----------------------------------------------------------------------------
@pytest.mark.django_db(transaction=True)
def test_2025_06_18_and_2026_07_28_clients_get_the_same_answers(world: SimpleNamespace, mcp_client: Any) -> None:
    token = world.tokens["contractor"]

    async def handshake_2025_06_18() -> tuple[str, types.CallToolResult]:
        async with mcp_client.session(token) as session:
            initialized = await session.send_request(
                types.InitializeRequest(
                    params=types.InitializeRequestParams(
                        protocol_version="2025-06-18",
                        capabilities=types.ClientCapabilities(),
                        client_info=types.Implementation(name="test-agent", version="1"),
                    )
                ),
                types.InitializeResult,
            )
            session.adopt(initialized)
            await session.send_notification(types.InitializedNotification())
            return initialized.protocol_version, await session.call_tool("recall", {"query": "deploy"})

    async def stateless_2026_07_28() -> tuple[str, types.CallToolResult]:
        async with mcp_client.connect(token, mode="2026-07-28") as client:
            return client.protocol_version, await client.call_tool("recall", {"query": "deploy"})

    async def negotiated() -> tuple[str, types.CallToolResult]:
        async with mcp_client.connect(token, mode="auto") as client:
            return client.protocol_version, await client.call_tool("recall", {"query": "deploy"})

    answers = {
        version: _ids(result)
        for version, result in (mcp_client.run(f) for f in (handshake_2025_06_18, stateless_2026_07_28, negotiated))
    }
    assert set(answers) == {"2025-06-18", "2026-07-28"}
    assert answers["2025-06-18"] == answers["2026-07-28"]
    assert set(answers["2025-06-18"]) == {world.memories["freeze"], world.memories["etiquette"]}


@pytest.mark.django_db(transaction=True)
def test_a_tokens_calls_share_one_rate_limit_across_mcp_and_rest(
    world: SimpleNamespace, mcp_client: Any, make_token: Callable[..., str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from cortex_site.api import PrincipalRateThrottle

    monkeypatch.setattr(PrincipalRateThrottle, "THROTTLE_RATES", {"principal": "3/min"})
    token = make_token(world.contractor)
    assert not mcp_client.call(token, "recall", query="deploy freeze").is_error
    assert httpx.get(f"{mcp_client.server_url}/api/scopes", headers={"Authorization": f"Bearer {token}"}).status_code == 200
    assert not mcp_client.call(token, "list_memories").is_error

    limited = _error(mcp_client.call(token, "recall", query="deploy freeze"))
    assert limited["error_code"] == "RATE_LIMITED" and limited["details"]["retry_after_seconds"] > 0
    assert httpx.get(f"{mcp_client.server_url}/api/scopes", headers={"Authorization": f"Bearer {token}"}).status_code == 429
    # Another token has its own budget.
    assert not mcp_client.call(world.tokens["contractor"], "recall", query="deploy freeze").is_error
    assert AuditEvent.objects.filter(action="mcp.call", details__error_code="RATE_LIMITED").count() == 1


@pytest.mark.django_db(transaction=True)
def test_get_memory_and_list_memories_each_record_a_read_event_like_rest(world: SimpleNamespace, mcp_client: Any) -> None:
    mcp_client.call(world.tokens["contractor"], "get_memory", id=world.memories["freeze"])
    read = AuditEvent.objects.get(action="memory.read")
    assert (read.target_id, read.details, read.actor_kind) == (world.memories["freeze"], {"via": "mcp"}, "token")
    mcp_client.call(world.tokens["contractor"], "list_memories", scope="public-docs")
    listed = AuditEvent.objects.get(action="memory.list")
    assert listed.details["via"] == "mcp" and listed.details["filters"] == {"scope": "public-docs", "status": "active"}
    assert set(listed.details["results"]) <= {world.memories["etiquette"], world.memories["freeze"]}
    mcp_client.call(world.tokens["outsider"], "get_memory", id=world.memories["freeze"])  # NOT_FOUND: nothing was read
    assert AuditEvent.objects.filter(action="memory.read").count() == 1

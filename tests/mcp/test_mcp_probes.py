"""The MCP endpoint probed the way an outside client would: odd argument values, odd tool names,
narrowed tokens and protocol methods Cortex does not use. Whatever is sent, the answer is a tool
error with an error code and a sentence (or a JSON-RPC error with a real code), never a crash that
shows internals, and a refused call changes nothing."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import mcp.types as types
import pytest

from audit.models import AuditEvent
from memories.models import Memory, MemoryChunk, RedactionRequest

pytestmark = pytest.mark.django_db(transaction=True)

ACCEPT = "application/json, text/event-stream"


@pytest.fixture
def world(runners: dict[str, Any], make_token: Callable[..., str]) -> dict[str, Any]:
    admin, employee = runners["admin"], runners["employee"]
    return {
        "memory": str(runners["memory"].pk),
        "tokens": {
            "admin": make_token(admin),
            "employee": make_token(employee),
            "admin_engineering_only": make_token(admin, name="engineering only", scope_slugs=["engineering"]),
        },
    }


def _state() -> tuple[Any, ...]:
    return (
        sorted(Memory.objects.values_list("id", "status", "title", "content", "tags")),
        MemoryChunk.objects.count(),
        sorted(RedactionRequest.objects.values_list("id", "status", "reason")),
    )


def _error(result: types.CallToolResult) -> dict[str, Any]:
    assert result.is_error, result
    body = result.structured_content
    assert body is not None and set(body) == {"error_code", "message", "request_id", "details"}, result
    block = result.content[0]
    assert isinstance(block, types.TextContent) and block.text == f"{body['error_code']}: {body['message']}"
    return body


NUL_CALLS: dict[str, Callable[[dict[str, Any]], tuple[str, str, dict[str, Any], str]]] = {
    "list_memories-scope": lambda w: ("admin", "list_memories", {"scope": "engineering\x00"}, "scope"),
    "list_memories-category": lambda w: ("admin", "list_memories", {"category": "note\x00"}, "category"),
    "recall_timeline-scope": lambda w: ("admin", "recall_timeline", {"scope": "\x00"}, "scope"),
    "recall_about-entity": lambda w: ("admin", "recall_about", {"entity": "Falcon\x00"}, "entity"),
    "redact-reason": lambda w: ("admin", "redact", {"id": w["memory"], "reason": "a secret\x00"}, "reason"),
    "request_redaction-reason": lambda w: ("employee", "request_redaction", {"id": w["memory"], "reason": "old\x00"}, "reason"),
    "recall-scopes": lambda w: ("admin", "recall", {"query": "runners", "scopes": ["engineering", "x\x00"]}, "scopes"),
}


@pytest.mark.parametrize("case", sorted(NUL_CALLS))
def test_a_nul_character_in_a_text_argument_is_refused_as_bad_input_not_a_crash(
    case: str, world: dict[str, Any], mcp_client: Any
) -> None:
    who, tool, arguments, argument = NUL_CALLS[case](world)
    before = _state()
    error = _error(mcp_client.call(world["tokens"][who], tool, **arguments))
    assert error["error_code"] == "INVALID_ARGUMENTS", error
    assert argument in error["message"] and "NUL" in error["message"], error
    assert _state() == before
    call = AuditEvent.objects.get(action="mcp.call")
    assert (call.details["tool"], call.outcome, call.details["error_code"]) == (tool, "error", "INVALID_ARGUMENTS")


def test_a_tool_name_holding_a_nul_is_an_unknown_tool_that_shows_no_internals(world: dict[str, Any], mcp_client: Any) -> None:
    error = _error(mcp_client.call(world["tokens"]["admin"], "list\x00scopes"))
    assert error["error_code"] == "UNKNOWN_TOOL" and "Cortex offers: remember" in error["message"]
    assert "SELECT" not in str(error) and "Unicode" not in str(error)
    call = AuditEvent.objects.get(action="mcp.call")
    assert (call.outcome, call.details["error_code"], call.actor_kind) == ("error", "UNKNOWN_TOOL", "token")
    assert "\x00" not in call.details["tool"] and call.details["tool"].startswith("list")


def test_list_scopes_answers_a_token_narrowed_away_from_the_default_scope(world: dict[str, Any], mcp_client: Any) -> None:
    token = world["tokens"]["admin_engineering_only"]
    result = mcp_client.call(token, "list_scopes")  # the SDK client checks it against the output schema
    assert not result.is_error, result.content
    data = result.structured_content
    assert [s["slug"] for s in data["scopes"]] == ["engineering"] and data["scopes"][0]["can_write"]
    assert data["default_scope"] is None
    # The default it cannot read is never named, as remember's own refusal does not name it.
    assert "public-docs" not in str(data) and "public-docs" not in result.content[0].text
    assert "remember" in data["default_scope_rule"] and "scope" in data["default_scope_rule"]
    # What it says holds: without a scope remember is refused, with one it stores.
    assert _error(mcp_client.call(token, "remember", content="Runners move to 8 cores."))["error_code"] == "UNKNOWN_SCOPE"
    stored = mcp_client.call(token, "remember", content="Runners move to 8 cores.", scope="engineering")
    assert not stored.is_error and stored.structured_content["scope"] == "engineering"


def test_an_argument_given_to_a_tool_that_takes_none_says_it_takes_none(world: dict[str, Any], mcp_client: Any) -> None:
    error = _error(mcp_client.call(world["tokens"]["admin"], "list_scopes", organization="globex"))
    assert error["error_code"] == "INVALID_ARGUMENTS"
    assert error["message"] == "Unknown argument: organization. list_scopes takes no arguments.", error


def test_an_unknown_prompt_is_an_invalid_params_error_like_an_unknown_resource(
    world: dict[str, Any], mcp_client: Any, caplog: pytest.LogCaptureFixture
) -> None:
    headers = {
        "Authorization": f"Bearer {world['tokens']['admin']}",
        "Accept": ACCEPT,
        "MCP-Protocol-Version": "2025-06-18",
    }

    def rpc(method: str, params: dict[str, Any]) -> dict[str, Any]:
        body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
        response = httpx.post(mcp_client.url, json=body, headers=headers)
        assert response.status_code == 200, response.text
        return response.json()

    resource = rpc("resources/read", {"uri": "cortex://memories/all"})["error"]
    prompt = rpc("prompts/get", {"name": "summarise_everything"})["error"]
    assert resource["code"] == prompt["code"] == types.INVALID_PARAMS
    assert prompt["message"] == "Unknown prompt: summarise_everything"
    assert "Traceback" not in caplog.text


@pytest.mark.parametrize(
    ("tool", "arguments", "says"),
    [
        ("recall", {"query": "runners", "scopes": ["engineering", ""]}, "scopes.1: This field may not be blank."),
        ("recall", {"query": "runners", "tags": [""]}, "tags.0: This field may not be blank."),
    ],
)
def test_a_bad_item_in_a_list_argument_is_named_by_its_position_in_plain_words(
    tool: str, arguments: dict[str, Any], says: str, world: dict[str, Any], mcp_client: Any
) -> None:
    error = _error(mcp_client.call(world["tokens"]["admin"], tool, **arguments))
    assert error["error_code"] == "VALIDATION_ERROR" and error["message"] == says, error
    assert "ErrorDetail" not in str(error)


@pytest.mark.parametrize("tool", ["list_memories", "recall_timeline"])
def test_a_scope_filter_naming_a_scope_the_token_cannot_read_is_unknown_scope(
    tool: str, world: dict[str, Any], mcp_client: Any
) -> None:
    error = _error(mcp_client.call(world["tokens"]["admin"], tool, scope="no-such-scope"))
    assert error["error_code"] == "UNKNOWN_SCOPE", error

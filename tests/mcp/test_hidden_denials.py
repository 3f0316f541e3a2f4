"""MCP's side of the hidden-object denials (REST and UI: tests/audit/test_hidden_denials.py): a tool
that answers NOT_FOUND for a memory that exists records `access.denied` in the owner's log with the
rule; the tool result is the one a missing id gets, and the prober's own log (its `mcp.call`) is
the same for both."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pytest
from mcp.types import CallToolResult
from support import remember

from audit.models import AuditEvent
from memories.models import Membership

pytestmark = pytest.mark.django_db(transaction=True)

RULES = ["organization", "scope", "clearance", "token_narrowing"]


def _target(acme: dict[str, Any], outsider: Membership, rule: str) -> tuple[str, Membership, dict[str, Any]]:
    if rule == "organization":
        return str(remember(acme["employee"], "The VPN gateway is vpn-2.", scope="engineering").pk), outsider, {}
    if rule == "scope":
        return str(remember(acme["manager"], "Q3 discount ceiling is 12%.", scope="sales").pk), acme["employee"], {}
    if rule == "clearance":
        memory = remember(acme["manager"], "Two engineers leave in May.", scope="engineering", clearance_min="Manager")
        return str(memory.pk), acme["employee"], {}
    memory = remember(acme["employee"], "Staging is rebuilt on Sundays.", scope="engineering")
    return str(memory.pk), acme["employee"], {"scope_slugs": ["handbook"]}


def _call(mcp_client: Any, token: str, tool: str, arguments: dict[str, Any]) -> CallToolResult:
    async def flow() -> CallToolResult:
        async with mcp_client.connect(token, **{"X-Request-ID": "probe-1"}) as client:
            return await client.call_tool(tool, arguments)

    result: CallToolResult = mcp_client.run(flow)
    return result


def _shape(result: CallToolResult, ids: tuple[str, str]) -> str:
    text = repr((result.is_error, result.structured_content, [c.model_dump() for c in result.content]))
    for ident in ids:
        text = text.replace(ident, "ID")
    return text


def _own_calls(organization_id: int) -> list[tuple[str, str, Any]]:
    events = AuditEvent.objects.filter(organization_id=organization_id, action="mcp.call").order_by("id")
    return [(e.outcome, e.target_id, e.details) for e in events]


@pytest.mark.parametrize("tool", ["get_memory", "redact"])
@pytest.mark.parametrize("rule", RULES)
def test_a_hidden_memory_probe_over_mcp_is_recorded_in_the_owners_log(
    acme: dict[str, Any], outsider: Membership, make_token: Callable[..., str], mcp_client: Any, rule: str, tool: str
) -> None:
    target_id, prober, options = _target(acme, outsider, rule)
    token = make_token(prober, **options)
    missing_id = str(uuid.uuid4())
    extra = {"reason": "probe"} if tool == "redact" else {}

    missing = _call(mcp_client, token, tool, {"id": missing_id, **extra})
    assert missing.is_error and missing.structured_content and missing.structured_content["error_code"] == "NOT_FOUND"
    assert not AuditEvent.objects.filter(action="access.denied").exists()

    hidden = _call(mcp_client, token, tool, {"id": target_id, **extra})
    assert _shape(hidden, (target_id, missing_id)) == _shape(missing, (target_id, missing_id))

    [event] = AuditEvent.objects.filter(action="access.denied")
    assert event.organization_id == acme["org"].pk
    assert (event.target_type, event.target_id, event.actor_user_id, event.actor_kind) == (
        "memory",
        target_id,
        prober.user.pk,
        "token",
    )
    assert event.details["rule"] == rule and event.details["via"] == "mcp" and event.details["path"] == f"tool:{tool}"
    # The prober's own organization holds two identical mcp.call events, whatever the id was.
    first, second = _own_calls(prober.organization_id)[-2:]
    assert first == second
    if rule == "organization":
        assert not AuditEvent.objects.filter(organization_id=outsider.organization_id, action="access.denied").exists()

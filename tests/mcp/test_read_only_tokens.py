"""A read-only token changes nothing through MCP either: every tool that writes (remember, supersede,
redact, request_redaction) answers TOKEN_READ_ONLY and leaves the store as it was, while the same
person's ordinary token may make the change — so the refusal comes from the flag alone. The reading
tools keep working with it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from support import principal

from audit.models import AuditEvent
from memories.models import Memory, RedactionRequest

pytestmark = pytest.mark.django_db(transaction=True)


def _state() -> tuple[Any, ...]:
    return (
        sorted(Memory.objects.values_list("id", "status", "title", "content", "tags")),
        sorted(RedactionRequest.objects.values_list("id", "status")),
        # Done writes only: the refused call itself is audited as mcp.call with its error code.
        AuditEvent.objects.filter(action__startswith="memory.").exclude(action__in=["memory.recall", "memory.read"]).count(),
    )


@pytest.fixture
def world(runners: dict[str, Any], make_token: Callable[..., str]) -> dict[str, Any]:
    admin, employee = runners["admin"], runners["employee"]
    return {
        **runners,
        "tokens": {
            "admin": make_token(admin),
            "admin_ro": make_token(admin, read_only=True),
            "employee": make_token(employee),
            "employee_ro": make_token(employee, read_only=True),
        },
    }


CALLS: dict[str, Callable[[dict[str, Any]], tuple[str, str, dict[str, Any]]]] = {
    "remember": lambda w: ("admin", "remember", {"content": "Runners move to 8 cores in May.", "scope": "engineering"}),
    "supersede": lambda w: ("admin", "supersede", {"id": str(w["memory"].pk), "content": "CI runners have 8 cores."}),
    "redact": lambda w: ("admin", "redact", {"id": str(w["memory"].pk), "reason": "wrong"}),
    "redact-urgent": lambda w: ("admin", "redact", {"id": str(w["memory"].pk), "reason": "a secret", "urgent": True}),
    # Neither author nor admin: the employee may only ask.
    "request_redaction": lambda w: ("employee", "request_redaction", {"id": str(w["memory"].pk), "reason": "outdated"}),
}


@pytest.mark.parametrize("name", sorted(CALLS))
def test_a_read_only_token_changes_nothing_through_any_writing_tool(name: str, world: dict[str, Any], mcp_client: Any) -> None:
    who, tool, arguments = CALLS[name](world)
    before = _state()
    refused = mcp_client.call(world["tokens"][f"{who}_ro"], tool, **arguments)
    assert refused.is_error and refused.structured_content["error_code"] == "TOKEN_READ_ONLY", refused.content
    assert _state() == before
    done = mcp_client.call(world["tokens"][who], tool, **arguments)
    assert not done.is_error, done.content
    assert _state() != before


def test_a_read_only_token_still_reads_through_mcp(world: dict[str, Any], mcp_client: Any) -> None:
    token = world["tokens"]["admin_ro"]
    found = mcp_client.call(token, "get_memory", id=str(world["memory"].pk))
    assert not found.is_error and found.structured_content["id"] == str(world["memory"].pk)
    recalled = mcp_client.call(token, "recall", query="CI runner cores")
    assert not recalled.is_error
    assert str(world["memory"].pk) in str(recalled.structured_content)
    assert principal(world["admin"]).can_redact(world["memory"])

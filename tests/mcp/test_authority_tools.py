"""MCP follows the same authority as REST and the UI: `supersede` supersedes for the author, a
higher rung and an admin, and *proposes* a revision for a lower-rung writer (saying so); `redact`
is for the author and admins; `remember` refuses a future valid_from. Outsiders and read-only tokens change nothing."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from types import SimpleNamespace
from typing import Any

import pytest
from django.utils import timezone

from memories.access import Principal
from memories.models import Conflict, Membership, Memory, Organization, Scope
from memories.services import memories as services

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def world(
    make_org: Callable[..., Organization],
    make_scope: Callable[..., Scope],
    make_member: Callable[..., Membership],
    make_token: Callable[..., str],
    principal_of: Callable[[Membership], Principal],
) -> SimpleNamespace:
    acme = make_org("acme", "Acme Robotics")
    make_scope(acme, "engineering")
    people = {
        "author": make_member(acme, "Employee", grants={"engineering": True}),
        "higher": make_member(acme, "Manager", grants={"engineering": True}),
        "lower": make_member(acme, "Contractor", grants={"engineering": True}),
        "admin": make_member(acme, "Executive", admin=True, grants={"engineering": True}),
        "outsider": make_member(make_org("globex", "Globex"), "Executive", admin=True),
    }
    tokens = {who: make_token(m) for who, m in people.items()}
    tokens["read_only"] = make_token(people["author"], read_only=True)

    def store(content: str) -> Memory:
        draft = services.MemoryDraft(content=content, scope="engineering")
        return services.memory_create(principal=principal_of(people["author"]), draft=draft).memory

    return SimpleNamespace(org=acme, people=people, tokens=tokens, store=store)


SUPERSEDE = [
    ("author", "superseded"),
    ("higher", "superseded"),
    ("lower", "proposed"),
    ("admin", "superseded"),
    ("outsider", "NOT_FOUND"),
    ("read_only", "TOKEN_READ_ONLY"),
]


def test_supersede_follows_authority_and_a_lower_rung_is_told_it_proposed(world: Any, mcp_client: Any) -> None:
    for who, outcome in SUPERSEDE:
        old = world.store(f"The build cache lives for 7 days ({who}).")
        result = mcp_client.call(
            world.tokens[who], "supersede", id=str(old.pk), content=f"The build cache lives for 3 days ({who})."
        )
        old.refresh_from_db()
        if outcome == "superseded":
            assert not result.is_error, (who, result.content)
            assert old.status == "superseded" and str(old.superseded_by_id) == result.structured_content["id"], who
        elif outcome == "proposed":
            assert not result.is_error, result.content
            assert result.structured_content["status"] == "proposed"
            assert "Proposed" in result.content[0].text and "stays current" in result.content[0].text
            assert old.status == "active"
            assert Conflict.objects.get(existing_memory=old).kind == "revision"
        else:
            assert result.is_error and result.structured_content["error_code"] == outcome, who
            assert old.status == "active" and not Memory.objects.filter(supersedes=old).exists(), who


REDACT = [
    ("higher", "REDACTION_NOT_ALLOWED"),
    ("lower", "REDACTION_NOT_ALLOWED"),
    ("outsider", "NOT_FOUND"),
    ("read_only", "TOKEN_READ_ONLY"),
    ("admin", "redacted"),
    ("author", "redacted"),
]


def test_redact_is_for_the_author_and_admins_only(world: Any, mcp_client: Any) -> None:
    for who, outcome in REDACT:
        memory = world.store(f"The staging password is hunter2 ({who}).")
        result = mcp_client.call(world.tokens[who], "redact", id=str(memory.pk), reason="holds a password")
        memory.refresh_from_db()
        if outcome == "redacted":
            assert not result.is_error and memory.status == "redacted", who
        else:
            assert result.is_error and result.structured_content["error_code"] == outcome, who
            assert memory.status == "active" and "hunter2" in memory.content, who


def test_remember_refuses_a_future_valid_from(world: Any, mcp_client: Any) -> None:
    # (remember takes no author_name at all: an agent's memory is cited as its token's member.)
    future = (timezone.now() + timedelta(days=3650)).isoformat()
    dated = mcp_client.call(world.tokens["lower"], "remember", content="Fresh for a decade.", valid_from=future)
    assert dated.is_error and dated.structured_content["error_code"] == "VALID_FROM_IN_FUTURE"
    assert not Memory.objects.filter(content="Fresh for a decade.").exists()

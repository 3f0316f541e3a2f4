"""The tools an agent needs beyond remember/recall: list_scopes, supersede, redact, recall_about,
recall_timeline, max_tokens packing, and where `remember` lands — each with a principal who may
not and an outsider from another organization who must see nothing."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any

import pytest

from memories.access import Principal
from memories.models import ApiToken, Membership, Memory, Organization, Scope
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
    make_scope(acme, "leadership")
    employee = make_member(acme, "Employee", grants={"engineering": True})
    contractor = make_member(acme, "Contractor", grants={"engineering": False})
    executive = make_member(acme, "Executive", admin=True, grants={"engineering": True, "leadership": True})
    outsider = make_member(make_org("globex", "Globex"), "Executive", admin=True)

    def store(member: Membership, **fields: Any) -> Memory:
        return services.memory_create(principal=principal_of(member), draft=services.MemoryDraft(**fields)).memory

    return SimpleNamespace(
        org=acme,
        employee=employee,
        contractor=contractor,
        executive=executive,
        outsider=outsider,
        store=store,
        tokens={
            "employee": make_token(employee),
            "employee_ro": make_token(employee, read_only=True),
            "contractor": make_token(contractor),
            "executive": make_token(executive),
            "outsider": make_token(outsider),
        },
    )


def test_list_scopes_shows_what_the_token_reads_and_writes_and_where_remember_lands(world: Any, mcp_client: Any) -> None:
    data = mcp_client.call(world.tokens["employee"], "list_scopes").structured_content
    scopes = {s["slug"]: s for s in data["scopes"]}
    assert set(scopes) == {"engineering", "public-docs"}  # never leadership, which they may not read
    assert scopes["engineering"]["can_write"] and scopes["engineering"]["visibility"] == "granted"
    assert data["clearance"] == "Employee"
    assert data["clearance_ladder"] == ["Contractor", "Employee", "Manager", "Executive"]
    assert data["default_scope"] == "public-docs" and not data["read_only"]
    readonly = mcp_client.call(world.tokens["employee_ro"], "list_scopes").structured_content
    assert readonly["read_only"] and not any(s["can_write"] for s in readonly["scopes"])
    outsider = mcp_client.call(world.tokens["outsider"], "list_scopes").structured_content
    assert {s["slug"] for s in outsider["scopes"]} == {"public-docs"} and outsider["organization"] == "Globex"


def test_remember_says_where_it_landed_and_who_reads_it(world: Any, mcp_client: Any) -> None:
    result = mcp_client.call(world.tokens["employee"], "remember", content="The on-call rota changes on Mondays.")
    assert not result.is_error
    data = result.structured_content
    assert data["scope"] == "public-docs" and data["scope_resolution"] == "default"
    assert data["readers"] == "every member of the organization with clearance Contractor or above"
    assert "Who can read it: every member" in result.content[0].text


def test_remember_lands_in_the_tokens_default_scope_and_clearance(world: Any, mcp_client: Any) -> None:
    token = ApiToken.objects.get(membership=world.employee, read_only=False)
    engineering = Scope.objects.get(organization=world.org, slug="engineering")
    ApiToken.objects.filter(pk=token.pk).update(default_scope=engineering, default_clearance_rank=1)
    data = mcp_client.call(world.tokens["employee"], "remember", content="Builds cache for 7 days.").structured_content
    assert data["scope"] == "engineering" and data["scope_resolution"] == "token_default"
    assert data["readers"] == "members granted the scope engineering with clearance Employee or above"
    memory = Memory.objects.get(pk=data["id"])
    assert memory.clearance_rank == 1


def test_supersede_replaces_a_memory_for_those_who_may_and_no_one_else(world: Any, mcp_client: Any) -> None:
    old = world.store(world.employee, title="Runner size", content="CI runners have 4 cores.", scope="engineering")
    contractor = mcp_client.call(world.tokens["contractor"], "supersede", id=str(old.pk), content="CI runners have 2 cores.")
    assert contractor.is_error and contractor.structured_content["error_code"] == "MEMORY_NOT_WRITABLE"
    outsider = mcp_client.call(world.tokens["outsider"], "supersede", id=str(old.pk), content="Globex says 1 core.")
    assert outsider.is_error and outsider.structured_content["error_code"] == "NOT_FOUND"
    readonly = mcp_client.call(world.tokens["employee_ro"], "supersede", id=str(old.pk), content="8 cores.")
    assert readonly.is_error
    old.refresh_from_db()
    assert old.status == "active"

    result = mcp_client.call(world.tokens["employee"], "supersede", id=str(old.pk), content="CI runners have 8 cores.")
    assert not result.is_error, result.content
    new_id = result.structured_content["id"]
    old.refresh_from_db()
    assert old.status == "superseded" and str(old.superseded_by_id) == new_id
    assert result.structured_content["replaces"] == str(old.pk)


def test_redact_is_refused_to_outsiders_and_read_only_tokens(world: Any, mcp_client: Any) -> None:
    memory = world.store(world.employee, title="Temp creds", content="The staging password is hunter2.", scope="engineering")
    outsider = mcp_client.call(world.tokens["outsider"], "redact", id=str(memory.pk), reason="leak")
    assert outsider.is_error and outsider.structured_content["error_code"] == "NOT_FOUND"
    readonly = mcp_client.call(world.tokens["employee_ro"], "redact", id=str(memory.pk), reason="leak")
    assert readonly.is_error
    memory.refresh_from_db()
    assert memory.status == "active"
    done = mcp_client.call(world.tokens["employee"], "redact", id=str(memory.pk), reason="holds a password")
    assert not done.is_error and done.structured_content["status"] == "redacted"
    memory.refresh_from_db()
    assert memory.status == "redacted" and "hunter2" not in memory.content


def test_malformed_ids_are_invalid_arguments_not_missing(world: Any, mcp_client: Any) -> None:
    for tool, extra in (("get_memory", {}), ("supersede", {"content": "x"}), ("redact", {"reason": "x"})):
        result = mcp_client.call(world.tokens["employee"], tool, id="not-a-uuid", **extra)
        assert result.is_error and result.structured_content["error_code"] == "INVALID_ARGUMENTS", tool


def test_recall_about_gives_a_dossier_of_visible_memories_only(world: Any, mcp_client: Any) -> None:
    world.store(world.employee, title="Indexer owner", content="Maria Chen owns acme/checkout-api.", scope="engineering")
    world.store(world.executive, title="Reorg", content="Maria Chen owns acme/board-deck.", scope="leadership")
    data = mcp_client.call(world.tokens["employee"], "recall_about", entity="Maria Chen").structured_content
    assert data["entity"] == "Maria Chen"
    assert [r["title"] for r in data["results"]] == ["Indexer owner"]
    executive = mcp_client.call(world.tokens["executive"], "recall_about", entity="maria chen").structured_content
    assert {r["title"] for r in executive["results"]} == {"Indexer owner", "Reorg"}
    outsider = mcp_client.call(world.tokens["outsider"], "recall_about", entity="Maria Chen")
    assert outsider.is_error and outsider.structured_content["error_code"] == "NOT_FOUND"


def test_recall_timeline_lists_dated_memories_in_order_within_the_period(world: Any, mcp_client: Any) -> None:
    for day, title in ((3, "Kickoff"), (10, "Beta"), (20, "Launch")):
        world.store(
            world.employee,
            title=title,
            content=f"{title} happened.",
            scope="engineering",
            valid_from=datetime(2025, 3, day, tzinfo=UTC),
        )
    world.store(
        world.executive, title="Board", content="Board met.", scope="leadership", valid_from=datetime(2025, 3, 12, tzinfo=UTC)
    )
    data = mcp_client.call(world.tokens["employee"], "recall_timeline", since="2025-03-01", until="2025-03-15").structured_content
    assert [r["title"] for r in data["results"]] == ["Kickoff", "Beta"]
    everything = mcp_client.call(world.tokens["executive"], "recall_timeline", since="2025-03-01", until="2025-04-01")
    assert [r["title"] for r in everything.structured_content["results"]] == ["Kickoff", "Beta", "Board", "Launch"]
    outsider = mcp_client.call(world.tokens["outsider"], "recall_timeline", since="2025-03-01").structured_content
    assert outsider["results"] == []
    bad = mcp_client.call(world.tokens["employee"], "recall_timeline", since="March")
    assert bad.is_error and bad.structured_content["error_code"] == "INVALID_ARGUMENTS"


def test_max_tokens_packs_full_then_previews_then_ids_within_the_budget(world: Any, mcp_client: Any) -> None:
    topics = [
        ("backlog", "The payment queue backlog reached 40k messages after the retry storm on Monday."),
        ("alerts", "Pager alerts for the payment queue now fire at 5k messages instead of 20k."),
        ("retries", "Retries on the payment queue use exponential backoff capped at ten minutes."),
        ("owners", "The payments team owns the payment queue consumers and their dashboards."),
        ("capacity", "Payment queue consumers scale out to twelve pods during the retry storm window."),
        ("drills", "Every quarter the payment queue failover drill replays a recorded retry storm."),
    ]
    filler = " Details, timelines and the follow-up actions are listed in the incident review."
    for name, text in topics:
        world.store(world.employee, title=f"Payment queue {name}", content=text + filler * 8, scope="engineering")
    body = filler.strip()
    for budget in (150, 400, 900):
        result = mcp_client.call(
            world.tokens["employee"], "recall", query="payment queue retry storm", limit=6, max_tokens=budget
        )
        assert not result.is_error
        packing = result.structured_content["packing"]
        text = result.content[0].text
        assert packing["used_tokens"] <= budget and -(-len(text) // 4) == packing["used_tokens"]
        shown = packing["full"] + packing["preview"]
        assert len(shown) + len(packing["dropped"]) == 6
        ranked = [r["id"] for r in result.structured_content["results"]]
        assert ranked == shown  # tiers follow rank: full ones first, then previews
        for memory_id in packing["dropped"]:
            assert memory_id in text  # listed so the agent can fetch it
        full = [r for r in result.structured_content["results"] if r["id"] in packing["full"]]
        assert all(r["content"] and body in r["content"] for r in full)
    roomy = mcp_client.call(world.tokens["employee"], "recall", query="payment queue", limit=6, max_tokens=20000)
    assert len(roomy.structured_content["packing"]["full"]) == 6
    too_small = mcp_client.call(world.tokens["employee"], "recall", query="payment queue", max_tokens=10)
    assert too_small.is_error and too_small.structured_content["error_code"] == "INVALID_ARGUMENTS"


def test_a_refused_redaction_offers_the_request_path_and_the_request_waits_for_the_author(world: Any, mcp_client: Any) -> None:
    memory = world.store(world.executive, title="Vendor contact", content="Call Dana at 555-0100.", scope="engineering")
    refused = mcp_client.call(world.tokens["employee"], "redact", id=str(memory.pk), reason="personal data")
    assert refused.is_error and refused.structured_content["error_code"] == "REDACTION_NOT_ALLOWED"
    assert "request_redaction" in refused.content[0].text
    asked = mcp_client.call(world.tokens["employee"], "request_redaction", id=str(memory.pk), reason="a personal phone number")
    assert not asked.is_error and asked.structured_content["status"] == "open"
    memory.refresh_from_db()
    assert memory.status == "active"  # readable until the author or an admin decides
    again = mcp_client.call(world.tokens["employee"], "request_redaction", id=str(memory.pk), reason="still there")
    assert again.is_error and again.structured_content["error_code"] == "REDACTION_REQUEST_OPEN"
    outsider = mcp_client.call(world.tokens["outsider"], "request_redaction", id=str(memory.pk), reason="x")
    assert outsider.is_error and outsider.structured_content["error_code"] == "NOT_FOUND"
    readonly = mcp_client.call(world.tokens["employee_ro"], "request_redaction", id=str(memory.pk), reason="x")
    assert readonly.is_error

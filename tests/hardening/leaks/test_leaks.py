"""The leak suite: every read surface (REST, browser, MCP) asked by every principal of the world.

No answer may contain a canary beyond the principal's rights — in results, snippets, counts,
facets, error messages or headers — an object it may not open answers exactly like a missing one,
and the complete lists show everything it may read (so nothing passes by showing nothing).
Principals are listed in world.py, surfaces in surfaces.py; this file only crosses them.
"""

from __future__ import annotations

import json
import os
from typing import Any

import pytest

from hardening.leaks import channels
from hardening.leaks.surfaces import MCP, REST, UI, Answer, Check, run_surfaces
from hardening.leaks.world import MCP_PRINCIPALS, SESSION_PRINCIPALS, SHARED_QUERY, TOKEN_PRINCIPALS, World

pytestmark = pytest.mark.django_db


def _report(channel: str, check: Check) -> None:
    """With CORTEX_LEAK_REPORT set (bench/reliability/r10_leaks.py), append this check's figures to it."""
    path = os.environ.get("CORTEX_LEAK_REPORT")
    if path:
        with open(path, "a", encoding="utf-8") as report:
            line = {"channel": channel, "principal": check.who.name, "requests": check.requests}
            line |= {"canaries_checked": check.canaries_checked, "problems": len(check.problems)}
            report.write(json.dumps(line) + "\n")


def _assert_clean(channel: str, check: Check) -> None:
    _report(channel, check)
    assert check.requests > 0
    assert not check.problems, "\n".join(check.problems[:40])


@pytest.mark.parametrize("key", TOKEN_PRINCIPALS)
def test_rest_shows_no_principal_more_than_its_rights(world: World, key: str) -> None:
    who = world.principals[key]
    _assert_clean("rest", run_surfaces(world, who, REST, channels.rest(who), who.org))


@pytest.mark.parametrize("key", SESSION_PRINCIPALS)
def test_the_browser_shows_no_member_more_than_their_rights(world: World, key: str) -> None:
    who = world.sessions[key]
    _assert_clean("ui", run_surfaces(world, who, UI, channels.browser(world, who), who.org))


@pytest.mark.parametrize("key", MCP_PRINCIPALS)
def test_mcp_shows_no_principal_more_than_its_rights(world: World, key: str, leak_server_url: str) -> None:
    who = world.principals[key]
    if not who.usable:
        answer = channels.mcp_refused(leak_server_url, who)
        check = Check(who)
        check.leaks(world, "initialize", answer)
        if answer.status != 401:
            check.problems.append(f"initialize: a token that may not connect answered {answer.status}")
        _assert_clean("mcp", check)
        return
    # The calls are made on one connection in one event loop: a first pass lists them, the second
    # checks the answers in the same order.
    calls: list[tuple[Any, ...]] = []

    def record(call: tuple[Any, ...]) -> Answer:
        calls.append(call)
        return Answer(0, "")

    run_surfaces(world, who, MCP, record, who.org)
    answers = iter(channels.mcp_calls(leak_server_url, who, calls))
    _assert_clean("mcp", run_surfaces(world, who, MCP, lambda _call: next(answers), who.org))


def test_the_canaries_reach_every_kind_of_surface(world: World) -> None:
    # The suite is only as good as its plants: each kind of place holds canaries the executive reads.
    executive = world.principals["exec"]
    kinds = {c.key.split("@")[0].split("-")[0] for c in world.canaries if c.allowed(executive)}
    assert {"public", "handbook", "engineering", "sales", "leadership", "superseded", "proposal", "conflict"} <= kinds
    assert {"brief", "redaction", "audit", "connector", "expired", "authored", "run"} <= kinds
    assert len(world.conflicts) >= 1 and len(world.entity_ids) >= 20 and world.job_id
    assert not any(c.allowed(executive) for c in world.canaries if c.org == "globex")


def test_principals_cover_every_kind(world: World) -> None:
    kinds = {(who.via, who.usable, who.read_only, who.token_scopes is not None) for who in world.principals.values()}
    assert ("token", True, True, True) in kinds  # narrowed and read-only
    assert ("token", False, False, False) in kinds  # expired / revoked / deactivated
    assert ("oauth", True, False, True) in kinds
    assert {world.principals[k].rung for k in ("contractor", "employee", "manager", "exec")} == {0, 1, 2, 3}
    assert world.connector_principal is not None
    # One person deactivated in one organization and active in another, asked as both.
    split = (world.principals["split@acme"], world.principals["split@globex"])
    assert [(who.org, who.usable) for who in split] == [("acme", False), ("globex", True)] and split[0].email == split[1].email


def test_a_connector_reads_only_what_its_installer_may(world: World) -> None:
    # A connector acts with its installer's scopes and clearance (here an admin at Manager who reads sales):
    # what the write pipeline reads on its behalf (lists, recall, entities, conflicts) stays inside that.
    from memories.selectors.conflicts import visible_conflicts
    from memories.selectors.entities import visible_entities
    from memories.selectors.memories import visible_memories
    from memories.selectors.recall import RecallQuery, recall

    acting = world.connector_principal
    assert acting is not None
    who = world.principals["mgradmin"]
    shown = [m.title + m.content + " ".join(m.tags) for m in visible_memories(acting, status="all")]
    shown += [h.memory.title + h.memory.content for h in recall(acting, RecallQuery(query=SHARED_QUERY, limit=50)).hits]
    shown += [e.name for e in visible_entities(acting)]
    shown += [c.new_memory.title + c.existing_memory.title for c in visible_conflicts(acting, status="all")]
    check = Check(who)
    check.leaks(world, "connector", Answer(200, "\n".join(shown)))
    _assert_clean("selectors", check)

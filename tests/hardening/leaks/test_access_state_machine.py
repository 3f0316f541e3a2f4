"""A Hypothesis state machine over access changes — grant, revoke, change clearance, deactivate and
reactivate, redact, supersede, narrow a token — that checks the read rule after every step on REST,
MCP (the live endpoint) and the browser.

The model is the read rule written out plainly (scope readable by grant or all-members, narrowed by
the token; clearance at least the memory's; active; same organization); after each step every member's
REST list and MCP list_memories must name exactly the memories the model says, and the browser list
must show none of the others. Each example starts from a fresh, committed organization (the MCP
server reads from its own connections) and the database is emptied after it.

`make test` runs the small profile; bench/reliability/r10_leaks.py sets CORTEX_LEAK_FULL=1 for the long one.
"""

from __future__ import annotations

import itertools
import json
import os
from dataclasses import dataclass, field
from typing import Any

import anyio
import httpx2
import pytest
from django.core.management import call_command
from django.test import Client
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule, run_state_machine_as_test
from mcp.client import Client as McpClient
from mcp.client.streamable_http import streamable_http_client

from memories.access import Principal
from memories.models import Membership, Scope
from memories.services import accounts, tenancy
from memories.services.memories import MemoryDraft, memory_create, memory_redact, memory_supersede

RUNGS = ("Contractor", "Employee", "Manager", "Executive")
SCOPES = ("public-docs", "engineering", "sales")
GRANTED = ("engineering", "sales")
PEOPLE = ("ana", "bo", "cy")

settings.register_profile(
    "leaks-quick", max_examples=2, stateful_step_count=4, deadline=None, suppress_health_check=list(HealthCheck)
)
settings.register_profile(
    "leaks-long", max_examples=25, stateful_step_count=12, deadline=None, suppress_health_check=list(HealthCheck)
)
PROFILE = "leaks-long" if os.environ.get("CORTEX_LEAK_FULL") == "1" else "leaks-quick"
_words = itertools.count(1)
_server: dict[str, str] = {}


def _word() -> str:
    n = next(_words)
    return "sm" + "".join("bcdfghjklmnpqrstv"[(n >> (4 * i)) % 16] + "aeiou"[(n >> i) % 5] for i in range(4))


@dataclass
class Person:
    membership: Membership
    rung: int
    grants: set[str] = field(default_factory=set)
    active: bool = True
    secret: str = ""
    narrowed: frozenset[str] | None = None

    def reads(self, *, through_token: bool) -> set[str]:
        """The scopes this person reads: through their (possibly narrowed) token, or signed in to the
        browser, where no token narrows anything."""
        if not self.active:
            return set()
        scopes = {"public-docs"} | self.grants
        return scopes if self.narrowed is None or not through_token else scopes & self.narrowed


@dataclass
class Stored:
    id: str
    word: str
    scope: str
    rung: int
    status: str = "active"
    org: str = "sm"


class AccessMachine(RuleBasedStateMachine):
    """Access changes on one organization (and a neighbour whose memory nobody here may ever see)."""

    @initialize()
    def build(self) -> None:
        self.steps = 0
        org = tenancy.organization_create(slug="sm", name="State machine")
        for slug in GRANTED:
            tenancy.scope_create(organization=org, slug=slug, visibility=Scope.Visibility.GRANTED)
        self.admin = tenancy.member_add(
            organization=org, email="admin@sm.test", clearance="Executive", role="admin", password=None
        )
        for slug in GRANTED:
            tenancy.grant_set(membership=self.admin, scope=Scope.objects.get(organization=org, slug=slug), can_write=True)
        self.org = org
        self.people: dict[str, Person] = {}
        for n, name in enumerate(PEOPLE):
            membership = tenancy.member_add(
                organization=org, email=f"{name}@sm.test", clearance=RUNGS[n], role="member", password=None
            )
            self.people[name] = Person(membership, n)
            self._new_token(name)
        self.memories: list[Stored] = []
        for scope in SCOPES:
            for rung in (0, 2):
                self._store(scope, rung)
        neighbour = tenancy.organization_create(slug="sm-next", name="Next door")
        other = tenancy.member_add(
            organization=neighbour, email="other@sm.test", clearance="Executive", role="admin", password=None
        )
        word = _word()
        memory = memory_create(
            principal=Principal(other), draft=MemoryDraft(content=f"Neighbour note {word}.", scope="public-docs")
        ).memory
        self.memories.append(Stored(str(memory.pk), word, "public-docs", 0, org="sm-next"))

    def teardown(self) -> None:
        call_command("flush", verbosity=0, interactive=False, allow_cascade=True)

    # -- helpers ----------------------------------------------------------------------------------
    def _acting_admin(self) -> Principal:
        return Principal(Membership.objects.select_related("organization", "user").get(pk=self.admin.pk))

    def _scope(self, slug: str) -> Scope:
        return Scope.objects.get(organization=self.org, slug=slug)

    def _new_token(self, name: str, narrowed: frozenset[str] | None = None) -> None:
        person = self.people[name]
        _token, person.secret = tenancy.token_create(
            membership=person.membership, name="machine", scope_slugs=sorted(narrowed) if narrowed else None
        )
        person.narrowed = narrowed

    def _store(self, scope: str, rung: int) -> Stored:
        word = _word()
        draft = MemoryDraft(
            content=f"Access note {word} for {scope}.", title=f"Note {word}", scope=scope, clearance_min=RUNGS[rung]
        )
        memory = memory_create(principal=self._acting_admin(), draft=draft).memory
        stored = Stored(str(memory.pk), word, scope, rung)
        self.memories.append(stored)
        return stored

    def _visible(self, person: Person, *, through_token: bool) -> set[str]:
        reads = person.reads(through_token=through_token)
        return {
            m.id for m in self.memories if m.org == "sm" and m.status == "active" and m.scope in reads and m.rung <= person.rung
        }

    # -- rules ------------------------------------------------------------------------------------
    @rule(name=st.sampled_from(PEOPLE), scope=st.sampled_from(GRANTED), write=st.booleans())
    def grant(self, name: str, scope: str, write: bool) -> None:
        tenancy.grant_set(
            membership=self.people[name].membership, scope=self._scope(scope), can_write=write, by=self._acting_admin()
        )
        self.people[name].grants.add(scope)

    @rule(name=st.sampled_from(PEOPLE), scope=st.sampled_from(GRANTED))
    def revoke(self, name: str, scope: str) -> None:
        if scope in self.people[name].grants:
            tenancy.grant_revoke(membership=self.people[name].membership, scope=self._scope(scope), by=self._acting_admin())
            self.people[name].grants.discard(scope)

    @rule(name=st.sampled_from(PEOPLE), rung=st.integers(0, 3))
    def change_clearance(self, name: str, rung: int) -> None:
        person = self.people[name]
        tenancy.member_update(membership=person.membership, clearance=RUNGS[rung], by=self._acting_admin())
        person.rung = rung

    @rule(name=st.sampled_from(PEOPLE))
    def deactivate_or_reactivate(self, name: str) -> None:
        person = self.people[name]
        if person.active:
            accounts.member_deactivate(membership=person.membership, by=self._acting_admin())
            person.active = False  # its tokens were revoked with it
        else:
            accounts.member_reactivate(membership=person.membership, by=self._acting_admin())
            person.active = True
            self._new_token(name)

    @rule(name=st.sampled_from(PEOPLE), scopes=st.sets(st.sampled_from(SCOPES), min_size=1))
    def narrow_token(self, name: str, scopes: set[str]) -> None:
        person = self.people[name]
        allowed = frozenset(scopes & ({"public-docs"} | person.grants))
        if person.active and allowed:
            self._new_token(name, allowed)

    @rule(data=st.data())
    def redact(self, data: st.DataObject) -> None:
        live = [m for m in self.memories if m.org == "sm" and m.status == "active"]
        if live:
            target = data.draw(st.sampled_from(live))
            memory_redact(principal=self._acting_admin(), memory_id=target.id, reason="state machine")
            target.status = "redacted"

    @rule(data=st.data())
    def supersede(self, data: st.DataObject) -> None:
        live = [m for m in self.memories if m.org == "sm" and m.status == "active"]
        if live:
            target = data.draw(st.sampled_from(live))
            word = _word()
            new = memory_supersede(
                principal=self._acting_admin(),
                memory_id=target.id,
                changes={"content": f"Access note {word}, revised.", "title": f"Note {word}"},
            ).memory
            target.status = "superseded"
            self.memories.append(Stored(str(new.pk), word, target.scope, target.rung))

    @rule(scope=st.sampled_from(SCOPES), rung=st.integers(0, 3))
    def remember(self, scope: str, rung: int) -> None:
        self._store(scope, rung)

    # -- the read rule, on every channel ---------------------------------------------------------------
    @invariant()
    def every_channel_follows_the_read_rule(self) -> None:
        self.steps += 1
        for name, person in self.people.items():
            expected = self._visible(person, through_token=True)
            in_session = self._visible(person, through_token=False)
            hidden = {m.word for m in self.memories if m.id not in in_session}
            rest = Client().get("/api/memories", {"limit": 50}, headers={"Authorization": f"Bearer {person.secret}"})
            if not person.active:
                assert rest.status_code == 401, (name, rest.status_code)
            else:
                assert rest.status_code == 200, (name, rest.content[:200])
                assert {m["id"] for m in rest.json()["results"]} == expected, (name, "REST")
                assert {m["id"] for m in _mcp_list(person.secret)} == expected, (name, "MCP")
            browser = Client()
            browser.force_login(person.membership.user)
            page = browser.get("/memories/")
            shown = page.content.decode().lower()
            assert not [word for word in hidden if word in shown], (name, "UI")
        _count(people=len(self.people))


def _mcp_list(secret: str) -> list[dict[str, Any]]:
    async def flow() -> list[dict[str, Any]]:
        async with (
            httpx2.AsyncClient(headers={"Authorization": f"Bearer {secret}"}, timeout=httpx2.Timeout(30.0)) as http,
            McpClient(streamable_http_client(f"{_server['url']}/mcp/", http_client=http)) as client,
        ):
            result = await client.call_tool("list_memories", {"limit": 50})
            assert not result.is_error, result
            return list((result.structured_content or {}).get("results", []))

    return anyio.run(flow)


def _count(*, people: int) -> None:
    """With CORTEX_LEAK_REPORT set, count the checked steps for the reliability report."""
    path = os.environ.get("CORTEX_LEAK_REPORT")
    if path:
        with open(path, "a", encoding="utf-8") as report:
            report.write(json.dumps({"channel": "state-machine", "steps": 1, "principals": people}) + "\n")


@pytest.mark.django_db(transaction=True)
def test_access_changes_keep_the_read_rule_on_every_channel(leak_server_url: str) -> None:
    _server["url"] = leak_server_url
    run_state_machine_as_test(AccessMachine, settings=settings.get_profile(PROFILE))

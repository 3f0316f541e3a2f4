"""Property: for random organizations, people, tokens and memories, no API read — list, detail, recall —
ever returns a memory the read rule forbids, and every allowed memory is reachable by detail."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from conftest import ApiClient
from django.utils import timezone
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memories.access import Principal
from memories.models import Membership, Memory, Scope, ScopeGrant
from memories.services import tenancy
from memories.services.memories import MemoryDraft, memory_create, memory_redact, memory_supersede

RUNGS = ["Contractor", "Employee", "Manager", "Executive"]
WORDS = ["dock", "battery", "firmware", "pricing", "hiring", "vpn", "rollout", "budget"]

_world = 0


def allowed(memory: Memory, membership: Membership, token_scope_ids: set[int], *, history: bool) -> bool:
    """DESIGN.md §3's read rule, written independently of memories.access."""
    if memory.organization_id != membership.organization_id:
        return False
    scope = memory.scope
    granted = ScopeGrant.objects.filter(membership=membership, scope=scope).exists()
    if not (scope.visibility == Scope.Visibility.ALL_MEMBERS or granted):
        return False
    if token_scope_ids and scope.pk not in token_scope_ids:
        return False
    if memory.clearance_rank > membership.clearance_rank:
        return False
    if history:
        return True
    return memory.status == "active" and (memory.valid_until is None or memory.valid_until > timezone.now())


person = st.fixed_dictionaries(
    {
        "rung": st.integers(0, 3),
        "grants": st.lists(st.tuples(st.integers(0, 2), st.booleans()), max_size=3),
        "token_scopes": st.lists(st.integers(0, 3), max_size=2),
        "home": st.integers(0, 1),
    }
)
memory_spec = st.fixed_dictionaries(
    {
        "org": st.integers(0, 1),
        "scope": st.integers(0, 3),
        "rung": st.integers(0, 3),
        "fate": st.sampled_from(["active", "active", "active", "superseded", "redacted", "expired"]),
        "words": st.lists(st.sampled_from(WORDS), min_size=1, max_size=3),
    }
)


@pytest.mark.django_db
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(people=st.lists(person, min_size=2, max_size=4), memories=st.lists(memory_spec, min_size=3, max_size=10))
def test_no_api_read_returns_a_forbidden_memory(people: list[dict[str, Any]], memories: list[dict[str, Any]]) -> None:
    global _world
    _world += 1
    orgs = [tenancy.organization_create(slug=f"w{_world}-o{i}") for i in range(2)]
    scopes = []
    for org in orgs:
        # Index 0 is public-docs (all members); then two granted scopes and one all-members scope.
        org_scopes = [Scope.objects.get(organization=org, slug="public-docs")]
        org_scopes.append(tenancy.scope_create(organization=org, slug="alpha"))
        org_scopes.append(tenancy.scope_create(organization=org, slug="beta"))
        org_scopes.append(tenancy.scope_create(organization=org, slug="open", visibility=Scope.Visibility.ALL_MEMBERS))
        scopes.append(org_scopes)
    writers = [
        Principal(
            tenancy.member_add(
                organization=org,
                email=f"w{_world}-writer{i}@example.test",
                clearance="Executive",
            )
        )
        for i, org in enumerate(orgs)
    ]
    for i, writer in enumerate(writers):
        for scope in scopes[i][1:3]:
            tenancy.grant_set(membership=writer.membership, scope=scope, can_write=True)
    writers = [Principal(Membership.objects.get(pk=w.membership.pk)) for w in writers]

    for n, spec in enumerate(memories):
        writer = writers[spec["org"]]
        scope = scopes[spec["org"]][spec["scope"]]
        valid_from = timezone.now() - timedelta(days=10)
        valid_until = timezone.now() - timedelta(days=1) if spec["fate"] == "expired" else None
        created = memory_create(
            principal=writer,
            draft=MemoryDraft(
                content=f"{' '.join(spec['words'])} note {n} in world {_world}",
                scope=scope.slug,
                clearance_min=RUNGS[spec["rung"]],
                valid_from=valid_from,
                valid_until=valid_until,
            ),
        ).memory
        if spec["fate"] == "superseded":
            memory_supersede(
                principal=writer,
                memory_id=created.pk,
                changes={"content": f"{' '.join(spec['words'])} revised {n} world {_world}"},
            )
        elif spec["fate"] == "redacted":
            memory_redact(principal=writer, memory_id=created.pk, reason="property test")

    world_memories = list(Memory.objects.filter(organization__in=orgs).select_related("scope"))
    for index, spec in enumerate(people):
        org = orgs[spec["home"]]
        membership = tenancy.member_add(organization=org, email=f"w{_world}-p{index}@example.test", clearance=RUNGS[spec["rung"]])
        for scope_index, can_write in spec["grants"]:
            tenancy.grant_set(membership=membership, scope=scopes[spec["home"]][scope_index + 1], can_write=can_write)
        readable_now = Principal(Membership.objects.get(pk=membership.pk))
        token_slugs = sorted(
            {scopes[spec["home"]][i].slug for i in spec["token_scopes"]} & {s.slug for s in readable_now.readable_scopes()}
        )
        token, secret = tenancy.token_create(membership=membership, name="prop", scope_slugs=token_slugs)
        token_scope_ids = set(token.scopes.values_list("id", flat=True))
        client = ApiClient(secret)

        listed = {m["id"] for status in ("active", "all") for m in _all_pages(client, status)}
        recalled = {
            hit["memory"]["id"]
            for word in WORDS[:4]
            for hit in client.post("/api/recall", {"query": word, "limit": 50}).json()["results"]
        }
        for memory in world_memories:
            may_list = allowed(memory, membership, token_scope_ids, history=False)
            may_detail = allowed(memory, membership, token_scope_ids, history=True)
            detail = client.get(f"/api/memories/{memory.pk}")
            assert (detail.status_code == 200) is may_detail, (memory.pk, detail.status_code, may_detail)
            if str(memory.pk) in recalled:
                assert may_list, f"recall returned a forbidden memory {memory.pk}"
            if str(memory.pk) in listed:
                assert may_detail, f"list returned a forbidden memory {memory.pk}"
        active_listed = {m["id"] for m in _all_pages(client, "active")}
        assert active_listed == {str(m.pk) for m in world_memories if allowed(m, membership, token_scope_ids, history=False)}


def _all_pages(client: ApiClient, status: str) -> list[dict[str, Any]]:
    results: list[dict[str, Any]] = []
    url: str | None = f"/api/memories?status={status}&limit=100"
    while url:
        body = client.get(url).json()
        results += body["results"]
        url = body["next"]
    return results

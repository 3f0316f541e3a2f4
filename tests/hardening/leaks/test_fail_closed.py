"""Fail closed: a principal who may read nothing gets nothing everywhere — never "no filter".

Three ways to read nothing: a member at the lowest rung without grants where everything is above
that rung, a token narrowed to a scope its member no longer reads (the narrowing stays; the grant
went), and the same through the selectors for a connector-like in-process principal. Each must get
empty lists, no recall hits, no entities, no conflicts, no scopes beyond what it reads, and 404s for
every object.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from support import principal, remember

from memories.access import Principal
from memories.models import ApiToken, Membership, Organization, Scope
from memories.selectors.conflicts import visible_conflicts
from memories.selectors.dashboard import counts_by_scope, memory_facets, visible_total
from memories.selectors.entities import visible_entities
from memories.selectors.memories import visible_memories
from memories.selectors.recall import RecallQuery, recall
from memories.services import tenancy
from memories.services.post_write import run_post_write

pytestmark = pytest.mark.django_db

WORDS = "falcon rollout schedule for the payments team"


@pytest.fixture
def stocked(acme: dict[str, Any], make_member: Callable[..., Membership]) -> dict[str, Any]:
    """Acme with memories in every scope, all at Employee or above, and a conflict among them."""
    memories = [
        remember(acme["exec"], f"The {WORDS} (PAY-{n}) is in {scope}.", scope=scope, clearance_min="Employee", tags=["falcon"])
        for n, scope in enumerate(("public-docs", "handbook", "engineering", "sales"), start=100)
    ]
    run_post_write(memories[2].pk)
    nobody = make_member(acme["org"], "Contractor")  # no grants, lowest rung
    tenancy.grant_set(
        membership=acme["employee"], scope=Scope.objects.get(organization=acme["org"], slug="sales"), can_write=False
    )
    _token, foreign = tenancy.token_create(membership=acme["employee"], name="sales only", scope_slugs=["sales"])
    tenancy.grant_revoke(membership=acme["employee"], scope=Scope.objects.get(organization=acme["org"], slug="sales"))
    return {"memories": memories, "nobody": nobody, "foreign_token": foreign}


def _empty_everywhere(client: Any, memory_ids: list[str]) -> None:
    for path, data in (
        ("/api/memories", {"limit": 50}),
        ("/api/memories", {"limit": 50, "status": "all"}),
        ("/api/memories", {"tag": "falcon"}),
        ("/api/recall", {"q": WORDS}),
        ("/api/entities", {"limit": 50}),
        ("/api/conflicts", {"status": "all"}),
    ):
        response = client.get(path, data)
        assert response.status_code == 200, (path, response.content[:300])
        assert response.json()["results"] == [], (path, data)
    asked = client.post("/api/ask", {"question": f"What is the {WORDS}?"})
    assert asked.status_code == 200 and asked.json()["sources"] == []
    for memory_id in memory_ids:
        assert client.get(f"/api/memories/{memory_id}").status_code == 404


def test_a_member_at_the_lowest_rung_without_grants_sees_nothing(stocked: dict[str, Any], api: Any) -> None:
    client = api(stocked["nobody"])
    _empty_everywhere(client, [str(m.pk) for m in stocked["memories"]])
    # The scopes every member reads are listed (they are empty for this rung), granted ones are not.
    assert {s["slug"] for s in client.get("/api/scopes").json()["results"]} == {"public-docs", "handbook"}


def test_a_token_narrowed_to_a_scope_its_member_lost_sees_nothing(
    acme: dict[str, Any], stocked: dict[str, Any], api: Any
) -> None:
    from conftest import ApiClient

    client = ApiClient(stocked["foreign_token"])
    _empty_everywhere(client, [str(m.pk) for m in stocked["memories"]])
    assert client.get("/api/scopes").json()["results"] == []
    # The member's own token, not narrowed, still reads engineering and the all-members scopes.
    own = {m["scope"] for m in api(acme["employee"]).get("/api/memories").json()["results"]}
    assert own == {"public-docs", "handbook", "engineering"}


def test_selectors_give_an_empty_reading_principal_nothing(acme: dict[str, Any], stocked: dict[str, Any]) -> None:
    token = ApiToken.objects.get(name="sales only")
    employee = Membership.objects.select_related("organization", "user").get(pk=acme["employee"].pk)
    for acting in (Principal(employee, token), principal(stocked["nobody"])):
        assert acting.readable_scope_ids == frozenset() or acting.clearance_rank == 0
        assert list(visible_memories(acting, status="all")) == []
        assert recall(acting, RecallQuery(query=WORDS, limit=50)).hits == []
        assert list(visible_entities(acting)) == []
        assert list(visible_conflicts(acting, status="all")) == []
        assert visible_total(acting) == 0
        assert all(tally.count == 0 for tally in counts_by_scope(acting))
        facets = memory_facets(acting)
        assert "falcon" not in str(facets)


def test_an_organization_without_members_reading_is_not_a_wildcard(
    make_org: Callable[..., Organization], api: Any, acme: dict[str, Any]
) -> None:
    # An outsider's own, empty organization shows nothing of acme's, however it asks.
    outsider = tenancy.member_add(
        organization=make_org("hollow"), email="hollow@example.test", clearance="Executive", role="admin"
    )
    remember(acme["exec"], f"The {WORDS} lives in public docs.", scope="public-docs")
    client = api(outsider)
    for path in ("/api/memories", "/api/entities", "/api/conflicts"):
        assert client.get(path).json()["results"] == []
    assert client.get("/api/recall", {"q": WORDS}).json()["results"] == []

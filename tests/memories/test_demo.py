"""The demo organization's knowledge base: written once through the write pipeline, realistic
enough for search, conflicts, entities and the dashboard, and different for each demo person."""

from __future__ import annotations

from datetime import timedelta
from io import StringIO
from typing import Any

import pytest
from django.core.management import call_command
from django.utils import timezone
from support import principal, signed_in

from audit.models import AuditEvent
from memories.cli.demo import PEOPLE
from memories.demo.knowledge import load
from memories.models import Conflict, Entity, Membership, Memory, Organization
from memories.selectors.memories import visible_memories

SYNCED = {"GitHub", "Slack", "Gmail", "Drive", "Notion"}


def demo() -> list[str]:
    out = StringIO()
    call_command("cortex", "demo", stdout=out)
    return out.getvalue().splitlines()


def member(email: str) -> Membership:
    return Membership.objects.select_related("organization", "user").get(organization__slug="acme", user__email=email)


@pytest.fixture
def seeded(transactional_db: Any, use_embedder: Any) -> Organization:
    # The local model, as `make run` seeds with; transactional, so the post-write work (conflict
    # detection, entities) runs on commit, eagerly, as the worker would run it.
    use_embedder("local")
    demo()
    return Organization.objects.get(slug="acme")


def test_the_data_files_hold_a_few_hundred_memories_across_sources_scopes_and_clearances() -> None:
    entries, briefs = load()
    assert len(entries) >= 200
    assert {e.source for e in entries} >= SYNCED | {"Manual"}
    assert {e.scope for e in entries} == {"engineering", "sales", "people", "leadership", "handbook"}
    assert {e.clearance for e in entries} == {"Contractor", "Employee", "Manager", "Executive"}
    assert max(e.age for e in entries) > 600 and min(e.age for e in entries) < 7
    assert all(e.url.startswith("https://") for e in entries if e.source in SYNCED)
    assert briefs


def test_the_seed_goes_through_the_pipeline_once(seeded: Organization) -> None:
    entries, briefs = load()
    memories = Memory.objects.filter(organization=seeded)
    superseding = sum(1 for e in entries if e.supersedes)
    assert memories.count() == len(entries) + len(briefs)
    assert memories.filter(supersedes__isnull=False).count() >= superseding >= 3
    # Every write is audited as the person who made it, like any other write.
    writes = AuditEvent.objects.filter(organization=seeded, action__in=["memory.create", "memory.supersede"])
    assert writes.count() == memories.count()
    # written as an import on each demo person's behalf (their authors and dates are the sources' own)
    assert set(writes.values_list("actor_label", flat=True)) >= {
        "ada@acme.test (cli)",
        "mo@acme.test (cli)",
        "eve@acme.test (cli)",
    }
    # Ages spread over two years, on the record and on the dashboard's clock alike.
    oldest = memories.order_by("created_at").first()
    assert oldest is not None and oldest.created_at < timezone.now() - timedelta(days=600)
    assert memories.filter(created_at__gte=timezone.now() - timedelta(days=56)).count() >= 10
    with_links = memories.filter(source__in=SYNCED).exclude(source_url="")
    assert set(with_links.values_list("source", flat=True)) == SYNCED
    brief = memories.get(category="meeting", title="Leipzig go-live review")
    assert "## Decisions" in brief.content and "## Transcript" in brief.content
    # Conflict detection ran: a few are left open for a person to decide.
    open_conflicts = Conflict.objects.filter(organization=seeded, status=Conflict.Status.OPEN)
    every = Conflict.objects.filter(organization=seeded).values_list(
        "status", "kind", "confidence", "new_memory__title", "existing_memory__title", "resolution_note"
    )
    assert 2 <= open_conflicts.count() <= 4, "\n".join(map(str, every))
    assert Entity.objects.filter(organization=seeded).count() >= 20
    # Once: a second run writes nothing.
    before = memories.count()
    lines = demo()
    assert memories.count() == before
    assert not any("Demo knowledge written" in line for line in lines)


def test_each_demo_person_sees_a_visibly_different_slice(seeded: Organization) -> None:
    seen = {email: set(visible_memories(principal(member(email))).values_list("title", flat=True)) for email, *_ in PEOPLE}
    ada, mo, eve, carl = (seen[email] for email, *_ in PEOPLE)
    assert len(ada) > len(mo) > len(eve) > len(carl) >= 30
    assert carl < eve < mo < ada
    assert "Safety in the test warehouse" in carl  # the handbook is for everyone
    assert "Fleet API rate limits" in eve and "Fleet API rate limits" not in carl  # Employee clearance
    assert "Price list" in mo and "Price list" not in eve  # Manager clearance in sales
    assert "Series B: term sheet accepted" in ada and "Series B: term sheet accepted" not in mo  # leadership
    # The pages say so too: the same memory is there for one and a 404 for another.
    series_b = Memory.objects.get(organization=seeded, title="Series B: term sheet accepted")
    assert signed_in(member("ada@acme.test")).get(f"/memories/{series_b.pk}/").status_code == 200
    for email in ("mo@acme.test", "eve@acme.test", "carl@acme.test"):
        assert signed_in(member(email)).get(f"/memories/{series_b.pk}/").status_code == 404
    home = {email: signed_in(member(email)).get("/").content.decode() for email in ("ada@acme.test", "carl@acme.test")}
    assert "Hello, Ada Okafor" in home["ada@acme.test"] and "Welcome back" not in home["ada@acme.test"]
    assert "Series B" not in home["carl@acme.test"]

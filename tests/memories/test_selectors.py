"""The memory selectors' own rules, each pinned where the mutation run found it unwatched
(`bench/reliability/r70_mutation.py`, target "selectors: memories"): suggestions for the author
filter, a single memory fetched for history or for an update, the supersession chain's order and
bound, the timeline's window, the organization that holds a memory opened in another one, and a
list's default order.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from itertools import pairwise
from typing import Any

import psycopg
import pytest
from django.db import connection, transaction
from django.utils import timezone
from psycopg import errors as pg_errors
from support import imported, principal, remember

from cortex_site.errors import NotFound
from memories.models import Membership, Memory, Organization
from memories.selectors.memories import (
    MemoryFilters,
    author_suggestions,
    memory_for_history,
    memory_list,
    memory_timeline,
    organization_holding,
    supersession_chain,
)
from memories.services import tenancy
from memories.services.memories import memory_supersede

pytestmark = pytest.mark.django_db

MakeOrg = Callable[..., Organization]
MakeMember = Callable[..., Membership]


def _versions(member: Membership, count: int) -> list[Memory]:
    """`count` memories linked as successive versions of one (oldest first), as supersede leaves them."""
    versions = [remember(member, f"Release train {n} leaves on Thursday at {n % 12 + 1} o'clock.") for n in range(count)]
    for older, newer in pairwise(versions):
        Memory.objects.filter(pk=older.pk).update(superseded_by=newer, status=Memory.Status.SUPERSEDED)
        Memory.objects.filter(pk=newer.pk).update(supersedes=older)
    return [Memory.objects.get(pk=version.pk) for version in versions]


# -- the author filter's suggestions ----------------------------------------------------------------


def test_author_suggestions_match_a_members_name_or_email(make_org: MakeOrg, make_member: MakeMember) -> None:
    org = make_org()
    ada = tenancy.member_add(organization=org, email="countess@analytical.test", clearance="Employee", name="Ada Lovelace")
    tenancy.member_add(organization=org, email="hopper@navy.test", clearance="Employee", name="Grace Brewster")
    assert author_suggestions(principal(ada), "lovelace") == ["Ada Lovelace"]
    assert author_suggestions(principal(ada), "HOPPER") == ["Grace Brewster"]  # her e-mail, not her name
    assert author_suggestions(principal(ada), "nobody-by-that-name") == []


def test_author_suggestions_read_the_first_hundred_characters_of_a_prefix(make_org: MakeOrg) -> None:
    org = make_org()
    prefix = "Quartermaster " + "x" * 86 + "YZ" + "-and-the-rest"  # 100 characters before "YZ"
    exact = tenancy.member_add(organization=org, email="exact@long.test", clearance="Employee", name=prefix[:100])
    tenancy.member_add(organization=org, email="short@long.test", clearance="Employee", name=prefix[:99] + "!")
    # The first 100 characters are the whole of one name and not part of the other.
    assert author_suggestions(principal(exact), prefix) == [prefix[:100]]


def test_author_suggestions_stop_at_the_limit_of_twenty_unless_told(make_org: MakeOrg) -> None:
    org = make_org()
    members = [
        tenancy.member_add(organization=org, email=f"crew{n:02d}@ship.test", clearance="Employee", name=f"Crew {n:02d}")
        for n in range(23)
    ]
    assert author_suggestions(principal(members[0])) == [f"Crew {n:02d}" for n in range(20)]
    assert author_suggestions(principal(members[0]), limit=3) == ["Crew 00", "Crew 01", "Crew 02"]


def test_author_suggestions_add_the_named_authors_of_readable_memories_while_under_the_limit(
    make_org: MakeOrg, make_member: MakeMember
) -> None:
    org = make_org()
    first = tenancy.member_add(organization=org, email="first@crew.test", clearance="Employee", name="Alma First")
    tenancy.member_add(organization=org, email="second@crew.test", clearance="Employee", name="Bert Second")
    imported(first, "Imported: the harbour closes at dusk.", author_name="Zelda Imported")
    assert author_suggestions(principal(first), limit=3) == ["Alma First", "Bert Second", "Zelda Imported"]
    # At the limit the members fill it.
    assert author_suggestions(principal(first), limit=2) == ["Alma First", "Bert Second"]
    assert author_suggestions(principal(first), "zelda") == ["Zelda Imported"]
    # A prefix narrows the named authors too: one named elsewhere is not offered for "bert".
    assert author_suggestions(principal(first), "bert") == ["Bert Second"]


def test_named_authors_fill_the_limit_when_no_member_matches(make_org: MakeOrg) -> None:
    org = make_org()
    member = tenancy.member_add(organization=org, email="archivist@crew.test", clearance="Employee", name="Alma Archivist")
    for i in range(21):
        imported(member, f"Imported note {i}: the harbour log, page {i}.", author_name=f"Zelda Writer {i:02d}")
    suggestions = author_suggestions(principal(member), "zelda")
    assert suggestions == [f"Zelda Writer {i:02d}" for i in range(20)]


# -- one memory, for history or for an update -----------------------------------------------------


def test_a_proposal_is_opened_by_its_proposer_and_never_listed(make_org: MakeOrg, make_member: MakeMember) -> None:
    org = make_org()
    proposer, other = make_member(org, "Employee"), make_member(org, "Employee")
    proposal = remember(proposer, "Proposed: move the stand-up to 09:30.")
    Memory.objects.filter(pk=proposal.pk).update(status=Memory.Status.PROPOSED)
    assert memory_for_history(principal(proposer), proposal.pk).pk == proposal.pk
    with pytest.raises(NotFound):
        memory_for_history(principal(other), proposal.pk)
    assert not memory_list(principal(proposer), MemoryFilters(status="all")).filter(pk=proposal.pk).exists()


@pytest.mark.django_db(transaction=True)
def test_only_a_fetch_for_update_locks_the_memorys_row(make_org: MakeOrg, make_member: MakeMember) -> None:
    org = make_org()
    member = make_member(org, "Employee")
    memory = remember(member, "The vault is checked every Monday.")
    # A plain read needs no transaction (a locking read outside one is refused by Django).
    assert memory_for_history(principal(member), memory.pk).pk == memory.pk
    settings = connection.settings_dict
    other = psycopg.connect(
        dbname=settings["NAME"],
        user=settings["USER"],
        password=settings["PASSWORD"],
        host=settings["HOST"],
        port=settings["PORT"] or None,
        autocommit=True,
    )
    try:
        with transaction.atomic():
            memory_for_history(principal(member), memory.pk)
            other.execute("SELECT id FROM memories_memory WHERE id = %s FOR UPDATE NOWAIT", [memory.pk])  # not locked
        with transaction.atomic():
            memory_for_history(principal(member), memory.pk, for_update=True)
            with pytest.raises(pg_errors.LockNotAvailable):
                other.execute("SELECT id FROM memories_memory WHERE id = %s FOR UPDATE NOWAIT", [memory.pk])
    finally:
        other.close()


# -- the supersession chain -------------------------------------------------------------------------


def test_the_chain_runs_oldest_first_from_any_version(make_org: MakeOrg, make_member: MakeMember) -> None:
    member = make_member(make_org(), "Employee")
    versions = _versions(member, 5)
    expected = [version.pk for version in versions]
    for version in versions:
        assert [m.pk for m in supersession_chain(principal(member), version)] == expected


def test_the_chain_stops_at_its_limit_in_either_direction(make_org: MakeOrg, make_member: MakeMember) -> None:
    member = make_member(make_org(), "Employee")
    versions = _versions(member, 5)
    pks = [version.pk for version in versions]
    assert [m.pk for m in supersession_chain(principal(member), versions[2], limit=3)] == pks[:3]  # back first
    assert [m.pk for m in supersession_chain(principal(member), versions[0], limit=3)] == pks[:3]  # forward
    assert [m.pk for m in supersession_chain(principal(member), versions[4], limit=2)] == pks[3:]


def test_the_chain_holds_fifty_versions_unless_told(make_org: MakeOrg, make_member: MakeMember) -> None:
    member = make_member(make_org(), "Employee")
    versions = _versions(member, 52)
    chain = supersession_chain(principal(member), versions[-1])
    assert [m.pk for m in chain] == [version.pk for version in versions[2:]]


# -- the timeline, another organization, a list's order ---------------------------------------------


def test_the_timeline_keeps_to_its_window(make_org: MakeOrg, make_member: MakeMember) -> None:
    member = make_member(make_org(), "Employee")
    now = timezone.now()
    old = remember(member, "The pier opened in spring.", valid_from=now - timedelta(days=30))
    mid = remember(member, "The pier got new lights.", valid_from=now - timedelta(days=10))
    new = remember(member, "The pier closes for repairs.", valid_from=now - timedelta(days=1))
    window = memory_timeline(principal(member), since=now - timedelta(days=20), until=now - timedelta(days=5))
    assert [m.pk for m in window] == [mid.pk]
    assert [m.pk for m in memory_timeline(principal(member), until=now - timedelta(days=5))] == [old.pk, mid.pk]
    assert [m.pk for m in memory_timeline(principal(member))] == [old.pk, mid.pk, new.pk]


def test_a_memory_opened_in_the_wrong_organization_names_the_one_that_holds_it(
    make_org: MakeOrg, make_member: MakeMember
) -> None:
    home, blocked, holder = make_org(name="Alpha Home"), make_org(name="Bravo Blocked"), make_org(name="Charlie Holder")
    person = make_member(home, "Employee", email="traveller@orgs.test")
    make_member(blocked, "Contractor", email="traveller@orgs.test", password=None)
    author = make_member(holder, "Executive")
    make_member(holder, "Employee", email="traveller@orgs.test", password=None)
    memory = remember(author, "Charlie's loading dock opens at six.")
    secret = remember(author, "Charlie's board meets in March.", clearance_min="Executive")
    # Bravo (first by name) cannot open it, Charlie can.
    assert organization_holding(principal(person), memory.pk) == holder
    assert organization_holding(principal(person), secret.pk) is None


def test_a_list_is_newest_first_unless_asked(make_org: MakeOrg, make_member: MakeMember) -> None:
    member = make_member(make_org(), "Employee")
    first = remember(member, "First: the ferry runs hourly.")
    second = remember(member, "Second: the ferry runs half-hourly in summer.")
    assert [m.pk for m in memory_list(principal(member), MemoryFilters())] == [second.pk, first.pk]
    assert [m.pk for m in memory_list(principal(member), MemoryFilters(oldest_first=True))] == [first.pk, second.pk]


def test_what_no_one_may_read_is_never_suggested_or_chained(make_org: MakeOrg, make_member: MakeMember) -> None:
    org, outsider_org = make_org(), make_org()
    member = make_member(org, "Employee")
    outsider = make_member(outsider_org, "Executive")
    imported(member, "Imported: the lighthouse keeper's log.", author_name="Keeper Quill")
    versions = _versions(member, 2)
    assert "Keeper Quill" not in author_suggestions(principal(outsider), "keeper")
    with pytest.raises(NotFound):
        memory_for_history(principal(outsider), versions[0].pk)
    assert organization_holding(principal(outsider), versions[0].pk) is None


def test_list_filters_are_values_nothing_changes_after_they_are_read() -> None:
    # Parsed once from a request and handed down: a view, a selector or the export may share one safely.
    import dataclasses

    filters = MemoryFilters(scope="engineering", tag="ops")
    with pytest.raises(dataclasses.FrozenInstanceError):
        filters.scope = "leadership"  # type: ignore[misc]
    assert (
        filters == MemoryFilters(scope="engineering", tag="ops")
        and len({filters, MemoryFilters(scope="engineering", tag="ops")}) == 1
    )


def test_a_version_the_reader_may_not_see_ends_the_chain_going_back(acme: dict[str, Any]) -> None:
    manager = principal(acme["manager"])
    first = remember(acme["manager"], "Quota is 40 units.", scope="engineering", clearance_min="Manager")
    second = memory_supersede(
        principal=manager, memory_id=first.pk, changes={"content": "Quota is 45 units.", "clearance_min": "Employee"}
    ).memory
    assert [m.pk for m in supersession_chain(principal(acme["employee"]), second)] == [second.pk]
    assert [m.pk for m in supersession_chain(manager, second)] == [first.pk, second.pk]

"""`cortex export --status all` → `cortex import` carries supersession chains (issue 18, backup and restore)."""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from django.core.management import CommandError, call_command

from audit.models import AuditEvent
from audit.services import Actor
from memories.access import Principal
from memories.models import Membership, Memory, Organization
from memories.services.import_export import memory_export
from memories.services.memories import (
    MemoryDraft,
    memory_create,
    memory_redact,
    memory_supersede,
    memory_supersede_with_existing,
)

pytestmark = pytest.mark.django_db


def run(*args: str) -> str:
    out, err = io.StringIO(), io.StringIO()
    call_command("cortex", *args, stdout=out, stderr=err)
    return out.getvalue()


def principal(membership: Membership) -> Principal:
    return Principal(Membership.objects.select_related("organization", "user").get(pk=membership.pk))


def export_all(org: Organization, target: Path) -> list[dict[str, Any]]:
    run("export", "--org", org.slug, "--status", "all", "--output", str(target), "--no-progress")
    return [json.loads(line) for line in target.read_text(encoding="utf-8").splitlines()]


def import_(path: Path, org: Organization, member: Membership) -> str:
    return run("import", str(path), "--org", org.slug, "--user", member.user.email, "--no-progress")


def chains(org: Organization) -> set[tuple[str, str, str | None, str | None]]:
    """Every memory as (content, status, content it supersedes, content it is superseded by): ids differ between databases."""
    rows = Memory.objects.filter(organization=org).select_related("supersedes", "superseded_by")
    return {
        (
            m.content,
            m.status,
            m.supersedes.content if m.supersedes else None,
            m.superseded_by.content if m.superseded_by else None,
        )
        for m in rows
    }


@pytest.fixture
def org(make_org: Callable[..., Organization], make_scope: Callable[..., Any]) -> Organization:
    organization = make_org()
    make_scope(organization, "engineering")
    make_scope(organization, "leadership")
    return organization


@pytest.fixture
def writer(org: Organization, make_member: Callable[..., Membership]) -> Membership:
    return make_member(org, "Executive", admin=True, grants={"engineering": True, "leadership": True})


@pytest.fixture
def fresh(make_org: Callable[..., Organization], make_scope: Callable[..., Any]) -> Organization:
    organization = make_org()
    make_scope(organization, "engineering")
    make_scope(organization, "leadership")
    return organization


@pytest.fixture
def importer(fresh: Organization, make_member: Callable[..., Membership]) -> Membership:
    return make_member(fresh, "Executive", admin=True, grants={"engineering": True, "leadership": True})


def history(writer: Membership) -> None:
    """A chain of three versions, one of two, a conflict decision, a redacted version and a plain memory."""
    me = principal(writer)

    def write(content: str, **fields: Any) -> Memory:
        return memory_create(principal=me, draft=MemoryDraft(content=content, scope="engineering", **fields)).memory

    v1 = write("Deploys on Tuesdays.", tags=["deploys"], clearance_min="Manager")
    v2 = memory_supersede(principal=me, memory_id=v1.pk, changes={"content": "Deploys on Thursdays."}).memory
    memory_supersede(principal=me, memory_id=v2.pk, changes={"content": "Deploys on Fridays, never."})
    budget = memory_create(
        principal=me, draft=MemoryDraft(content="Budget is 1 M.", scope="leadership", clearance_min="Executive")
    ).memory
    memory_supersede(principal=me, memory_id=budget.pk, changes={"content": "Budget is 2 M."})
    # A conflict decision: the older memory stays, the newer one is retired in its favour (winner
    # older than loser, so the winner's `supersedes` points forward in time).
    keep = write("The API rate limit is 20 per second.")
    lose = write("The API rate limit is 50 per second.")
    memory_supersede_with_existing(loser_id=lose.pk, winner_id=keep.pk, actor=Actor.cli(), reason="decided")
    gone = write("A draft that was redacted.")
    memory_supersede(principal=me, memory_id=gone.pk, changes={"content": "The draft's replacement."})
    memory_redact(principal=me, memory_id=gone.pk, reason="pasted a secret")
    write("A plain note.")


def test_a_history_export_imports_with_every_supersession_link(
    org: Organization, writer: Membership, fresh: Organization, importer: Membership, tmp_path: Path
) -> None:
    history(writer)
    lines = export_all(org, tmp_path / "all.jsonl")

    out = import_(tmp_path / "all.jsonl", fresh, importer)

    assert len(lines) == 10
    assert "9 created, 0 deduplicated, 0 failed, 1 skipped" in out
    expected = {row for row in chains(org) if row[1] != "redacted"}
    # The redacted version is not in the import, so its replacement supersedes nothing there.
    expected = {(c, s, None if old == "[This memory was redacted.]" else old, new) for c, s, old, new in expected}
    assert chains(fresh) == expected
    assert ("Deploys on Thursdays.", "superseded", "Deploys on Tuesdays.", "Deploys on Fridays, never.") in chains(fresh)
    assert (
        "The API rate limit is 50 per second.",
        "superseded",
        None,
        "The API rate limit is 20 per second.",
    ) in chains(fresh)
    # Scope, clearance and tags of every version come along; a superseded version is out of search.
    old = Memory.objects.get(organization=fresh, content="Deploys on Tuesdays.")
    source = Memory.objects.get(organization=org, content="Deploys on Tuesdays.")
    assert (old.scope.slug, old.clearance_rank, old.tags) == ("engineering", source.clearance_rank, ["deploys"])
    assert set(old.chunks.values_list("status", flat=True)) == {"superseded"}
    assert AuditEvent.objects.filter(organization=fresh, action="memory.supersede").count() == 4


def test_re_importing_a_history_export_changes_nothing(
    org: Organization, writer: Membership, fresh: Organization, importer: Membership, tmp_path: Path
) -> None:
    history(writer)
    export_all(org, tmp_path / "all.jsonl")
    import_(tmp_path / "all.jsonl", fresh, importer)
    before = chains(fresh), AuditEvent.objects.filter(organization=fresh).exclude(action="memory.export").count()

    again = import_(tmp_path / "all.jsonl", fresh, importer)

    assert "0 created, 9 deduplicated, 0 failed, 1 skipped" in again
    assert (chains(fresh), AuditEvent.objects.filter(organization=fresh).exclude(action="memory.export").count()) == before


def test_an_active_only_import_is_completed_by_a_later_history_import(
    org: Organization, writer: Membership, fresh: Organization, importer: Membership, tmp_path: Path
) -> None:
    history(writer)
    run("export", "--org", org.slug, "--output", str(tmp_path / "active.jsonl"), "--no-progress")
    export_all(org, tmp_path / "all.jsonl")
    import_(tmp_path / "active.jsonl", fresh, importer)

    import_(tmp_path / "all.jsonl", fresh, importer)

    # The current version imported first is reused, and its older versions are linked to it.
    assert Memory.objects.filter(organization=fresh, content="Deploys on Fridays, never.").count() == 1
    assert ("Deploys on Thursdays.", "superseded", "Deploys on Tuesdays.", "Deploys on Fridays, never.") in chains(fresh)
    assert (
        Memory.objects.filter(organization=fresh, status="active").count()
        == Memory.objects.filter(organization=org, status="active").count()
    )


def test_a_chain_the_importer_may_not_write_is_left_out_whole_and_the_rest_is_imported(
    org: Organization,
    writer: Membership,
    fresh: Organization,
    make_member: Callable[..., Membership],
    tmp_path: Path,
) -> None:
    history(writer)
    export_all(org, tmp_path / "all.jsonl")
    # A Manager who writes engineering but not leadership: the budget chain (Executive, leadership) fails.
    manager = make_member(fresh, "Manager", grants={"engineering": True, "leadership": False})

    with pytest.raises(CommandError):
        import_(tmp_path / "all.jsonl", fresh, manager)

    contents = set(Memory.objects.filter(organization=fresh).values_list("content", flat=True))
    assert not contents & {"Budget is 1 M.", "Budget is 2 M."}
    assert {"Deploys on Tuesdays.", "Deploys on Thursdays.", "Deploys on Fridays, never.", "A plain note."} <= contents


def test_a_superseded_line_whose_newer_version_is_not_in_the_file_stays_superseded(
    fresh: Organization, importer: Membership, tmp_path: Path
) -> None:
    dump = tmp_path / "part.jsonl"
    dump.write_text(
        json.dumps({"id": "old-1", "content": "Old version.", "status": "superseded", "superseded_by": "elsewhere"}) + "\n"
    )

    out = import_(dump, fresh, importer)

    assert "1 created" in out
    memory = Memory.objects.get(organization=fresh)
    assert (memory.status, memory.superseded_by_id) == ("superseded", None)
    assert set(memory.chunks.values_list("status", flat=True)) == {"superseded"}


def test_a_members_history_export_links_only_to_versions_they_may_read(
    org: Organization, writer: Membership, make_member: Callable[..., Membership]
) -> None:
    me = principal(writer)
    secret = memory_create(
        principal=me, draft=MemoryDraft(content="Launch in March.", scope="engineering", clearance_min="Executive")
    ).memory
    shared = memory_supersede(
        principal=me, memory_id=secret.pk, changes={"content": "Launch in spring.", "clearance_min": "Employee"}
    ).memory
    employee = make_member(org, "Employee", grants={"engineering": False})

    lines = list(memory_export(principal=principal(employee), status="all").lines)
    everything = list(memory_export(principal=principal(writer), status="all").lines)

    assert [(line["content"], line["supersedes"]) for line in lines] == [("Launch in spring.", None)]
    assert str(secret.pk) not in json.dumps(lines)
    assert [line["supersedes"] for line in everything if line["id"] == str(shared.pk)] == [str(secret.pk)]


def test_a_version_equal_to_someone_elses_memory_never_retires_it(
    org: Organization,
    writer: Membership,
    fresh: Organization,
    importer: Membership,
    make_member: Callable[..., Membership],
    tmp_path: Path,
) -> None:
    history(writer)
    export_all(org, tmp_path / "all.jsonl")
    colleague = make_member(fresh, "Manager", grants={"engineering": True})
    theirs = memory_create(
        principal=principal(colleague), draft=MemoryDraft(content="Deploys on Tuesdays.", scope="engineering")
    ).memory

    out = import_(tmp_path / "all.jsonl", fresh, importer)

    assert "8 created, 1 deduplicated, 0 failed" in out
    theirs.refresh_from_db()
    assert (theirs.status, theirs.superseded_by_id, theirs.supersedes_id) == ("active", None, None)
    # The rest of that chain is still linked among the versions the import wrote.
    assert ("Deploys on Thursdays.", "superseded", None, "Deploys on Fridays, never.") in chains(fresh)

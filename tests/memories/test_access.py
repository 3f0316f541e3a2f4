"""Who may read and write which scope: every combination of visibility × grant × token narrowing
× read-only × organization, checked against the written rule — through the Principal and through
the API (GET /api/scopes), which must agree."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from memories.access import Principal
from memories.models import ApiToken, Membership, Scope
from memories.services import tenancy

GRANTS = ["none", "read", "write"]
VISIBILITY = [Scope.Visibility.ALL_MEMBERS, Scope.Visibility.GRANTED]
TOKEN = ["session", "token", "token-narrowed-to-it", "token-narrowed-elsewhere", "token-read-only"]


def expected(visibility: str, members_can_write: bool, grant: str, token: str) -> tuple[bool, bool]:
    """The read and write rules of DESIGN.md §3, written out independently of the code."""
    membership_reads = visibility == Scope.Visibility.ALL_MEMBERS or grant != "none"
    membership_writes = membership_reads and (
        grant == "write" or (visibility == Scope.Visibility.ALL_MEMBERS and members_can_write)
    )
    token_allows = token != "token-narrowed-elsewhere"
    read = membership_reads and token_allows
    write = membership_writes and token_allows and token != "token-read-only"
    return read, write


CASES = [
    (visibility, members_can_write, grant, token)
    for visibility, members_can_write, grant, token in itertools.product(VISIBILITY, [True, False], GRANTS, TOKEN)
    if not (visibility == Scope.Visibility.GRANTED and not members_can_write)  # the flag only matters for all_members
]


@pytest.mark.django_db
@pytest.mark.parametrize(("visibility", "members_can_write", "grant", "token"), CASES)
def test_scope_access_matrix(
    visibility: str, members_can_write: bool, grant: str, token: str, make_org: Any, make_member: Any, make_scope: Any, api: Any
) -> None:
    org = make_org()
    target = make_scope(org, "target", visibility=visibility, members_can_write=members_can_write)
    make_scope(org, "elsewhere", visibility=Scope.Visibility.ALL_MEMBERS)
    member = make_member(org, "Employee")
    if grant != "none":
        tenancy.grant_set(membership=member, scope=target, can_write=grant == "write")

    token_options: dict[str, Any] = {}
    if token == "token-narrowed-to-it":
        token_options["scope_slugs"] = ["target"] if expected(visibility, members_can_write, grant, "session")[0] else []
    elif token == "token-narrowed-elsewhere":
        token_options["scope_slugs"] = ["elsewhere"]
    elif token == "token-read-only":
        token_options["read_only"] = True

    if token == "session":
        principal = Principal(member)
    else:
        client = api(member, **token_options)
        principal = Principal(member, ApiToken.objects.get(prefix=client.secret.split("_")[1]))

    want_read, want_write = expected(visibility, members_can_write, grant, token)
    assert principal.can_read_scope(target) is want_read
    assert principal.can_write_scope(target) is want_write

    if token != "session":
        listed = {row["slug"]: row["can_write"] for row in client.get("/api/scopes").json()["results"]}
        assert ("target" in listed) is want_read
        if want_read:
            assert listed["target"] is want_write


@pytest.mark.django_db
def test_scopes_of_another_organization_are_never_readable_or_writable(
    make_org: Any, make_member: Any, make_scope: Any, api: Any
) -> None:
    home, other = make_org(), make_org()
    foreign = make_scope(other, "secrets", visibility=Scope.Visibility.ALL_MEMBERS)
    # Even a member of both organizations, acting in `home`, cannot reach `other`'s scopes.
    member = make_member(home, "Executive", admin=True)
    make_member(other, "Executive", email=member.user.email, password=None, admin=True, grants={"secrets": True})
    principal = Principal(member)
    assert not principal.can_read_scope(foreign)
    assert not principal.can_write_scope(foreign)
    assert not principal.can_read_scope(Scope.objects.get(organization=other, slug="public-docs"))
    listed = [row["slug"] for row in api(member).get("/api/scopes").json()["results"]]
    assert listed == ["public-docs"]


@pytest.mark.django_db
def test_outsider_sees_only_their_own_organization(make_org: Any, make_member: Any, make_scope: Any, api: Any) -> None:
    acme, globex = make_org(), make_org()
    make_scope(acme, "engineering", visibility=Scope.Visibility.ALL_MEMBERS)
    outsider = make_member(globex, "Executive")
    body = api(outsider).get("/api/scopes").json()
    assert [row["slug"] for row in body["results"]] == ["public-docs"]
    me = api(outsider).get("/api/me").json()
    assert me["organization"]["slug"] == globex.slug


@pytest.mark.django_db
def test_token_can_only_narrow_to_scopes_its_member_reads(make_org: Any, make_member: Any, make_scope: Any) -> None:
    org = make_org()
    make_scope(org, "hidden")
    member = make_member(org, "Executive")
    from cortex_site.errors import NotFound

    with pytest.raises(NotFound) as error:
        tenancy.token_create(membership=member, name="t", scope_slugs=["hidden"])
    # Same answer as for a scope that does not exist: no existence leak.
    assert error.value.error_code == "UNKNOWN_SCOPE"
    with pytest.raises(NotFound) as missing:
        tenancy.token_create(membership=member, name="t", scope_slugs=["nonexistent"])
    assert missing.value.error_code == "UNKNOWN_SCOPE"
    assert missing.value.message.replace("nonexistent", "X") == error.value.message.replace("hidden", "X")


@pytest.mark.django_db
def test_clearance_comes_from_the_membership_of_the_current_organization(make_org: Any, make_member: Any) -> None:
    acme, globex = make_org(), make_org()
    in_acme = make_member(acme, "Contractor", email="dual@example.test")
    in_globex = make_member(globex, "Executive", email="dual@example.test", password=None)
    assert Principal(in_acme).clearance == "Contractor"
    assert Principal(in_globex).clearance == "Executive"
    assert Principal(in_acme).clearance_rank < Principal(in_globex).clearance_rank


@pytest.mark.django_db
def test_admin_role_does_not_grant_reading(make_org: Any, make_member: Any, make_scope: Any) -> None:
    org = make_org()
    board = make_scope(org, "board")
    admin = make_member(org, "Executive", admin=True)
    assert not Principal(admin).can_read_scope(board)
    tenancy.grant_set(membership=admin, scope=board, can_write=False, by=Principal(admin))
    fresh = Membership.objects.get(pk=admin.pk)
    assert Principal(fresh).can_read_scope(board)
    from audit.models import AuditEvent

    event = AuditEvent.objects.filter(organization=org, action="grant.set").latest("id")
    assert event.details["self_grant"] is True


@pytest.mark.django_db
def test_a_version_no_longer_active_is_readable_as_history_only(make_org: Any, make_member: Any, make_scope: Any) -> None:
    # Lists, recall and entity pages ask without `history`; a memory's own page and its version chain ask with it.
    from memories.services.memories import MemoryDraft, memory_create, memory_redact, memory_supersede

    org = make_org()
    make_scope(org, "engineering")
    member = make_member(org, "Employee", admin=True, grants={"engineering": True})
    principal = Principal(Membership.objects.select_related("organization", "user").get(pk=member.pk))
    old = memory_create(principal=principal, draft=MemoryDraft(content="Deploys on Tuesdays.", scope="engineering")).memory
    new = memory_supersede(principal=principal, memory_id=old.pk, changes={"content": "Deploys on Thursdays."}).memory
    gone = memory_create(principal=principal, draft=MemoryDraft(content="A pasted secret.", scope="engineering")).memory
    memory_redact(principal=principal, memory_id=gone.pk, reason="secret")
    old.refresh_from_db()
    gone.refresh_from_db()

    assert (old.status, gone.status) == ("superseded", "redacted")
    assert principal.can_read_memory(new) and principal.can_read_memory(new, history=True)
    for memory in (old, gone):
        assert not principal.can_read_memory(memory)
        assert principal.can_read_memory(memory, history=True)

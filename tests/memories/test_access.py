"""Who may read and write which scope: every combination of visibility × grant × token narrowing
× read-only × organization, checked against the written rule — through the Principal and through
the API (GET /api/scopes), which must agree."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from memories.access import Principal
from memories.models import ApiToken, Membership, Memory, Scope
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
    # The rule the owner's audit log records for a hidden scope: the token's narrowing only where the membership reads it.
    membership_reads = expected(visibility, members_can_write, grant, "session")[0]
    assert principal.scope_denial_rule(target.pk) == (None if want_read else "token_narrowing" if membership_reads else "scope")

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
    assert principal.scope_denial_rule(foreign.pk) == "scope"
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


@pytest.mark.django_db
def test_the_denial_rule_of_a_memory_is_the_first_rule_that_hides_it(
    acme: dict[str, Any], outsider: Membership, make_member: Any
) -> None:
    # What the owner's audit log records for a hidden memory (its 404 says nothing): each rule in the order
    # can_read_memory checks them, and none for what the reader may open, history included.
    from support import principal, remember

    from memories.services.memories import memory_supersede

    manager_note = remember(acme["manager"], "Quarterly quota is 40 units.", scope="engineering", clearance_min="Manager")
    sales_note = remember(acme["manager"], "Discount ceiling is 12%.", scope="sales", clearance_min="Employee")
    shared = remember(acme["manager"], "Standups are at 9:30.", scope="engineering", clearance_min="Contractor")
    foreign = remember(outsider, "Globex plans.", scope="public-docs")
    # A Contractor with write access proposes a revision of the Manager's memory: it is read by its proposer and
    # by those who may accept it, not by an Employee of the scope.
    lower = acme["contractor"]
    from memories.services import tenancy

    tenancy.grant_set(membership=lower, scope=shared.scope, can_write=True)
    proposal = memory_supersede(principal=principal(lower), memory_id=shared.pk, changes={"content": "Standups are at 10."})
    assert proposal.memory.status == "proposed"
    older = remember(acme["employee"], "Deploys on Tuesdays.", scope="engineering")
    memory_supersede(principal=principal(acme["employee"]), memory_id=older.pk, changes={"content": "Deploys on Fridays."})
    older.refresh_from_db()

    employee = principal(acme["employee"])
    assert employee.memory_denial_rule(foreign) == "organization"
    assert employee.memory_denial_rule(sales_note) == "scope"
    assert employee.memory_denial_rule(manager_note) == "clearance"
    assert employee.memory_denial_rule(proposal.memory) == "proposal"
    assert employee.memory_denial_rule(shared) is None
    assert older.status == "superseded" and employee.memory_denial_rule(older) is None
    # The read rule itself agrees, each rule on its own (the querysets filter first, so only this asks it alone).
    for hidden in (foreign, sales_note, manager_note, proposal.memory):
        assert not employee.can_read_memory(hidden) and not employee.can_read_memory(hidden, history=True)
    # Nor does a member who joined after the proposer (a larger user id) and reads the scope.
    latecomer = make_member(acme["org"], "Employee", grants={"engineering": True})
    assert principal(latecomer).memory_denial_rule(proposal.memory) == "proposal"
    # The proposer and the author's rung read the proposal; the outsider's rule is the organization whatever else.
    assert principal(lower).memory_denial_rule(proposal.memory) is None
    assert principal(acme["manager"]).memory_denial_rule(proposal.memory) is None
    assert principal(outsider).memory_denial_rule(proposal.memory) == "organization"


@pytest.mark.django_db
def test_a_principal_says_who_acts_and_how(acme: dict[str, Any]) -> None:
    # What logs and shells show for a principal: the member, the token it came with, or the connector it acts as.
    from connectors.models import Connector

    member = acme["employee"]
    assert repr(Principal(member)) == f"<Principal {member.user.email} @ acme>"
    connector = Connector(organization=acme["org"], kind="github", name="Platform repos", installed_by=member)
    assert (
        repr(Principal.as_connector(connector)) == f"<Principal {member.user.email} @ acme as github connector 'Platform repos'>"
    )


@pytest.mark.django_db
def test_the_organization_is_checked_on_its_own_not_only_through_the_scope(
    make_org: Any, make_member: Any, make_scope: Any
) -> None:
    # A scope belongs to one organization, so a stored memory can never pair a foreign organization with a scope
    # this principal reads; the tenancy test must hold without that, whichever organization's id is the larger.
    from memories.models import Memory

    before, home, after = make_org(), make_org(), make_org()
    make_scope(home, "engineering", visibility=Scope.Visibility.ALL_MEMBERS)
    reader = Principal(make_member(home, "Executive"))
    scope = Scope.objects.get(organization=home, slug="engineering")
    for foreign in (before, after):
        memory = Memory(organization_id=foreign.pk, scope_id=scope.pk, clearance_rank=0, status="active")
        assert not reader.can_read_memory(memory) and not reader.can_read_memory(memory, history=True)
        assert reader.memory_denial_rule(memory) == "organization"
        # The same for a scope: one with the id of a scope it reads, claimed by another organization.
        claimed = Scope(pk=scope.pk, organization_id=foreign.pk, visibility=Scope.Visibility.ALL_MEMBERS)
        assert not reader.can_read_scope(claimed) and not reader.can_write_scope(claimed)
    assert reader.can_read_memory(Memory(organization_id=home.pk, scope_id=scope.pk, clearance_rank=0, status="active"))
    assert reader.can_read_scope(scope) and reader.can_write_scope(scope)


@pytest.mark.django_db
def test_lists_read_a_memory_only_within_its_validity_window(make_org: Any, make_member: Any, make_scope: Any) -> None:
    from datetime import timedelta

    from django.utils import timezone

    from memories.models import Memory

    org = make_org()
    scope = make_scope(org, "engineering", visibility=Scope.Visibility.ALL_MEMBERS)
    reader = Principal(make_member(org, "Employee"))
    now = timezone.now()

    def memory(valid_from: Any, valid_until: Any) -> Memory:
        return Memory(
            organization_id=org.pk,
            scope_id=scope.pk,
            clearance_rank=0,
            status="active",
            valid_from=valid_from,
            valid_until=valid_until,
        )

    lapsed, lasting, open_ended = (
        memory(now - timedelta(days=9), now - timedelta(days=1)),
        memory(now, now + timedelta(days=1)),
        memory(now, None),
    )
    assert not reader.can_read_memory(lapsed) and reader.can_read_memory(lapsed, history=True)
    assert reader.can_read_memory(lasting) and reader.can_read_memory(open_ended)
    # As of a moment: valid from it, and not yet lapsed at it.
    assert reader.can_read_memory(lapsed, as_of=now - timedelta(days=2))
    assert not reader.can_read_memory(lasting, as_of=now - timedelta(hours=1))
    assert reader.can_read_memory(lasting, as_of=now)  # valid from that very moment
    assert not reader.can_read_memory(lasting, as_of=lasting.valid_until)  # and no longer at its end
    assert not reader.can_read_memory(lasting, as_of=now + timedelta(days=2))


@pytest.mark.django_db
def test_a_hidden_object_of_another_organization_is_always_denied_by_the_organization(make_org: Any, make_member: Any) -> None:
    from memories.access import DenialRule, hidden
    from memories.models import Memory

    before, home, after = make_org(), make_org(), make_org()
    reader = Principal(make_member(home, "Executive"))
    for foreign in (before, after):
        for rule in (DenialRule.SCOPE, None):
            denial = hidden(reader, "memory", Memory(organization_id=foreign.pk), rule)
            assert denial is not None and (denial.rule, denial.organization_id) == ("organization", foreign.pk)
    own = Memory(organization_id=home.pk)
    assert hidden(reader, "memory", own, None) is None and hidden(reader, "memory", None, DenialRule.SCOPE) is None
    denial = hidden(reader, "memory", own, DenialRule.CLEARANCE)
    assert denial is not None and (denial.rule, denial.target_id, denial.target_type) == ("clearance", str(own.pk), "memory")


@pytest.mark.django_db
def test_a_connector_acts_on_what_connectors_wrote_in_its_own_organization_only(acme: dict[str, Any], make_org: Any) -> None:
    from connectors.models import Connector
    from memories.models import Memory

    before, after = acme["org"].pk - 1, make_org().pk  # an organization id below acme's and one above it
    member = acme["employee"]
    connector = Principal.as_connector(Connector(organization=acme["org"], kind="slack", name="Slack", installed_by=member))
    org = acme["org"].pk
    assert connector.wrote_as_connector(Memory(organization_id=org, source="Slack"))
    assert connector.wrote_as_connector(Memory(organization_id=org, source=" google drive "))
    assert not connector.wrote_as_connector(Memory(organization_id=org, source="Manual"))
    for foreign in (before, after):
        assert not connector.wrote_as_connector(Memory(organization_id=foreign, source="Slack"))
    assert not Principal(member).wrote_as_connector(Memory(organization_id=org, source="Slack"))


@pytest.mark.django_db
def test_authority_over_a_memory_is_at_least_its_authors_rung_and_an_admin_holds_the_top(
    acme: dict[str, Any], make_member: Any
) -> None:
    from support import principal, remember

    org = acme["org"]
    note = remember(acme["employee"], "Standups are at 9:30.", scope="engineering", clearance_min="Contractor")
    peer = make_member(org, "Employee", grants={"engineering": True})
    admin_employee = make_member(org, "Employee", admin=True, grants={"engineering": True})
    ranks = {name: principal(acme[name]).clearance_rank for name in ("contractor", "employee", "manager", "exec")}
    assert principal(acme["manager"]).authority == ranks["manager"]  # not an admin: its own rung
    assert principal(admin_employee).authority == ranks["exec"]  # an admin: the top rung, whatever its own
    # The same rung as the author's is enough, a lower one is not; the author always may.
    assert principal(peer).outranks_author_of(note) and principal(acme["manager"]).outranks_author_of(note)
    assert not principal(acme["contractor"]).outranks_author_of(note)
    assert principal(acme["employee"]).outranks_author_of(note)
    manager_note = remember(acme["manager"], "Budgets close on the 5th.", scope="engineering", clearance_min="Contractor")
    assert not principal(peer).outranks_author_of(manager_note) and principal(admin_employee).outranks_author_of(manager_note)
    assert principal(acme["employee"]).can_propose_revision(manager_note) and not principal(acme["employee"]).can_supersede(
        manager_note
    )


@pytest.mark.django_db
def test_a_reader_may_ask_for_the_redaction_of_an_earlier_version_too(acme: dict[str, Any], api: Any) -> None:
    from support import principal, remember

    from memories.services.memories import memory_supersede

    old = remember(acme["employee"], "The VPN key is k-1234.", scope="engineering", clearance_min="Employee")
    memory_supersede(principal=principal(acme["employee"]), memory_id=old.pk, changes={"content": "The VPN key is in the vault."})
    old.refresh_from_db()
    assert old.status == "superseded"
    reader = principal(acme["manager"])  # reads engineering; neither its author nor an admin
    assert not reader.can_redact(old) and reader.can_request_redaction(old)
    assert principal(acme["employee"]).can_redact(old) and not principal(acme["employee"]).can_request_redaction(old)
    assert not principal(acme["contractor"]).can_request_redaction(old)  # cannot read it (its rung)


@pytest.mark.django_db
def test_a_token_acts_only_for_its_own_membership(acme: dict[str, Any]) -> None:
    member = acme["manager"]
    Principal(member, ApiToken(membership_id=member.pk))  # its own
    for other in (acme["exec"], acme["contractor"]):  # created before and after it: smaller and larger ids
        with pytest.raises(ValueError, match="does not belong"):
            Principal(member, ApiToken(membership_id=other.pk))


@pytest.mark.django_db
def test_a_retired_scope_is_read_but_takes_no_new_writes(make_org: Any, make_member: Any, make_scope: Any) -> None:
    from django.utils import timezone

    org = make_org()
    granted = make_scope(org, "archive")
    open_to_all = make_scope(org, "notes", visibility=Scope.Visibility.ALL_MEMBERS, members_can_write=True)
    member = make_member(org, "Employee", grants={"archive": True})
    Scope.objects.filter(pk__in=[granted.pk, open_to_all.pk]).update(retired_at=timezone.now())
    reader = Principal(member)
    for scope in Scope.objects.filter(pk__in=[granted.pk, open_to_all.pk]):
        assert reader.can_read_scope(scope) and not reader.can_write_scope(scope)


@pytest.mark.django_db
def test_a_conflict_of_another_organization_is_never_decided(acme: dict[str, Any], make_org: Any) -> None:
    from support import principal, remember

    from memories.models import Conflict

    before_id, after_id = acme["org"].pk - 1, make_org().pk  # an id below acme's and one above it
    first = remember(acme["employee"], "Standups are at 9:30.", scope="engineering")
    second = remember(acme["employee"], "Standups are at 10:00.", scope="engineering")
    admin = principal(acme["exec"])
    assert admin.can_decide(Conflict(organization_id=acme["org"].pk, new_memory=first, existing_memory=second))
    for foreign in (before_id, after_id):
        assert not admin.can_decide(Conflict(organization_id=foreign, new_memory=first, existing_memory=second))


@pytest.mark.django_db
def test_the_operator_reads_every_scope_and_clearance_and_sets_the_conflict_policy(acme: dict[str, Any], make_scope: Any) -> None:
    # The operator at the console (the `cortex` CLI): what an export reads, and an organization setting it changes.
    from support import remember

    from memories.access import Operator
    from memories.models import Organization
    from memories.selectors.memories import readable_base
    from memories.services import tenancy
    from memories.services.conflicts.policy import conflict_policy_set

    board = make_scope(acme["org"], "board")  # granted to the one who writes there, nobody else
    tenancy.grant_set(membership=acme["exec"], scope=board, can_write=True)
    minutes = remember(acme["exec"], "Board minutes: the Q3 plan.", scope="board", clearance_min="Executive")
    notes = remember(acme["employee"], "Standups are at 9:30.", scope="engineering")
    operator = Operator(acme["org"])
    assert {minutes.pk, notes.pk} <= set(readable_base(operator).values_list("pk", flat=True))
    conflict_policy_set(organization=acme["org"], policy="manual", by=operator)
    assert Organization.objects.get(pk=acme["org"].pk).conflict_policy == "manual"


@pytest.mark.django_db
def test_an_equal_authority_may_supersede_and_an_admin_author_writes_with_the_top_rung(
    acme: dict[str, Any], make_member: Any
) -> None:
    from support import remember

    from memories.access import author_authority, could_supersede

    peer = make_member(acme["org"], "Employee", grants={"engineering": True})
    admin_employee = make_member(acme["org"], "Employee", admin=True, grants={"engineering": True})
    mine = remember(acme["employee"], "Deploys need two approvals.", scope="engineering", clearance_min="Contractor")
    theirs = remember(peer, "Deploys need one approval.", scope="engineering", clearance_min="Contractor")
    managers = remember(acme["manager"], "Deploys need a manager.", scope="engineering", clearance_min="Contractor")
    by_admin = remember(admin_employee, "Deploys need a change ticket.", scope="engineering", clearance_min="Contractor")
    top = Principal(acme["exec"]).clearance_rank
    assert author_authority(by_admin) == top and author_authority(mine) == Principal(acme["employee"]).clearance_rank
    assert could_supersede(theirs, mine) and could_supersede(mine, theirs)  # the same rung
    assert could_supersede(managers, mine) and not could_supersede(mine, managers)
    assert could_supersede(by_admin, managers)

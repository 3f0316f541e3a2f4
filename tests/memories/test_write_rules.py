"""The Principal decides writes: who may supersede, redact, decide conflicts and administer — the
same answers the services enforce and the UI offers; a Principal acting as a connector; the
operator the CLI acts as; the one id parser."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

import pytest
from support import principal, remember

from audit.models import AuditEvent
from cortex_site.errors import PermissionDenied
from memories.access import CliPrincipal, Operator, Principal, parse_id, parse_int_id
from memories.models import Conflict, Membership, Memory
from memories.services.import_export import memory_export
from memories.services.memories import MemoryDraft, memory_create, memory_delete, memory_redact

pytestmark = pytest.mark.django_db


def test_a_writer_of_the_scope_may_supersede_but_only_the_author_or_an_admin_redacts(acme: dict[str, Any]) -> None:
    memory = remember(acme["employee"], "Deploys need two approvals.", scope="engineering")
    writer, reader = principal(acme["manager"]), principal(acme["contractor"])  # contractor: read-only grant
    assert writer.can_supersede(memory) and not writer.can_redact(memory) and writer.can_request_redaction(memory)
    assert not reader.can_supersede(memory) and not reader.can_redact(memory) and reader.can_request_redaction(memory)
    for refused_principal in (writer, reader):
        with pytest.raises(PermissionDenied) as refused:
            memory_redact(principal=refused_principal, memory_id=memory.pk, reason="wrong")
        assert refused.value.error_code == "REDACTION_NOT_ALLOWED"
    assert Memory.objects.get(pk=memory.pk).status == "active"


def test_the_author_may_redact_after_losing_write_access_and_an_admin_always_may(acme: dict[str, Any], make_member: Any) -> None:
    author = make_member(acme["org"], "Employee", grants={"engineering": True})
    memory = remember(author, "A note I wrote.", scope="engineering")
    author.grants.filter(scope__slug="engineering").update(can_write=False)
    assert principal(author).can_redact(memory) and not principal(author).can_supersede(memory)
    assert principal(acme["exec"]).can_redact(memory)


def test_nobody_redacts_through_a_read_only_token_or_what_they_cannot_read(
    acme: dict[str, Any], outsider: Membership, make_token: Any
) -> None:
    memory = remember(acme["exec"], "Board minutes.", scope="sales", clearance_min="Executive")
    make_token(acme["exec"], read_only=True)
    token = acme["exec"].tokens.get()
    assert not Principal(acme["exec"], token).can_redact(memory)
    assert not principal(acme["employee"]).can_redact(memory)  # cannot read it: no sales grant
    assert not principal(outsider).can_redact(memory)  # another organization's admin


def test_require_admin_refuses_members_and_admins_pass(acme: dict[str, Any]) -> None:
    memory = remember(acme["employee"], "Erase me maybe.", scope="engineering")
    with pytest.raises(PermissionDenied) as refused:
        principal(acme["manager"]).require_admin()
    assert refused.value.error_code == "ADMIN_REQUIRED"
    with pytest.raises(PermissionDenied):
        memory_delete(principal=principal(acme["manager"]), memory_id=memory.pk)
    principal(acme["exec"]).require_admin()
    memory_delete(principal=principal(acme["exec"]), memory_id=memory.pk)
    assert not Memory.objects.filter(pk=memory.pk).exists()


def test_deciding_a_conflict_needs_both_memories_authority_over_both_authors_and_a_token_that_may_write(
    acme: dict[str, Any], make_token: Any
) -> None:
    existing = remember(acme["manager"], "Refunds take 14 days.", scope="sales")
    new = remember(acme["employee"], "Refunds take 30 days.", scope="engineering")
    conflict = Conflict.objects.create(
        organization=acme["org"], new_memory=new, existing_memory=existing, kind="contradiction", similarity=0.9
    )
    assert principal(acme["manager"]).can_decide(conflict)
    assert not principal(acme["employee"]).can_decide(conflict)  # cannot read the sales memory
    make_token(acme["manager"], read_only=True)
    assert not Principal(acme["manager"], acme["manager"].tokens.get()).can_decide(conflict)


@dataclass
class InstalledConnector:
    """The fields Principal.as_connector reads (the connectors app supplies the model on its branch)."""

    pk: uuid.UUID
    kind: str
    name: str
    installed_by: Membership


def test_a_connector_acts_with_its_installers_rights_and_is_audited_as_the_connector(acme: dict[str, Any]) -> None:
    installer = Membership.objects.select_related("organization", "user").get(pk=acme["employee"].pk)
    connector = InstalledConnector(pk=uuid.uuid4(), kind="github", name="acme/checkout", installed_by=installer)
    acting = Principal.as_connector(connector)
    assert acting.connector is connector and acting.membership == installer
    assert acting.readable_scope_ids == principal(acme["employee"]).readable_scope_ids
    assert acting.clearance_rank == installer.clearance_rank
    assert acting.actor.kind == AuditEvent.ActorKind.CONNECTOR
    assert acting.actor.label == "github connector 'acme/checkout'"
    assert (acting.actor.user_id, acting.actor.connector_id) == (installer.user_id, str(connector.pk))

    stored = memory_create(
        principal=acting, draft=MemoryDraft(content="PR 12 merged: retries.", scope="engineering", source="GitHub")
    )
    event = AuditEvent.objects.get(action="memory.create", target_id=str(stored.memory.pk))
    assert (event.actor_kind, event.actor_connector_id, event.actor_user_id) == (
        "connector",
        str(connector.pk),
        installer.user_id,
    )
    with pytest.raises(PermissionDenied):  # no more than the installer: members only read the handbook
        memory_create(principal=acting, draft=MemoryDraft(content="Q3 pipeline.", scope="handbook"))


def test_the_operator_exports_everything_and_a_member_exports_only_what_they_read(
    acme: dict[str, Any], outsider: Membership
) -> None:
    remember(acme["exec"], "Leadership only.", scope="sales", clearance_min="Executive")
    remember(acme["employee"], "Engineering note.", scope="engineering")
    remember(outsider, "Globex secret.")
    operator = Operator(acme["org"])
    assert operator.actor.kind == AuditEvent.ActorKind.CLI
    everything = memory_export(principal=operator)
    assert everything.count == 2 and {line["title"] for line in everything.lines} == {"Leadership only.", "Engineering note."}
    mine = memory_export(principal=principal(acme["employee"]))
    assert [line["title"] for line in mine.lines] == ["Engineering note."]
    assert AuditEvent.objects.filter(action="memory.export", organization=acme["org"]).count() == 2


def test_imports_act_as_the_member_through_the_cli(acme: dict[str, Any]) -> None:
    acting = CliPrincipal(acme["contractor"])
    assert acting.actor.kind == AuditEvent.ActorKind.CLI and acting.actor.user_id == acme["contractor"].user_id
    assert acting.writable_scope_ids == principal(acme["contractor"]).writable_scope_ids


@pytest.mark.parametrize("raw", ["", "not-a-uuid", None, 12, "00000000-0000-0000-0000-00000000000g"])
def test_anything_but_a_uuid_parses_to_none(raw: Any) -> None:
    assert parse_id(raw) is None


def test_ids_parse_once_for_every_selector() -> None:
    value = uuid.uuid4()
    assert parse_id(str(value)) == value and parse_id(value) is value
    assert parse_int_id("42") == 42 and parse_int_id("0") is None and parse_int_id("x") is None and parse_int_id(True) is None
    assert parse_int_id("-3") is None and parse_int_id(-3) is None and parse_int_id(7) == 7 and parse_int_id("1") == 1

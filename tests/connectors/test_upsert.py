"""The one path from a source item to a memory (pages and deliveries alike), as the connector:
new → create, changed → supersede, deleted → redact "deleted in <Source>", same → nothing;
the installer's rights bound it, and the memories obey the read rule everywhere."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest
from support import principal, remember

from audit.models import AuditEvent
from connectors.base import SourceItem
from connectors.models import Connector, ConnectorItem
from connectors.registry import source_for
from connectors.services.sync import upsert_items
from memories.models import Membership, Memory, Scope
from memories.services import tenancy
from memories.services.memories import memory_supersede

pytestmark = pytest.mark.django_db


def item(external_id: str = "acme/robots#7", **fields: Any) -> SourceItem:
    values: dict[str, Any] = {
        "title": "Switch the build to uv",
        "content": "The build installs with uv now; pip is gone from CI.",
        "source_url": "https://github.com/acme/robots/pull/7",
        "author_name": "@dana",
        "valid_from": datetime(2026, 11, 2, 10, 0, tzinfo=UTC),
        "category": "pr",
        "tags": ("pull-request",),
    }
    values.update(fields)
    return SourceItem(external_id=external_id, **values)


def apply(connector: Connector, *items: SourceItem) -> Any:
    return upsert_items(connector=connector, source=source_for(connector), items=list(items))


def current(connector: Connector, external_id: str = "acme/robots#7") -> Memory:
    ci = ConnectorItem.objects.get(connector=connector, external_id=external_id)
    assert ci.memory is not None
    return ci.memory


def test_create_then_edit_supersedes_then_delete_redacts(acme: dict[str, Any], make_github: Callable[..., Connector]) -> None:
    connector = make_github(acme["exec"], token=None)
    created = apply(connector, item())
    assert (created.created, created.updated) == (1, 0)
    first = current(connector)
    assert (first.source, first.external_id, first.scope.slug, first.category) == ("GitHub", "acme/robots#7", "engineering", "pr")

    replay = apply(connector, item())
    assert (replay.created, replay.updated, replay.skipped) == (0, 0, 1)

    edited = apply(connector, item(title="Switch the build to uv (and ruff)"))
    assert edited.updated == 1
    second = current(connector)
    first.refresh_from_db()
    assert first.status == Memory.Status.SUPERSEDED and first.superseded_by_id == second.pk
    assert second.title.endswith("(and ruff)") and second.external_id == "acme/robots#7"

    deleted = apply(connector, item(deleted=True))
    assert deleted.redacted == 1
    second.refresh_from_db()
    assert second.status == Memory.Status.REDACTED and second.redaction_reason == "deleted in GitHub"
    event = AuditEvent.objects.get(action="memory.redact", target_id=str(second.pk))
    assert event.actor_kind == AuditEvent.ActorKind.CONNECTOR and event.actor_connector_id == str(connector.pk)
    # Deleted twice (a replayed delivery) does nothing more; an edit of a deleted item does not bring it back.
    assert apply(connector, item(deleted=True)).skipped == 1
    back = apply(connector, item(title="Back again"))
    assert back.created == 0 and Memory.objects.filter(status="active", source="GitHub").count() == 0
    assert "redacted" in back.failures[0]["reason"]


def test_an_edit_at_the_source_supersedes_the_version_a_person_made(
    acme: dict[str, Any], make_github: Callable[..., Connector]
) -> None:
    connector = make_github(acme["exec"], token=None)
    apply(connector, item())
    person_version = memory_supersede(
        principal=principal(acme["exec"]), memory_id=current(connector).pk, changes={"tags": ["pull-request", "build"]}
    ).memory
    apply(connector, item(content="The build installs with uv; pip and pip-tools are gone from CI."))
    latest = Memory.objects.get(source="GitHub", status="active")
    person_version.refresh_from_db()
    assert person_version.status == Memory.Status.SUPERSEDED and person_version.superseded_by_id == latest.pk
    assert current(connector).pk == latest.pk


def test_items_land_in_their_own_scope_and_the_installers_rights_bound_them(
    acme: dict[str, Any], make_github: Callable[..., Connector]
) -> None:
    connector = make_github(acme["exec"], token=None)
    counts = apply(
        connector,
        item("acme/robots#1", scope="sales", content="Pricing page copy for the robot arm."),
        item("acme/robots#2", scope="nowhere", content="A PR about a scope that does not exist."),
        item("acme/robots#3", content="Another PR, in the connector's scope."),
    )
    assert (counts.created, counts.failed) == (2, 1)
    assert Memory.objects.get(external_id="acme/robots#1").scope.slug == "sales"
    [failure] = counts.failures
    assert failure["external_id"] == "acme/robots#2" and "nowhere" in failure["reason"]

    # The installer loses write access to engineering: the connector cannot write there either.
    tenancy.grant_revoke(membership=acme["exec"], scope=Scope.objects.get(organization=acme["org"], slug="engineering"))
    refused = apply(connector, item("acme/robots#4", content="Written after the grant was revoked."))
    assert refused.created == 0 and refused.failed == 1
    assert not Memory.objects.filter(external_id="acme/robots#4").exists()


def test_the_author_is_linked_to_a_member_with_the_same_email(
    acme: dict[str, Any], make_github: Callable[..., Connector]
) -> None:
    connector = make_github(acme["exec"], token=None)
    email = acme["employee"].user.email
    apply(connector, item(author_email=email.upper()))
    memory = current(connector)
    assert memory.author_id == acme["employee"].user_id and memory.author_name == "@dana"


def test_connector_memories_obey_the_read_rule_on_every_surface(
    acme: dict[str, Any],
    make_github: Callable[..., Connector],
    api: Callable[..., Any],
    make_member: Callable[..., Membership],
    outsider: Membership,
) -> None:
    connector = make_github(acme["exec"], token=None, clearance_min="Manager")
    apply(connector, item(content="Robot arm firmware now signs its updates with ed25519."))
    memory = current(connector)
    remember(acme["employee"], "A note the employee wrote about lunch.", scope="engineering")

    manager = api(acme["manager"])  # engineering grant, Manager: may read it
    assert manager.get(f"/api/memories/{memory.pk}").status_code == 200
    assert str(memory.pk) in [m["id"] for m in manager.get("/api/memories", {"source": "GitHub"}).json()["results"]]
    hits = manager.post("/api/recall", {"query": "firmware signs updates ed25519"}).json()["results"]
    assert str(memory.pk) in [h["memory"]["id"] for h in hits]

    no_grant = make_member(acme["org"], "Executive")  # high clearance, no engineering grant
    for reader in (api(acme["employee"]), api(no_grant), api(outsider)):  # below Manager / no grant / other organization
        assert reader.get(f"/api/memories/{memory.pk}").status_code == 404
        assert str(memory.pk) not in [m["id"] for m in reader.get("/api/memories", {"source": "GitHub"}).json()["results"]]
        hits = reader.post("/api/recall", {"query": "firmware signs updates ed25519"}).json()["results"]
        assert str(memory.pk) not in [h["memory"]["id"] for h in hits]


def test_without_a_configured_scope_a_source_edit_stays_where_the_memory_was_moved(
    acme: dict[str, Any], make_github: Callable[..., Connector]
) -> None:
    connector = make_github(acme["exec"], token=None, scope=None)
    apply(connector, item())
    assert current(connector).scope.slug == "engineering"  # the organization's GitHub rule
    memory_supersede(principal=principal(acme["exec"]), memory_id=current(connector).pk, changes={"scope": "sales"})
    apply(connector, item(content="The build installs with uv; pip and pip-tools are gone from CI."))
    latest = Memory.objects.get(source="GitHub", status="active")
    assert latest.scope.slug == "sales" and current(connector).pk == latest.pk

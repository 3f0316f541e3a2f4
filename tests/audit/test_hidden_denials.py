"""A 404 that hid something that exists is in the audit log of the organization that OWNS it, with the
rule that hid it and the prober as given — never in the prober's organization — while the caller's
answer stays byte for byte the answer for a missing id, and a missing id records nothing (REST and
UI here; MCP in tests/mcp/test_hidden_denials.py)."""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from conftest import ApiClient
from django.test import Client
from support import principal, remember, signed_in

from audit.models import AuditEvent
from connectors.services.connectors import connector_create
from memories.models import Conflict, Membership
from memories.services.jobs import job_create

pytestmark = pytest.mark.django_db

REST = {
    "memory": "/api/memories/{}",
    "conflict": "/api/conflicts/{}",
    "job": "/api/jobs/{}",
    "connector": "/api/connectors/{}",
}
UI = {
    "memory": "/memories/{}/",
    "conflict": "/conflicts/{}/",
    "job": "/briefs/jobs/{}/",
    "connector": "/connectors/{}/",
}


@dataclass(frozen=True)
class Probe:
    target_id: str
    prober: Membership
    token: dict[str, Any]  # options of the prober's token (REST)


def _memory(acme: dict[str, Any], outsider: Membership, rule: str) -> Probe:
    if rule == "organization":
        return Probe(str(remember(acme["employee"], "The VPN gateway is vpn-2.", scope="engineering").pk), outsider, {})
    if rule == "scope":
        return Probe(str(remember(acme["manager"], "Q3 discount ceiling is 12%.", scope="sales").pk), acme["employee"], {})
    if rule == "clearance":
        memory = remember(acme["manager"], "Two engineers leave in May.", scope="engineering", clearance_min="Manager")
        return Probe(str(memory.pk), acme["employee"], {})
    assert rule == "token_narrowing"
    memory = remember(acme["employee"], "Staging is rebuilt on Sundays.", scope="engineering")
    return Probe(str(memory.pk), acme["employee"], {"scope_slugs": ["handbook"]})


def _conflict(acme: dict[str, Any], outsider: Membership, rule: str) -> Probe:
    existing = remember(acme["manager"], "Deploys need two approvals.", scope="engineering", clearance_min="Manager")
    new = remember(acme["manager"], "Deploys need one approval.", scope="engineering")
    conflict = Conflict.objects.create(
        organization=acme["org"], new_memory=new, existing_memory=existing, kind="contradiction", similarity=0.9, explanation="x"
    )
    return Probe(str(conflict.pk), outsider if rule == "organization" else acme["employee"], {})


def _job(acme: dict[str, Any], outsider: Membership, rule: str) -> Probe:
    job = job_create(principal=principal(acme["employee"]), kind="extract_decisions", payload={"summary": "x"})
    return Probe(str(job.pk), outsider if rule == "organization" else acme["manager"], {})


def _connector(acme: dict[str, Any], outsider: Membership, rule: str) -> Probe:
    created = connector_create(
        principal=principal(acme["exec"]),
        kind="gmail",
        name="Team inbox",
        config={"label": "team"},
        credentials={"client_id": "c", "client_secret": "s", "refresh_token": "r"},
    )
    return Probe(str(created.connector.pk), outsider, {})


TARGETS: dict[str, Callable[[dict[str, Any], Membership, str], Probe]] = {
    "memory": _memory,
    "conflict": _conflict,
    "job": _job,
    "connector": _connector,
}
RULES = [
    ("memory", "organization"),
    ("memory", "scope"),
    ("memory", "clearance"),
    ("memory", "token_narrowing"),
    ("conflict", "organization"),
    ("conflict", "clearance"),
    ("job", "organization"),
    ("job", "owner"),
    ("connector", "organization"),
]
CASES = [("rest", kind, rule) for kind, rule in RULES] + [
    ("ui", kind, rule)
    for kind, rule in RULES
    if rule != "token_narrowing"  # a browser session has no token
]


def denials() -> list[AuditEvent]:
    return list(AuditEvent.objects.filter(action="access.denied").order_by("id"))


def _normalised(content: bytes, ids: tuple[str, str]) -> str:
    text = content.decode()
    for ident in ids:
        text = text.replace(ident, "ID")
    text = re.sub(r'nonce="[^"]*"', "", text)
    text = re.sub(r'(csrfmiddlewaretoken" value=")[^"]*', r"\1", text)
    text = re.sub(r'("X-CSRFToken": ")[^"]*', r"\1", text)
    return re.sub(r'("csrf[-_]token"[^>]*content=")[^"]*', r"\1", text)


def _client(surface: str, probe: Probe, api: Callable[..., ApiClient]) -> Client:
    return api(probe.prober, **probe.token) if surface == "rest" else signed_in(probe.prober)


@pytest.mark.parametrize(("surface", "kind", "rule"), CASES)
def test_a_hidden_object_probe_is_recorded_in_its_owners_log_with_the_rule(
    acme: dict[str, Any], outsider: Membership, api: Callable[..., ApiClient], surface: str, kind: str, rule: str
) -> None:
    probe = TARGETS[kind](acme, outsider, rule)
    client = _client(surface, probe, api)
    path = (REST if surface == "rest" else UI)[kind]
    missing_id = str(uuid.uuid4())

    missing = client.get(path.format(missing_id), headers={"X-Request-ID": "probe-1"})
    assert missing.status_code == 404
    assert denials() == [], "a missing id has no owner: nothing is recorded"

    hidden = client.get(path.format(probe.target_id), headers={"X-Request-ID": "probe-1"})
    assert hidden.status_code == 404
    assert _normalised(hidden.content, (probe.target_id, missing_id)) == _normalised(
        missing.content, (probe.target_id, missing_id)
    )
    assert sorted(dict(hidden.items())) == sorted(dict(missing.items()))
    assert hidden["Content-Type"] == missing["Content-Type"]

    [event] = denials()
    assert event.organization_id == acme["org"].pk, "the owner's chain, never the prober's"
    assert event.outcome == "denied"
    assert (event.target_type, event.target_id) == (kind, probe.target_id)
    assert event.details["rule"] == rule and event.details["answered"] == 404 and event.details["via"] == surface
    assert event.actor_user_id == probe.prober.user.pk
    assert event.actor_kind == ("token" if surface == "rest" else "session")
    assert not AuditEvent.objects.filter(organization_id=outsider.organization_id, action="access.denied").exists()


def test_probing_again_within_the_window_adds_no_event_but_another_rule_or_target_does(
    acme: dict[str, Any], outsider: Membership, api: Callable[..., ApiClient]
) -> None:
    first = str(remember(acme["employee"], "The VPN gateway is vpn-2.", scope="engineering").pk)
    second = str(remember(acme["employee"], "The build cache lives on nas-3.", scope="engineering").pk)
    client = api(outsider)
    for _ in range(5):
        assert client.get(f"/api/memories/{first}").status_code == 404
    assert client.get(f"/api/memories/{second}").status_code == 404
    # Another rule on the same target is another event: the employee's narrowed token.
    assert api(acme["employee"], scope_slugs=["handbook"]).get(f"/api/memories/{first}").status_code == 404
    assert [(e.target_id, e.details["rule"]) for e in denials()] == [
        (first, "organization"),
        (second, "organization"),
        (first, "token_narrowing"),
    ]


def test_a_foreign_probe_leaves_the_probers_organization_unable_to_tell_hidden_from_missing(
    acme: dict[str, Any], outsider: Membership, api: Callable[..., ApiClient]
) -> None:
    probe = _memory(acme, outsider, "organization")
    client = api(outsider)
    before = AuditEvent.objects.filter(organization_id=outsider.organization_id).count()
    client.get(f"/api/memories/{probe.target_id}")
    client.get(f"/api/memories/{uuid.uuid4()}")
    assert AuditEvent.objects.filter(organization_id=outsider.organization_id).count() == before
    # The owner's admins see the probe as the prober's identity, nothing of the prober's organization's data.
    [event] = denials()
    assert event.actor_label.startswith(outsider.user.email)
    assert event.details["path"] == f"/api/memories/{probe.target_id}"


def test_a_malformed_id_records_nothing(acme: dict[str, Any], outsider: Membership, api: Callable[..., ApiClient]) -> None:
    assert api(outsider).get("/api/memories/not-a-uuid").status_code == 404
    assert signed_in(outsider).get("/conflicts/00000000-0000-0000-0000-000000000000/").status_code == 404
    assert denials() == []


def test_a_change_aimed_at_another_members_or_organizations_token_or_member_is_a_404_recorded_with_its_owner(
    acme: dict[str, Any], outsider: Membership, make_token: Callable[..., str]
) -> None:
    from memories.models import ApiToken

    make_token(acme["employee"], name="laptop")
    token = ApiToken.objects.get(membership=acme["employee"], name="laptop")
    missing = signed_in(acme["manager"]).post(f"/settings/tokens/{uuid.uuid4()}/revoke/")
    others = signed_in(acme["manager"]).post(f"/settings/tokens/{token.pk}/revoke/")  # someone else's, same organization
    foreign = signed_in(outsider).post(f"/settings/tokens/{token.pk}/revoke/")
    member = signed_in(outsider).post(f"/settings/members/{acme['employee'].pk}/", {"clearance": "Contractor"})
    assert [r.status_code for r in (missing, others, foreign, member)] == [404, 404, 404, 404]
    assert ApiToken.objects.get(pk=token.pk).revoked_at is None
    assert Membership.objects.get(pk=acme["employee"].pk).clearance_rank == acme["employee"].clearance_rank
    recorded = [(e.organization_id, e.actor_user_id, e.target_type, e.details["rule"]) for e in denials()]
    assert recorded == [
        (acme["org"].pk, acme["manager"].user.pk, "token", "owner"),
        (acme["org"].pk, outsider.user.pk, "token", "organization"),
        (acme["org"].pk, outsider.user.pk, "member", "organization"),
    ]

"""Refused changes are in the audit log with the rule that refused them (REST and UI), once, after the
refused work rolled back. 404s that hid an existing object: tests/audit/test_hidden_denials.py."""

from __future__ import annotations

from typing import Any

import pytest
from support import assert_envelope, remember, signed_in

from audit.models import AuditEvent
from memories.models import Memory

pytestmark = pytest.mark.django_db


def denials() -> list[AuditEvent]:
    return list(AuditEvent.objects.filter(action="access.denied").order_by("id"))


def test_a_read_only_token_refused_a_redaction_is_recorded_with_its_rule(acme: dict[str, Any], api: Any) -> None:
    memory = remember(acme["employee"], "The staging database is rebuilt on Sundays.", scope="engineering")
    reader = api(acme["employee"], read_only=True)
    assert_envelope(reader.post(f"/api/memories/{memory.pk}/redact", {"reason": "Outdated."}), 403, "TOKEN_READ_ONLY")
    assert Memory.objects.get(pk=memory.pk).status == "active"
    [event] = denials()
    assert event.outcome == "denied" and event.organization_id == acme["org"].pk
    assert event.actor_user_id == acme["employee"].user.pk
    assert event.details["rule"] == "TOKEN_READ_ONLY" and event.details["via"] == "rest"
    assert event.details["path"] == f"/api/memories/{memory.pk}/redact"


def test_a_member_refused_an_admin_page_action_in_the_browser_is_recorded(acme: dict[str, Any]) -> None:
    response = signed_in(acme["employee"]).post("/connectors/new/github/", {"name": "Firmware"})
    assert response.status_code == 403
    [event] = denials()
    assert event.details["rule"] == "ADMIN_REQUIRED" and event.details["via"] == "ui"
    assert event.actor_user_id == acme["employee"].user.pk


def test_allowed_changes_record_no_denial_and_a_foreign_refusal_goes_to_the_owner_as_a_404(
    acme: dict[str, Any], api: Any, outsider: Any
) -> None:
    memory = remember(acme["employee"], "The VPN gateway is vpn-2.", scope="engineering")
    assert_envelope(api(outsider).post(f"/api/memories/{memory.pk}/redact", {"reason": "x"}), 404, "NOT_FOUND")
    done = api(acme["employee"]).post(f"/api/memories/{memory.pk}/redact", {"reason": "Outdated."})
    assert done.status_code == 200
    [event] = denials()  # the outsider's, in acme's log; the redaction itself refused nothing
    assert event.organization_id == acme["org"].pk and event.actor_user_id == outsider.user.pk
    assert event.details["rule"] == "organization" and event.details["answered"] == 404

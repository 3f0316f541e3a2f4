"""Setting an organization's conflict policy: admins or the operator CLI, audited."""

from __future__ import annotations

from io import StringIO
from typing import Any

import pytest
from django.core.management import CommandError, call_command

from audit.models import AuditEvent
from cortex_site.errors import PermissionDenied, ValidationFailed
from memories.models import Organization
from memories.services.conflicts import conflict_policy_set


def test_the_cli_shows_and_sets_the_policy_and_the_change_is_audited(acme: dict[str, Any]) -> None:
    out = StringIO()
    call_command("cortex", "conflicts", "policy", "--org", "acme", stdout=out)
    assert "conflict policy auto" in out.getvalue()
    call_command("cortex", "conflicts", "policy", "--org", "acme", "manual", stdout=out)
    assert Organization.objects.get(pk=acme["org"].pk).conflict_policy == "manual"
    event = AuditEvent.objects.get(action="organization.conflict_policy")
    assert (event.actor_kind, event.details) == ("cli", {"from": "auto", "to": "manual"})
    with pytest.raises(CommandError):
        call_command("cortex", "conflicts", "policy", "--org", "nowhere", stdout=out)


def test_only_admins_of_the_organization_change_it(acme: dict[str, Any], outsider: Any, principal_of: Any) -> None:
    with pytest.raises(PermissionDenied):
        conflict_policy_set(organization=acme["org"], policy="manual", by=principal_of(acme["manager"]))
    with pytest.raises(PermissionDenied):
        conflict_policy_set(organization=acme["org"], policy="manual", by=principal_of(outsider))
    with pytest.raises(ValidationFailed):
        conflict_policy_set(organization=acme["org"], policy="sometimes", by=principal_of(acme["exec"]))
    conflict_policy_set(organization=acme["org"], policy="manual", by=principal_of(acme["exec"]))
    conflict_policy_set(organization=acme["org"], policy="manual", by=principal_of(acme["exec"]))  # no change: not audited twice
    assert AuditEvent.objects.filter(action="organization.conflict_policy").count() == 1

"""One rule for read events: the UI and REST record `memory.read` (with the id) for one memory and
`memory.list` (with the filters and the ids returned) for a list; a foreign or missing memory
is read by nobody and records nothing. (MCP: tests/mcp/test_mcp_endpoint.py.)"""

from __future__ import annotations

from typing import Any

import pytest
from support import remember, signed_in

from audit.models import AuditEvent
from memories.models import Membership

pytestmark = pytest.mark.django_db


def test_rest_detail_records_a_read_with_the_id(acme: dict[str, Any], api: Any, outsider: Membership) -> None:
    memory = remember(acme["employee"], "Deploys need two approvals.", scope="engineering")
    assert api(acme["employee"]).get(f"/api/memories/{memory.pk}").status_code == 200
    event = AuditEvent.objects.get(action="memory.read")
    assert (event.target_id, event.details, event.actor_kind) == (str(memory.pk), {"via": "api"}, "token")
    assert api(outsider).get(f"/api/memories/{memory.pk}").status_code == 404
    assert api(acme["contractor"]).get("/api/memories/00000000-0000-0000-0000-000000000000").status_code == 404
    assert AuditEvent.objects.filter(action="memory.read").count() == 1


def test_rest_and_ui_lists_record_the_filters_and_what_they_returned(
    acme: dict[str, Any], api: Any, outsider: Membership
) -> None:
    first = remember(acme["employee"], "Deploys need two approvals.", scope="engineering", category="policy")
    remember(acme["manager"], "Q3 pipeline is 40 deals.", scope="sales", category="policy")
    assert api(acme["employee"]).get("/api/memories", {"category": "policy"}).status_code == 200
    event = AuditEvent.objects.get(action="memory.list")
    assert event.details == {"via": "api", "filters": {"category": "policy", "status": "active"}, "results": [str(first.pk)]}

    assert signed_in(acme["employee"]).get("/memories/?category=policy").status_code == 200
    ui = AuditEvent.objects.filter(action="memory.list").latest("id")
    assert ui.details == {"via": "ui", "filters": {"category": "policy", "status": "active"}, "results": [str(first.pk)]}

    api(outsider).get("/api/memories", {"category": "policy"})
    assert AuditEvent.objects.filter(action="memory.list").latest("id").details["results"] == []  # saw nothing of acme

"""Activity: my memory superseded, redacted or in a conflict — with a badge — filtered by the read rule;
and the admins' memory export from the browser (streamed JSONL, the admin's own read rule, audited)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from datetime import datetime
from typing import Any

import pytest
from support import principal, signed_in

from audit.models import AuditEvent
from connectors.models import Connector
from connectors.services.connectors import connector_create
from memories.models import Membership, Memory, Organization, ScopeGrant
from memories.services.memories import MemoryDraft, memory_create, memory_redact, memory_supersede
from memories.services.redactions import redaction_request_create

pytestmark = pytest.mark.django_db

CONFLICT_LINK = re.compile(r'href="/conflicts/[0-9a-f-]{36}/"')


@pytest.fixture
def write(django_capture_on_commit_callbacks: Any) -> Callable[..., Memory]:
    """`write(membership, content, **fields)` → the stored memory, after its post-write work (conflict detection) ran."""

    def write(membership: Membership, content: str, *, valid_from: datetime | None = None, **fields: Any) -> Memory:
        with django_capture_on_commit_callbacks(execute=True):
            result = memory_create(
                principal=principal(membership), draft=MemoryDraft(content=content, valid_from=valid_from, **fields)
            )
        result.memory.refresh_from_db()
        return result.memory

    return write


def _items(client: Any) -> str:
    """The Activity page's list of items (empty when there are none): nav and description left out."""
    html = client.get("/activity/").content.decode()
    return html.split('<ul class="item-list card">', 1)[1].split("</ul>", 1)[0] if '<ul class="item-list card">' in html else ""


def _badge(html: str) -> str | None:
    marker = "data-activity-badge>"
    return html.split(marker, 1)[1].split("<", 1)[0] if marker in html else None


def test_my_superseded_and_redacted_memories_show_with_a_badge_until_i_look(acme: dict[str, Any], write: Any) -> None:
    employee = acme["employee"]
    mine = write(employee, "Staging deploys happen at 09:00 every weekday.", title="Staging deploys", scope="engineering")
    other = write(employee, "The build cache lives on the old NAS.", title="Build cache", scope="engineering")
    memory_supersede(
        principal=principal(acme["manager"]), memory_id=mine.pk, changes={"content": "Staging deploys happen at 10:00."}
    )
    memory_redact(principal=principal(acme["exec"]), memory_id=other.pk, reason="Names an internal host.")
    client = signed_in(employee)
    assert _badge(client.get("/").content.decode()) == "2"
    page = client.get("/activity/").content.decode()
    assert "Superseded" in page and f"/memories/{mine.pk}/" in page and acme["manager"].user.display_name in page
    assert "Redacted" in page and "Names an internal host." in page
    assert _badge(client.get("/").content.decode()) is None  # seen
    # My own changes are not news to me.
    assert _badge(signed_in(acme["manager"]).get("/").content.decode()) is None


def test_a_conflict_with_my_memory_shows_only_when_i_can_read_both_sides(acme: dict[str, Any], write: Any) -> None:
    Organization.objects.filter(pk=acme["org"].pk).update(conflict_policy="manual")
    mine = write(
        acme["employee"],
        "The public API rate limit is 100 requests per minute per key.",
        title="API rate limit",
        scope="engineering",
    )
    write(
        acme["manager"],
        "The public API rate limit is 250 requests per minute per key.",
        title="API rate limit",
        scope="engineering",
    )
    page = signed_in(acme["employee"]).get("/activity/").content.decode()
    assert "Conflict" in page and CONFLICT_LINK.search(page) and "API rate limit" in page
    # Without the grant on engineering, neither my memory nor the conflict is shown.
    ScopeGrant.objects.filter(membership=acme["employee"], scope__slug="engineering").delete()
    hidden = signed_in(acme["employee"]).get("/activity/").content.decode()
    assert f"/memories/{mine.pk}/" not in hidden and not CONFLICT_LINK.search(hidden) and "API rate limit" not in hidden


def test_a_replacement_i_cannot_read_is_not_named(acme: dict[str, Any], write: Any) -> None:
    mine = write(
        acme["employee"], "Quarterly numbers are shared on the first Monday.", title="Quarterly numbers", scope="engineering"
    )
    secret_title = "Board-only quarterly numbers"
    memory_supersede(
        principal=principal(acme["exec"]),
        memory_id=mine.pk,
        changes={"content": "Quarterly numbers go to the board first.", "title": secret_title, "clearance_min": "Executive"},
    )
    page = signed_in(acme["employee"]).get("/activity/").content.decode()
    assert f"/memories/{mine.pk}/" in page and "was replaced" in page
    assert secret_title not in page


def test_activity_never_shows_other_peoples_or_other_organizations_memories(
    acme: dict[str, Any], write: Any, outsider: Membership
) -> None:
    theirs = write(acme["manager"], "Sales kickoff is in Lisbon this year.", title="Kickoff", scope="sales")
    memory_redact(principal=principal(acme["exec"]), memory_id=theirs.pk, reason="Not announced yet.")
    for reader in (acme["employee"], acme["contractor"], outsider):
        page = signed_in(reader).get("/activity/").content.decode()
        assert "Kickoff" not in page and "Not announced yet." not in page and f"/memories/{theirs.pk}/" not in page
        assert _badge(signed_in(reader).get("/").content.decode()) is None


# -- export from the browser (admins) ---------------------------------------------------------------------------
def test_admins_export_what_they_can_read_as_streamed_jsonl_and_it_is_audited(
    acme: dict[str, Any], write: Any, make_member: Any
) -> None:
    write(acme["employee"], "Engineering onboarding starts with the laptop checklist.", title="Onboarding", scope="engineering")
    write(acme["exec"], "Executive offsite budget is 50,000.", title="Offsite", scope="sales", clearance_min="Executive")
    manager_admin = make_member(acme["org"], "Manager", admin=True, grants={"engineering": False})
    response = signed_in(manager_admin).get("/settings/export/")
    assert response.status_code == 200 and response.streaming
    assert response["Content-Type"] == "application/x-ndjson" and "attachment" in response["Content-Disposition"]
    lines = [json.loads(line) for line in b"".join(response.streaming_content).decode().splitlines()]
    titles = {line["title"] for line in lines}
    assert "Onboarding" in titles and "Offsite" not in titles  # no grant on sales, and not Executive
    event = AuditEvent.objects.filter(action="memory.export", organization=acme["org"]).latest("id")
    assert event.actor_user_id == manager_admin.user.pk and event.details["via"] == "ui" and event.details["count"] == len(lines)
    scoped = signed_in(acme["exec"]).get("/settings/export/", {"scope": "sales", "status": "all"})
    assert {json.loads(line)["scope"] for line in b"".join(scoped.streaming_content).decode().splitlines()} == {"sales"}


def test_only_admins_of_the_organization_export(acme: dict[str, Any], outsider: Membership) -> None:
    before = AuditEvent.objects.filter(action="memory.export").count()
    assert signed_in(acme["manager"]).get("/settings/export/").status_code == 403
    assert signed_in(outsider).get("/settings/export/", {"scope": "engineering"}).status_code == 404
    assert signed_in(acme["exec"]).get("/settings/export/", {"status": "sideways"}).status_code == 400
    assert AuditEvent.objects.filter(action="memory.export").count() == before


def test_a_revision_and_a_redaction_request_wait_in_the_activity_of_who_may_decide_them(
    acme: dict[str, Any], write: Any, outsider: Membership
) -> None:
    manager, employee, contractor = acme["manager"], acme["employee"], acme["contractor"]
    runbook = write(manager, "Rollbacks need two approvals.", title="Rollback rule", scope="engineering")
    with_employee = write(employee, "The VPN gateway is vpn-2.", title="VPN gateway", scope="engineering")
    proposed = memory_supersede(principal=principal(employee), memory_id=runbook.pk, changes={"content": "One approval."})
    assert proposed.memory.status == "proposed"
    redaction_request_create(principal=principal(manager), memory_id=with_employee.pk, reason="Names an internal host.")

    manager_page = _items(signed_in(manager))
    assert "Revision to review" in manager_page and "Rollback rule" in manager_page
    assert employee.user.display_name in manager_page
    employee_page = _items(signed_in(employee))
    assert "Redaction request" in employee_page and "Names an internal host." in employee_page
    assert "Revision to review" not in employee_page  # the proposer waits; it is not news to them
    for bystander in (contractor, outsider):
        page = _items(signed_in(bystander))
        assert "Revision to review" not in page and "Redaction request" not in page and "Rollback rule" not in page


def test_admins_hear_of_connectors_in_error_and_holds_about_to_expire_and_members_do_not(
    acme: dict[str, Any], write: Any, settings: Any
) -> None:
    admin, employee = acme["exec"], acme["employee"]
    settings.CORTEX_REDACTION_HOLD_DAYS = 1  # inside the two-day notice at once
    held = write(employee, "The payroll export runs on Fridays.", title="Payroll export", scope="engineering")
    memory_redact(principal=principal(admin), memory_id=held.pk, reason="Wrong team.")
    kept = write(employee, "The cafeteria opens at 8.", title="Cafeteria", scope="engineering")
    settings.CORTEX_REDACTION_HOLD_DAYS = 7  # far from expiry: no notice
    memory_redact(principal=principal(admin), memory_id=kept.pk, reason="Not knowledge.")
    inbox = connector_create(
        principal=principal(admin), kind="github", name="Firmware repo", config={"repositories": ["acme/firmware"]}
    ).connector
    Connector.objects.filter(pk=inbox.pk).update(status="error", last_error="GitHub refused the token (401).")

    page = _items(signed_in(admin))
    assert "Connector error" in page and "Firmware repo" in page and "GitHub refused the token (401)." in page
    assert f"/connectors/{inbox.pk}/" in page
    assert page.count("Hold expiring") == 1 and f"/memories/{held.pk}/" in page
    member_page = _items(signed_in(employee))
    assert "Connector error" not in member_page and "Hold expiring" not in member_page

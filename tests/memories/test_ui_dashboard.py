"""The dashboard (landing page) and the placeholder pages for features still to come."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from support import principal, remember, signed_in

from memories.models import Membership, Memory
from memories.selectors import dashboard
from memories.services.memories import memory_redact

pytestmark = pytest.mark.django_db


@pytest.fixture
def stocked(acme: dict[str, Any]) -> dict[str, Any]:
    remember(acme["employee"], "Rate limits are 1,200 rpm.", title="Rate limits", scope="engineering", source="GitHub")
    remember(acme["employee"], "Deploys freeze on Fridays.", title="Deploy freeze", scope="engineering", source="Slack")
    remember(
        acme["manager"],
        "Discounts need VP sign-off.",
        title="Discount rule",
        scope="sales",
        source="Slack",
        clearance_min="Manager",
    )
    remember(
        acme["exec"],
        "Acquisition talks paused.",
        title="Board secret",
        scope="engineering",
        source="Gmail",
        clearance_min="Executive",
    )
    gone = remember(acme["employee"], "Customer phone numbers.", title="Leaked list", scope="engineering")
    memory_redact(principal=principal(acme["employee"]), memory_id=gone.pk, reason="personal data")
    return acme


def test_dashboard_counts_only_what_the_reader_can_see(stocked: dict[str, Any]) -> None:
    contractor = principal(stocked["contractor"])
    assert dashboard.visible_total(contractor) == 2
    assert [(t.key, t.count) for t in dashboard.counts_by_scope(contractor)] == [("engineering", 2)]
    assert sorted((t.key, t.count) for t in dashboard.counts_by_source(contractor)) == [("GitHub", 1), ("Slack", 1)]
    executive = principal(stocked["exec"])
    assert dashboard.visible_total(executive) == 4
    assert {t.key: t.count for t in dashboard.counts_by_scope(executive)} == {"engineering": 3, "sales": 1}


def test_weekly_additions_bucket_by_week_and_source(stocked: dict[str, Any]) -> None:
    old = Memory.objects.get(title="Rate limits")
    Memory.objects.filter(pk=old.pk).update(created_at=timezone.now() - timedelta(days=21))
    weekly = dashboard.weekly_additions(principal(stocked["manager"]))
    assert len(weekly.weeks) == 8 and weekly.weeks == sorted(weekly.weeks)
    assert sum(weekly.total(w) for w in weekly.weeks) == 3
    assert weekly.total(weekly.weeks[-1]) == 2  # Deploy freeze + Discount rule this week
    assert set(weekly.sources) == {"GitHub", "Slack"}


def test_dashboard_page_shows_counts_chart_and_recent_for_a_contractor(stocked: dict[str, Any]) -> None:
    response = signed_in(stocked["contractor"]).get("/")
    assert response.status_code == 200
    html = response.content.decode()
    assert re.search(r'Memories you can read</span><span class="stat-value">2<', html)
    assert "Rate limits" in html and "Deploy freeze" in html
    assert "Board secret" not in html and "Discount rule" not in html and "Leaked list" not in html
    assert 'href="/memories/?scope=engineering"' in html and 'href="/memories/?scope=sales"' not in html
    assert "Added per week" in html and 'class="stacked-chart"' in html
    assert "source-github" in html and "source-slack" in html and "source-gmail" not in html


def test_dashboard_for_the_executive_includes_the_executive_memory(stocked: dict[str, Any]) -> None:
    html = signed_in(stocked["exec"]).get("/").content.decode()
    assert "Board secret" in html and "Discount rule" in html
    assert re.search(r'Memories you can read</span><span class="stat-value">4<', html)


def test_outsider_dashboard_is_empty_and_says_what_to_do(stocked: dict[str, Any], outsider: Membership) -> None:
    html = signed_in(outsider).get("/").content.decode()
    assert "No memories yet" in html and "Rate limits" not in html
    assert 'href="/memories/new/"' in html and 'href="/settings/?tab=agent"' in html


def test_sync_health_appears_only_when_connectors_exist(stocked: dict[str, Any]) -> None:
    html = signed_in(stocked["employee"]).get("/").content.decode()
    if dashboard.connector_health(principal(stocked["employee"])) is None:
        assert "Sync health" not in html
    else:
        assert "Sync health" in html


def test_dashboard_query_count_does_not_grow_with_memories(stocked: dict[str, Any]) -> None:
    client = signed_in(stocked["employee"])
    client.get("/")
    with CaptureQueriesContext(connection) as few:
        client.get("/")
    for n in range(12):
        remember(stocked["employee"], f"Extra memory {n}.", title=f"Extra {n}", scope="engineering", tags=[f"t{n}"])
    with CaptureQueriesContext(connection) as many:
        client.get("/")
    assert len(many.captured_queries) == len(few.captured_queries)


def test_memory_list_query_count_does_not_grow_with_rows(stocked: dict[str, Any]) -> None:
    client = signed_in(stocked["employee"])
    with CaptureQueriesContext(connection) as few:
        client.get("/memories/")
    for n in range(15):
        remember(stocked["employee"], f"More memory {n}.", title=f"More {n}", scope="engineering")
    with CaptureQueriesContext(connection) as many:
        client.get("/memories/")
    assert len(many.captured_queries) == len(few.captured_queries)


def test_the_audit_log_is_a_page_in_the_shell_for_admins_only(acme: dict[str, Any]) -> None:
    member = signed_in(acme["employee"])
    assert member.get("/audit/").status_code == 404  # the audit log is an admin page
    audit = signed_in(acme["exec"]).get("/audit/")
    assert audit.status_code == 200 and b'class="shell"' in audit.content  # the real log now (tests/audit/test_audit_ui.py)

"""The Connectors page in the browser (Django's test client): cards, setup forms, runs, who may do what."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from support import signed_in

from audit.models import AuditEvent
from connectors.models import Connector, SyncRun
from connectors.services.sync import sync_start
from memories.models import Membership

pytestmark = pytest.mark.django_db

HX = {"HX-Request": "true"}


def gmail_form(**overrides: Any) -> dict[str, Any]:
    data = {
        "name": "Support inbox",
        "label": "support",
        "query": "",
        "client_id": "cid-123",
        "client_secret": "csecret-very-private",
        "refresh_token": "rtoken-very-private",
        "scope": "engineering",
        "clearance_min": "Employee",
        "per_run_cap": "",
        "first_run_days": "",
        "interval_minutes": "",
    }
    data.update(overrides)
    return data


def open_run(connector: Connector, *, done: int = 0, total: int | None = None, started_ago: int = 0) -> SyncRun:
    """A run as a worker leaves it mid-way: started `started_ago` seconds ago, `done` items so far."""
    run = sync_start(connector=connector, trigger=SyncRun.Trigger.MANUAL).run
    started = timezone.now() - timedelta(seconds=started_ago)
    SyncRun.objects.filter(pk=run.pk).update(
        status=SyncRun.Status.RUNNING, started_at=started, heartbeat_at=timezone.now(), progress_done=done, progress_total=total
    )
    run.refresh_from_db()
    return run


# -- who sees what ------------------------------------------------------------------------------------


def test_members_see_each_card_with_its_status_but_no_controls(acme: dict[str, Any], inbox: Connector) -> None:
    response = signed_in(acme["employee"]).get("/connectors/")
    assert response.status_code == 200
    html = response.content.decode()
    assert "Team inbox" in html and 'data-state="active"' in html
    assert "8 per run" in html  # Gmail's default cap, said on the card
    assert "Sync now" not in html and "Backfill" not in html and "Pause" not in html
    assert "/connectors/new/" not in html and "CORTEX_CRON_SECRETS" not in html
    detail = signed_in(acme["employee"]).get(f"/connectors/{inbox.pk}/").content.decode()
    assert "Team inbox" in detail and "Runs" in detail
    assert 'id="edit-title"' not in detail and "Test the connection" not in detail and "refresh-token-1" not in detail


def test_admins_see_controls_the_kinds_to_add_and_the_cron_setup(acme: dict[str, Any], inbox: Connector) -> None:
    html = signed_in(acme["exec"]).get("/connectors/").content.decode()
    for control in ("Sync now", "Backfill", "Pause"):
        assert control in html
    for kind in ("github", "slack", "gmail", "drive", "notion"):
        assert f'href="/connectors/new/{kind}/"' in html
    assert "/api/cron/connectors?organization=acme" in html and "Not set up" in html


def test_an_outsider_finds_no_trace_of_a_connector(acme: dict[str, Any], inbox: Connector, outsider: Membership) -> None:
    client = signed_in(outsider)
    assert "Team inbox" not in client.get("/connectors/").content.decode()
    missing = "00000000-0000-0000-0000-000000000000"
    for connector_id in (inbox.pk, missing, "not-a-uuid"):
        for path in ("", "card/"):
            assert client.get(f"/connectors/{connector_id}/{path}").status_code == 404
        for path in ("sync/", "pause/", "test/", "rotate/", "delete/", "edit/"):
            assert client.post(f"/connectors/{connector_id}/{path}", {"name": "mine now"}).status_code == 404
    inbox.refresh_from_db()
    assert inbox.status == Connector.Status.ACTIVE and inbox.name == "Team inbox"
    assert not SyncRun.objects.filter(connector=inbox).exists()


def test_a_member_cannot_configure_run_pause_or_remove_a_connector(acme: dict[str, Any], inbox: Connector) -> None:
    client = signed_in(acme["manager"])
    assert client.get("/connectors/new/gmail/").status_code == 403
    assert client.post("/connectors/new/gmail/", gmail_form()).status_code == 403
    for path in ("sync/", "pause/", "test/", "rotate/", "delete/"):
        assert client.post(f"/connectors/{inbox.pk}/{path}").status_code == 403
    assert client.post(f"/connectors/{inbox.pk}/edit/", gmail_form(name="Renamed")).status_code == 403
    assert list(Connector.objects.values_list("name", "status")) == [("Team inbox", "active")]
    assert not SyncRun.objects.exists()


def test_an_unknown_kind_is_not_found(acme: dict[str, Any]) -> None:
    assert signed_in(acme["exec"]).get("/connectors/new/dropbox/").status_code == 404


# -- setting one up -----------------------------------------------------------------------------------


def test_an_admin_connects_gmail_through_the_form_and_the_secrets_stay_on_the_server(acme: dict[str, Any]) -> None:
    client = signed_in(acme["exec"])
    form_html = client.get("/connectors/new/gmail/").content.decode()
    assert 'name="refresh_token"' in form_html and 'type="password"' in form_html
    assert "Empty: 8 per run" in form_html and "Empty: the last 3 days" in form_html
    response = client.post("/connectors/new/gmail/", gmail_form(per_run_cap="5"), follow=True)
    assert response.redirect_chain[0][1] == 302
    html = response.content.decode()
    connector = Connector.objects.get()
    assert connector.scope is not None and connector.scope.slug == "engineering"
    assert (connector.kind, connector.name, connector.per_run_cap) == ("gmail", "Support inbox", 5)
    assert connector.config["label"] == "support"
    assert connector.credentials["refresh_token"] == "rtoken-very-private"
    assert "rtoken-very-private" not in connector.credentials_encrypted
    assert "rtoken-very-private" not in html and "csecret-very-private" not in html
    assert "Support inbox" in html and "Test the connection" in html and "Nothing to paste" in html
    assert AuditEvent.objects.filter(action="connector.create", target_id=str(connector.pk)).exists()


def test_gmail_one_memory_per_message_is_chosen_in_the_form_and_kept_on_edit(acme: dict[str, Any]) -> None:
    client = signed_in(acme["exec"])
    assert 'name="per_message"' in client.get("/connectors/new/gmail/").content.decode()
    client.post("/connectors/new/gmail/", gmail_form(per_message="on"))
    connector = Connector.objects.get()
    assert connector.config["per_message"] is True
    edit_html = client.get(f"/connectors/{connector.pk}/").content.decode()  # the settings form is on its page
    assert 'name="per_message"' in edit_html and "checked" in edit_html.split('name="per_message"')[1].split(">")[0]
    client.post(f"/connectors/{connector.pk}/edit/", gmail_form())  # unticked: threads again
    connector.refresh_from_db()
    assert not connector.config.get("per_message")


def test_pasted_authorized_user_json_fills_the_google_credentials(acme: dict[str, Any]) -> None:
    pasted = '{"client_id": "j-cid", "client_secret": "j-secret", "refresh_token": "j-refresh", "type": "authorized_user"}'
    data = gmail_form(client_id="", client_secret="", refresh_token="", credentials_json=pasted)
    assert signed_in(acme["exec"]).post("/connectors/new/drive/", data | {"folder_id": "0BfolderX"}).status_code == 302
    connector = Connector.objects.get()
    assert connector.kind == "drive" and connector.config["folder_id"] == "0BfolderX"
    assert connector.credentials == {"client_id": "j-cid", "client_secret": "j-secret", "refresh_token": "j-refresh"}


def test_a_form_with_missing_credentials_says_so_keeps_the_input_and_creates_nothing(acme: dict[str, Any]) -> None:
    response = signed_in(acme["exec"]).post("/connectors/new/gmail/", gmail_form(refresh_token="", label="keep-me"))
    assert response.status_code == 400
    html = response.content.decode()
    assert 'id="id_refresh_token_error"' in html and "Required to connect." in html
    assert 'value="keep-me"' in html
    assert "csecret-very-private" not in html  # secrets are never echoed back, even on an error
    assert not Connector.objects.exists()


def test_the_form_offers_only_scopes_and_clearances_the_installer_has(acme: dict[str, Any], make_member: Any) -> None:
    admin = make_member(acme["org"], "Manager", admin=True, grants={"sales": True})
    html = signed_in(admin).get("/connectors/new/gmail/").content.decode()
    scopes = re.findall(r'<option value="([^"]*)"', html.split('name="scope"')[1].split("</select>")[0])
    assert scopes == ["", "public-docs", "sales"]  # not engineering: this admin cannot write there
    assert "Executive" not in html.split('name="clearance_min"')[1].split("</select>")[0]


def test_editing_keeps_the_stored_secret_when_its_field_is_left_empty(acme: dict[str, Any], inbox: Connector) -> None:
    client = signed_in(acme["exec"])
    page = client.get(f"/connectors/{inbox.pk}/").content.decode()
    assert 'value="team"' in page and "refresh-token-1" not in page and "Leave empty to keep the stored one." in page
    response = client.post(f"/connectors/{inbox.pk}/edit/", gmail_form(name="Team inbox", label="triage", refresh_token=""))
    assert response.status_code == 302
    inbox.refresh_from_db()
    assert inbox.config["label"] == "triage" and inbox.credentials["refresh_token"] == "refresh-token-1"
    client.post(f"/connectors/{inbox.pk}/edit/", gmail_form(name="Team inbox", refresh_token="rotated-token"))
    inbox.refresh_from_db()
    assert inbox.credentials["refresh_token"] == "rotated-token"
    assert AuditEvent.objects.filter(action="connector.credentials_rotate", target_id=str(inbox.pk)).exists()


# -- runs, progress and the card ---------------------------------------------------------------------


def test_sync_now_starts_one_run_and_the_card_polls_it(acme: dict[str, Any], inbox: Connector) -> None:
    client = signed_in(acme["exec"])
    response = client.post(f"/connectors/{inbox.pk}/sync/", headers=HX)
    assert response.status_code == 200
    html = response.content.decode()
    run = SyncRun.objects.get(connector=inbox)
    assert run.status == SyncRun.Status.QUEUED and run.trigger == SyncRun.Trigger.MANUAL
    assert f'hx-get="/connectors/{inbox.pk}/card/"' in html and 'hx-trigger="load delay:2s"' in html
    assert "Sync started." in html and 'data-state="syncing"' in html
    # On the connector's own page the card keeps polling as that page's card (no link back to itself).
    detail = client.get(f"/connectors/{inbox.pk}/").content.decode()
    assert f'hx-get="/connectors/{inbox.pk}/card/?next=/connectors/{inbox.pk}/"' in detail
    polled = client.get(f"/connectors/{inbox.pk}/card/?next=/connectors/{inbox.pk}/").content.decode()
    assert "Details" not in polled and f'name="next" value="/connectors/{inbox.pk}/"' in polled
    # A second click while it runs says so and starts nothing.
    again = client.post(f"/connectors/{inbox.pk}/sync/", headers=HX).content.decode()
    assert "already running" in again
    assert SyncRun.objects.filter(connector=inbox, status__in=["queued", "running"]).count() == 1


def test_backfill_is_one_run_with_a_raised_cap(acme: dict[str, Any], inbox: Connector) -> None:
    response = signed_in(acme["exec"]).post(f"/connectors/{inbox.pk}/sync/", {"backfill": "1", "next": "/connectors/"})
    assert response.status_code == 302 and response["Location"] == "/connectors/"
    run = SyncRun.objects.get(connector=inbox)
    assert run.trigger == SyncRun.Trigger.BACKFILL and run.cap is not None and run.cap > 8


def test_a_running_sync_shows_a_progress_bar_with_an_estimate(acme: dict[str, Any], inbox: Connector) -> None:
    open_run(inbox, done=12, total=36, started_ago=45)
    html = signed_in(acme["employee"]).get(f"/connectors/{inbox.pk}/card/").content.decode()
    # 12 in 45 s → 24 more in about 90 s: "2 min" until the request itself takes 15 s on a loaded machine.
    assert "12 of 36 items" in html and "about 2 min left" in html
    assert 'aria-valuenow="12"' in html and 'aria-valuemax="36"' in html and "--value: 33.3%" in html
    assert 'hx-trigger="load delay:2s"' in html and "running now" in html


def test_without_a_total_the_bar_is_indeterminate(acme: dict[str, Any], inbox: Connector) -> None:
    open_run(inbox, done=3, total=None, started_ago=5)
    html = signed_in(acme["employee"]).get(f"/connectors/{inbox.pk}/card/").content.decode()
    assert "3 items so far" in html and "progress-indeterminate" in html and "left" not in html.split("data-schedule")[0]


def test_a_finished_run_stops_the_polling_and_the_card_tells_the_schedule(acme: dict[str, Any], inbox: Connector) -> None:
    run = open_run(inbox, done=8, total=31, started_ago=30)
    now = timezone.now()
    SyncRun.objects.filter(pk=run.pk).update(status=SyncRun.Status.SUCCEEDED, finished_at=now, items_created=6, items_updated=2)
    Connector.objects.filter(pk=inbox.pk).update(last_synced_at=now, next_sync_at=now + timedelta(minutes=11, seconds=-20))
    html = signed_in(acme["employee"]).get(f"/connectors/{inbox.pk}/card/").content.decode()
    assert "hx-trigger" not in html
    assert "8 per run · next run in 11 min · about 23 left" in html
    assert "6 new · 2 updated · 0 redacted" in html


def test_a_connector_in_error_says_what_to_fix_in_plain_words(acme: dict[str, Any], inbox: Connector) -> None:
    message = "Google refused the refresh token (invalid_grant): connect the Google account again."
    Connector.objects.filter(pk=inbox.pk).update(status=Connector.Status.ERROR, last_error=message)
    html = signed_in(acme["employee"]).get("/connectors/").content.decode()
    assert message in html and "Needs attention" in html and "stopped until fixed" in html
    admin = signed_in(acme["exec"]).get("/connectors/").content.decode()
    assert ">Retry<" in admin and "Sync now" not in admin
    signed_in(acme["exec"]).post(f"/connectors/{inbox.pk}/pause/", {"resume": "1"})
    inbox.refresh_from_db()
    assert inbox.status == Connector.Status.ACTIVE and inbox.last_error == ""


def test_the_runs_table_lists_each_item_that_failed_and_why(acme: dict[str, Any], inbox: Connector) -> None:
    run = open_run(inbox, done=3, total=3)
    SyncRun.objects.filter(pk=run.pk).update(
        status=SyncRun.Status.SUCCEEDED,
        finished_at=timezone.now(),
        items_created=2,
        items_failed=1,
        failures=[{"external_id": "thr0042", "reason": "The message body could not be decoded (charset x-unknown)."}],
    )
    html = signed_in(acme["employee"]).get(f"/connectors/{inbox.pk}/").content.decode()
    assert "thr0042" in html and "could not be decoded (charset x-unknown)" in html
    assert "1 item with a problem" in html and "Succeeded" in html


def test_pause_and_resume_from_the_card(acme: dict[str, Any], inbox: Connector) -> None:
    client = signed_in(acme["exec"])
    paused = client.post(f"/connectors/{inbox.pk}/pause/", headers=HX).content.decode()
    inbox.refresh_from_db()
    assert inbox.status == Connector.Status.PAUSED and "Resume" in paused and "Sync now" not in paused
    client.post(f"/connectors/{inbox.pk}/pause/", {"resume": "1"}, headers=HX)
    inbox.refresh_from_db()
    assert inbox.status == Connector.Status.ACTIVE
    assert [e.action for e in AuditEvent.objects.filter(target_id=str(inbox.pk)).order_by("id")][-2:] == [
        "connector.pause",
        "connector.resume",
    ]


def test_removing_a_connector_keeps_nothing_of_it_but_its_memories(acme: dict[str, Any], inbox: Connector) -> None:
    response = signed_in(acme["exec"]).post(f"/connectors/{inbox.pk}/delete/", follow=True)
    assert response.status_code == 200 and "memories it brought in stay" in response.content.decode()
    assert not Connector.objects.exists()


def test_the_dashboard_lists_connectors_under_sync_health(acme: dict[str, Any], inbox: Connector) -> None:
    html = signed_in(acme["employee"]).get("/").content.decode()
    assert "Sync health" in html and "Team inbox" in html


def test_the_nav_leads_to_the_connectors_page(acme: dict[str, Any], make_connector: Callable[..., Connector]) -> None:
    html = signed_in(acme["employee"]).get("/connectors/").content.decode()
    assert 'aria-current="page"' in html.split('href="/connectors/"')[1][:80]
    assert "No connectors yet" in html and "An admin of your organization" in html


def test_every_kind_has_a_setup_form_naming_its_defaults(acme: dict[str, Any]) -> None:
    client = signed_in(acme["exec"])
    expected = {"github": "Poll every", "slack": "50 recent messages", "gmail": "Empty: 8 per run", "drive": "Empty: 4 per run"}
    for kind in ("github", "slack", "gmail", "drive", "notion"):
        response = client.get(f"/connectors/new/{kind}/")
        assert response.status_code == 200, kind
        assert expected.get(kind, "Empty: the last 30 days") in response.content.decode(), kind


def test_an_admin_connects_notion_with_its_databases(acme: dict[str, Any]) -> None:
    data = {"name": "Wiki", "token": "ntn_secret_value", "databases": "db-1\ndb-2", "clearance_min": "Employee", "scope": ""}
    response = signed_in(acme["exec"]).post("/connectors/new/notion/", data)
    assert response.status_code == 302
    connector = Connector.objects.get()
    assert connector.config["databases"] == ["db-1", "db-2"] and connector.credentials == {"token": "ntn_secret_value"}
    assert connector.scope is None  # the organization's source rule decides, else public-docs


def test_a_refused_edit_says_why_on_the_page_and_changes_nothing(acme: dict[str, Any], inbox: Connector) -> None:
    response = signed_in(acme["exec"]).post(
        f"/connectors/{inbox.pk}/edit/", gmail_form(name="Team inbox", refresh_token="new-token", interval_minutes="0")
    )
    assert response.status_code == 400
    assert 'id="id_interval_minutes_error"' in response.content.decode()
    inbox.refresh_from_db()
    assert inbox.credentials["refresh_token"] == "refresh-token-1" and inbox.config["label"] == "team"


def test_the_list_costs_the_same_queries_for_one_connector_or_many(
    acme: dict[str, Any], make_connector: Callable[..., Connector]
) -> None:
    client = signed_in(acme["exec"])
    sync_start(connector=make_connector(acme["exec"], name="First"), trigger=SyncRun.Trigger.MANUAL)
    client.get("/connectors/")
    with CaptureQueriesContext(connection) as one:
        client.get("/connectors/")
    for n in range(4):
        more = make_connector(acme["exec"], name=f"More {n}")
        for _ in range(2):
            SyncRun.objects.create(organization_id=more.organization_id, connector=more, trigger="schedule", status="succeeded")
    with CaptureQueriesContext(connection) as five:
        html = client.get("/connectors/").content.decode()
    assert html.count('class="card connector-card"') == 5
    assert len(five.captured_queries) == len(one.captured_queries)


def test_the_page_lists_only_this_organizations_runs(
    acme: dict[str, Any], outsider: Membership, make_connector: Callable[..., Connector]
) -> None:
    from support import principal

    from connectors.page_reads import recent_runs

    ours, theirs = make_connector(acme["exec"]), make_connector(outsider, name="Globex inbox")
    sync_start(connector=ours, trigger=SyncRun.Trigger.MANUAL)
    sync_start(connector=theirs, trigger=SyncRun.Trigger.MANUAL)
    runs = recent_runs(principal(acme["employee"]), [ours.pk, theirs.pk])
    assert set(runs) == {ours.pk}

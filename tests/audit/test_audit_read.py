"""Reading the audit log: GET /api/audit (filters, cursor pages), /api/audit/verify, streamed
JSONL/CSV export, the /audit/ page with its drawer, "who read this" — admins only, and audited."""

from __future__ import annotations

import csv
import io
import json
from typing import Any

import pytest
from django.test import Client, RequestFactory, override_settings
from support import assert_envelope, remember, signed_in

from audit.middleware import _trusted_proxies, client_ip
from audit.models import AuditEvent
from audit.services import Actor, record
from memories.models import Membership

pytestmark = pytest.mark.django_db


def _streamed(response: Any) -> str:
    assert response.streaming, "the export is streamed, never built in memory"
    return b"".join(response.streaming_content).decode()


@pytest.fixture
def history(acme: dict[str, Any]) -> dict[str, Any]:
    """Some events in acme: member changes, a denial, a token."""
    org = acme["org"]
    record(
        "member.update",
        organization=org,
        actor=Actor(kind="session", label="boss@acme.test"),
        target_type="user",
        target_id="u-1",
    )
    record(
        "member.remove",
        organization=org,
        actor=Actor(kind="session", label="boss@acme.test"),
        target_type="user",
        target_id="u-2",
    )
    record("memory.read", organization=org, actor=Actor(kind="token", label="eve@acme.test (token ab12)"), outcome="denied")
    return acme


# -- REST -----------------------------------------------------------------------------------------------------
def test_admins_list_the_log_newest_first_with_filters(history: dict[str, Any], api: Any) -> None:
    client = api(history["exec"])
    body = client.get("/api/audit").json()
    ids = [e["id"] for e in body["results"]]
    assert ids == sorted(ids, reverse=True)
    assert set(body["results"][0]) >= {
        "id",
        "created_at",
        "actor",
        "action",
        "target",
        "outcome",
        "request_id",
        "ip",
        "details",
        "hash",
    }
    only = client.get("/api/audit", {"action": "member."}).json()["results"]
    assert {"member.update", "member.remove"} <= {e["action"] for e in only}
    assert all(e["action"].startswith("member.") for e in only)
    denied = client.get("/api/audit", {"outcome": "denied"}).json()["results"]
    assert [e["action"] for e in denied] == ["memory.read"]
    by_actor = client.get("/api/audit", {"actor": "boss@"}).json()["results"]
    assert {e["action"] for e in by_actor} == {"member.update", "member.remove"}
    target = client.get("/api/audit", {"target": "user:u-2"}).json()["results"]
    assert [e["action"] for e in target] == ["member.remove"]
    assert client.get("/api/audit", {"since": "2999-01-01"}).json()["results"] == []
    assert len(client.get("/api/audit", {"until": "2999-01-01", "action": "member.remove"}).json()["results"]) == 1


def test_the_log_pages_with_cursors_without_repeats(history: dict[str, Any], api: Any) -> None:
    for i in range(7):
        record("embedding.reembed.start", organization=history["org"], actor=Actor.cli(), details={"i": i})
    client = api(history["exec"])
    seen: list[int] = []
    url: str | None = "/api/audit?action=embedding.reembed.start&limit=3"
    while url:
        body = client.get(url).json()
        seen += [e["id"] for e in body["results"]]
        url = body["next"]
    assert len(seen) == 7 == len(set(seen)) and seen == sorted(seen, reverse=True)


def test_reading_the_log_is_itself_audited(history: dict[str, Any], api: Any) -> None:
    api(history["exec"]).get("/api/audit", {"action": "member."})
    event = AuditEvent.objects.filter(action="audit.read").latest("id")
    assert event.organization_id == history["org"].pk and event.details["filters"] == {"action": "member."}


@pytest.mark.parametrize("who", ["manager", "employee", "contractor"])
def test_non_admins_and_outsiders_get_404(history: dict[str, Any], api: Any, outsider: Membership, who: str) -> None:
    for member in (history[who], outsider):
        for path in ("/api/audit", "/api/audit/verify", "/api/audit/export"):
            response = api(member).get(path)
            if member is outsider:
                # An admin of another organization reads their own log, never acme's.
                assert response.status_code == 200
                continue
            assert_envelope(response, 404, "NOT_FOUND")
    outsider_events = api(outsider).get("/api/audit").json()["results"]
    assert all(e["actor"]["label"] != "boss@acme.test" for e in outsider_events)
    assert not any(e["action"] == "member.remove" for e in outsider_events)


def test_bad_filters_are_400_and_change_nothing(history: dict[str, Any], api: Any) -> None:
    client = api(history["exec"])
    before = AuditEvent.objects.count()
    assert_envelope(client.get("/api/audit", {"since": "last tuesday"}), 400, "INVALID_DATE")
    assert_envelope(client.get("/api/audit", {"outcome": "maybe"}), 400, "INVALID_OUTCOME")
    assert_envelope(client.get("/api/audit/export", {"format": "xml"}), 400, "INVALID_FORMAT")
    assert AuditEvent.objects.count() == before


def test_moments_are_read_in_utc_and_impossible_ones_are_400(history: dict[str, Any], api: Any) -> None:
    client = api(history["exec"])
    # +16:00 is a valid ISO offset PostgreSQL refuses: converted to UTC, the filter holds and the
    # stream completes (sent as given, the query failed halfway through the streamed answer).
    response = client.get("/api/audit/export", {"since": "2000-01-01T00:00:00+16:00", "format": "csv"})
    assert response.status_code == 200
    rows = list(csv.DictReader(io.StringIO(_streamed(response))))
    assert {"member.update", "member.remove", "memory.read"} <= {row["action"] for row in rows}
    listed = client.get("/api/audit", {"since": "2000-01-01T00:00:00+16:00"})
    assert listed.status_code == 200 and listed.json()["results"]
    for impossible in ("2000-13-01T00:00:00", "0001-01-01T00:00:00+16:00", "2000-02-30"):
        assert_envelope(client.get("/api/audit", {"since": impossible}), 400, "INVALID_DATE")
        assert_envelope(client.get("/api/audit/export", {"until": impossible}), 400, "INVALID_DATE")


def test_verify_answers_and_anchors_the_head(history: dict[str, Any], api: Any) -> None:
    from audit.models import AuditCheckpoint

    body = api(history["exec"]).get("/api/audit/verify").json()
    assert body["ok"] is True and body["count"] >= 3 and body["first_broken"] is None
    assert AuditCheckpoint.objects.filter(organization=history["org"], kind="head").exists()
    assert AuditEvent.objects.filter(action="audit.verify", organization=history["org"]).exists()


def test_export_streams_jsonl_and_csv_of_a_filtered_range_oldest_first(history: dict[str, Any], api: Any) -> None:
    client = api(history["exec"])
    response = client.get("/api/audit/export", {"action": "member.", "format": "jsonl"})
    assert response.status_code == 200 and response["Content-Type"] == "application/x-ndjson"
    assert "attachment" in response["Content-Disposition"]
    lines = [json.loads(line) for line in _streamed(response).splitlines()]
    actions = [line["action"] for line in lines]
    assert "member.update" in actions and "member.remove" in actions and all(a.startswith("member.") for a in actions)
    assert [line["id"] for line in lines] == sorted(line["id"] for line in lines)
    as_csv = client.get("/api/audit/export", {"outcome": "denied", "format": "csv"})
    assert as_csv["Content-Type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(_streamed(as_csv))))
    assert [r["action"] for r in rows] == ["memory.read"] and rows[0]["outcome"] == "denied"
    exports = AuditEvent.objects.filter(action="audit.export", organization=history["org"])
    assert [e.details["format"] for e in exports.order_by("id")] == ["jsonl", "csv"]


def test_the_schema_documents_the_audit_api(api: Any, acme: dict[str, Any]) -> None:
    schema = api(acme["exec"]).get("/api/schema/", {"format": "json"}).json()
    for path in ("/api/audit", "/api/audit/verify", "/api/audit/export"):
        assert path in schema["paths"]
        assert {"200", "404"} <= set(schema["paths"][path]["get"]["responses"])
    params = {p["name"] for p in schema["paths"]["/api/audit"]["get"]["parameters"]}
    assert {"actor", "action", "target", "since", "until", "outcome", "cursor"} <= params


# -- UI ------------------------------------------------------------------------------------------------------
def test_the_audit_page_lists_filters_and_opens_the_drawer(history: dict[str, Any]) -> None:
    admin = signed_in(history["exec"])
    page = admin.get("/audit/", {"action": "member."})
    html = page.content.decode()
    assert page.status_code == 200 and "member.update" in html and "memory.read" not in html.split("<tbody>")[1]
    event = AuditEvent.objects.filter(action="member.remove").latest("id")
    assert f'hx-get="/audit/{event.pk}/"' in html
    drawer = admin.get(f"/audit/{event.pk}/", headers={"HX-Request": "true"}).content.decode()
    assert "member.remove" in drawer and event.hash in drawer and "<html" not in drawer
    whole = admin.get("/audit/", {"event": event.pk}).content.decode()
    assert event.hash in whole  # without JS the drawer is part of the page
    assert AuditEvent.objects.filter(action="audit.read", details__via="ui").count() >= 2


def test_the_audit_page_pages_on(history: dict[str, Any]) -> None:
    for i in range(55):
        record("embedding.reembed.start", organization=history["org"], actor=Actor.cli(), details={"i": i})
    admin = signed_in(history["exec"])
    html = admin.get("/audit/", {"action": "embedding.reembed.start"}).content.decode()
    assert html.count("embedding.reembed.start</td>") == 50 and "Older events" in html
    assert "before=" in html.split("Older events", 1)[0].rsplit("href=", 1)[1]
    last = AuditEvent.objects.filter(action="embedding.reembed.start").order_by("id")[4]
    second = admin.get("/audit/", {"action": "embedding.reembed.start", "before": last.pk + 1}).content.decode()
    assert second.count("embedding.reembed.start</td>") == 5 and "Older events" not in second


def test_the_audit_page_exports_from_the_browser(history: dict[str, Any]) -> None:
    response = signed_in(history["exec"]).get("/audit/export/", {"action": "member.", "format": "csv"})
    assert response.status_code == 200 and "member.update" in _streamed(response)
    assert signed_in(history["exec"]).get("/audit/export/", {"format": "xml"}).status_code == 400


def test_the_audit_pages_do_not_exist_for_non_admins_or_outsiders(history: dict[str, Any], outsider: Membership) -> None:
    event = AuditEvent.objects.filter(organization=history["org"]).latest("id")
    for member in (history["manager"], history["contractor"]):
        client = signed_in(member)
        assert client.get("/audit/").status_code == 404
        assert client.get(f"/audit/{event.pk}/").status_code == 404
        assert client.get("/audit/export/").status_code == 404
    foreign = signed_in(outsider)
    assert foreign.get(f"/audit/{event.pk}/").status_code == 404
    assert "boss@acme.test" not in foreign.get("/audit/").content.decode()
    assert Client().get("/audit/").status_code == 302  # to sign in


# -- who read this -----------------------------------------------------------------------------------------------
def test_the_author_and_admins_see_who_read_or_recalled_a_memory(acme: dict[str, Any], api: Any) -> None:
    memory = remember(
        acme["employee"], "The on-call rotation changes every Monday at 10:00.", title="On-call rotation", scope="engineering"
    )
    signed_in(acme["manager"]).get(f"/memories/{memory.pk}/")
    api(acme["contractor"]).post("/api/recall", {"query": "when does the on-call rotation change"})
    author_page = signed_in(acme["employee"]).get(f"/memories/{memory.pk}/").content.decode()
    section = author_page.split('id="who-read-this"', 1)[1].split("</section>", 1)[0]
    assert acme["manager"].user.email in section and "opened it" in section
    assert acme["contractor"].user.email in section and "recalled it" in section
    admin_page = signed_in(acme["exec"]).get(f"/memories/{memory.pk}/").content.decode()
    assert 'id="who-read-this"' in admin_page and "/audit/?target=memory:" in admin_page
    # A reader who is neither the author nor an admin sees the memory, not who read it.
    assert 'id="who-read-this"' not in signed_in(acme["manager"]).get(f"/memories/{memory.pk}/").content.decode()


# -- client address -------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("trusted", "remote", "forwarded", "expected"),
    [
        ([], "127.0.0.1", "203.0.113.9", "127.0.0.1"),  # nobody trusted: the header is ignored
        (["10.0.0.0/8"], "127.0.0.1", "203.0.113.9", "127.0.0.1"),  # not from our proxy: ignored
        (["10.0.0.0/8"], "10.0.0.5", "203.0.113.9", "203.0.113.9"),
        (["10.0.0.0/8"], "10.0.0.5", "198.51.100.1, 203.0.113.9, 10.0.0.7", "203.0.113.9"),  # rightmost untrusted hop
        (["10.0.0.0/8"], "10.0.0.5", "not-an-ip", "10.0.0.5"),
        (["10.0.0.0/8"], "10.0.0.5", "", "10.0.0.5"),
    ],
)
def test_x_forwarded_for_is_believed_only_from_configured_proxies(
    trusted: list[str], remote: str, forwarded: str, expected: str
) -> None:
    with override_settings(CORTEX_TRUSTED_PROXIES=trusted):
        _trusted_proxies.cache_clear()
        try:
            request = RequestFactory().get("/", REMOTE_ADDR=remote, HTTP_X_FORWARDED_FOR=forwarded)
            assert client_ip(request) == expected
        finally:
            _trusted_proxies.cache_clear()


def test_a_loopback_client_cannot_choose_its_audited_address(client: Client) -> None:
    client.post(
        "/login/", {"username": "x@example.test", "password": "nope-nope-nope"}, headers={"X-Forwarded-For": "198.51.100.77"}
    )
    assert AuditEvent.objects.get(action="auth.login_failed").ip == "127.0.0.1"

"""REST /api/connectors: admins configure and sync, members read status, outsiders see nothing;
credentials never come back; errors are the envelope and change nothing."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from support import assert_envelope
from support.stub_server import StubServer

from audit.models import AuditEvent
from connectors.models import Connector, SyncRun
from memories.models import Membership

pytestmark = pytest.mark.django_db

TOKEN = "ghp_api-test-token-not-real"


def _body(stub_server: StubServer, **overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "kind": "github",
        "name": "Robots",
        "scope": "engineering",
        "config": {"repositories": ["acme/robots"], "api_url": stub_server.url},
        "credentials": {"token": TOKEN},
    }
    body.update(overrides)
    return body


@pytest.fixture
def created(acme: dict[str, Any], api: Callable[..., Any], stub_server: StubServer) -> dict[str, Any]:
    response = api(acme["exec"]).post("/api/connectors", _body(stub_server))
    assert response.status_code == 201, response.content
    return response.json()


def test_the_connector_list_is_cursor_paged_newest_first_and_an_outsider_sees_none(
    acme: dict[str, Any], api: Callable[..., Any], stub_server: StubServer, outsider: Any
) -> None:
    admin = api(acme["exec"])
    ids = [admin.post("/api/connectors", _body(stub_server, name=f"Repo {n}")).json()["id"] for n in range(3)]
    first = admin.get("/api/connectors", {"limit": 2}).json()
    assert [c["id"] for c in first["results"]] == ids[::-1][:2] and first["next"]
    second = admin.get(first["next"]).json()
    assert [c["id"] for c in second["results"]] == [ids[0]] and second["next"] is None
    assert_envelope(admin.get("/api/connectors", {"cursor": "not-a-cursor"}), 404, "INVALID_CURSOR")
    assert api(outsider).get("/api/connectors").json() == {"results": [], "next": None}


def _no_secrets(text: str, *secrets: str) -> None:
    for secret in secrets:
        assert secret not in text


def test_an_admin_creates_a_connector_and_gets_the_generated_secret_once(
    acme: dict[str, Any], api: Callable[..., Any], created: dict[str, Any]
) -> None:
    assert created["kind"] == "github" and created["status"] == "active" and created["scope"] == "engineering"
    assert created["webhook_url"].endswith(f"/api/webhooks/github/{created['id']}")
    secret = created["webhook_secret"]
    assert len(secret) >= 32
    assert created["credential_keys"] == ["token", "webhook_secret"]
    assert "credentials" not in created and TOKEN not in json.dumps(created)

    again = api(acme["exec"]).get(f"/api/connectors/{created['id']}")
    assert again.status_code == 200 and "webhook_secret" not in again.json()
    _no_secrets(again.content.decode(), TOKEN, secret)
    listed = api(acme["exec"]).get("/api/connectors").json()
    assert [c["id"] for c in listed["results"]] == [created["id"]] and listed["next"] is None
    _no_secrets(json.dumps(listed), TOKEN, secret)
    # Neither the audit log nor the stored config holds a secret.
    for event in AuditEvent.objects.filter(target_id=created["id"]):
        _no_secrets(json.dumps(event.details), TOKEN, secret)
    _no_secrets(json.dumps(Connector.objects.get(pk=created["id"]).config), TOKEN, secret)


def test_a_given_webhook_secret_is_not_echoed(acme: dict[str, Any], api: Callable[..., Any], stub_server: StubServer) -> None:
    body = _body(stub_server, credentials={"token": TOKEN, "webhook_secret": "mine-not-echoed"})
    response = api(acme["exec"]).post("/api/connectors", body)
    assert response.status_code == 201 and "webhook_secret" not in response.json()
    assert "mine-not-echoed" not in response.content.decode()


@pytest.mark.parametrize(
    ("overrides", "code"),
    [
        ({"kind": "myspace"}, "VALIDATION_ERROR"),
        ({"config": {"repositories": ["not a repo"]}}, "INVALID_REPOSITORY"),
        ({"config": {"repositories": []}}, "REPOSITORIES_REQUIRED"),
        ({"config": {"repositories": ["acme/robots"], "mode": "poll"}, "credentials": {}}, "TOKEN_REQUIRED"),
        ({"config": {"repositories": ["acme/robots"], "colour": "red"}}, "UNKNOWN_FIELDS"),
        ({"scope": "nowhere"}, "UNKNOWN_SCOPE"),
        ({"clearance_min": "Galactic"}, "UNKNOWN_CLEARANCE"),
        ({"per_run_cap": 0}, "INVALID_NUMBER"),
        ({"surprise": True}, "VALIDATION_ERROR"),
    ],
)
def test_bad_input_is_refused_with_the_envelope_and_nothing_is_created(
    acme: dict[str, Any], api: Callable[..., Any], stub_server: StubServer, overrides: dict[str, Any], code: str
) -> None:
    response = api(acme["exec"]).post("/api/connectors", _body(stub_server, **overrides))
    # Malformed is 400; a scope or rung this organization does not have is "not found", like any object
    # that is not there; what the source's own reading of config and credentials refuses is 422.
    status = {"VALIDATION_ERROR": 400, "INVALID_NUMBER": 400, "UNKNOWN_SCOPE": 404, "UNKNOWN_CLEARANCE": 404}.get(code, 422)
    body = assert_envelope(response, status, code)
    assert TOKEN not in json.dumps(body)
    assert Connector.objects.count() == 0


def test_a_connector_cannot_write_above_its_installer(
    acme: dict[str, Any], api: Callable[..., Any], make_member: Callable[..., Membership], stub_server: StubServer
) -> None:
    # An admin at Employee clearance without a grant to sales cannot point a connector at sales or at Executive.
    admin = make_member(acme["org"], "Employee", admin=True, grants={"engineering": True})
    assert_envelope(api(admin).post("/api/connectors", _body(stub_server, scope="sales")), 404, "UNKNOWN_SCOPE")
    assert_envelope(api(admin).post("/api/connectors", _body(stub_server, clearance_min="Executive")), 403, "CLEARANCE_ABOVE_OWN")
    assert Connector.objects.count() == 0


def test_members_read_status_only_and_cannot_configure_or_sync(
    acme: dict[str, Any], api: Callable[..., Any], created: dict[str, Any], stub_server: StubServer
) -> None:
    member = api(acme["employee"])
    listed = member.get("/api/connectors").json()["results"]
    assert [c["id"] for c in listed] == [created["id"]]
    status = member.get(f"/api/connectors/{created['id']}").json()
    assert status["status"] == "active" and "health" in status
    assert not {"config", "cursor", "credential_keys", "webhook_secret"} & set(status)
    runs = member.get(f"/api/connectors/{created['id']}/runs")
    assert runs.status_code == 200 and runs.json()["results"] == []

    assert_envelope(member.post("/api/connectors", _body(stub_server, name="Mine")), 403, "ADMIN_REQUIRED")
    assert_envelope(member.patch(f"/api/connectors/{created['id']}", {"name": "Taken"}), 403, "ADMIN_REQUIRED")
    assert_envelope(member.patch(f"/api/connectors/{created['id']}", {"status": "paused"}), 403, "ADMIN_REQUIRED")
    assert_envelope(member.post(f"/api/connectors/{created['id']}/sync", {}), 403, "ADMIN_REQUIRED")
    assert_envelope(
        member.post(f"/api/connectors/{created['id']}/credentials", {"credentials": {"token": "x"}}), 403, "ADMIN_REQUIRED"
    )
    assert_envelope(member.post(f"/api/connectors/{created['id']}/test", {}), 403, "ADMIN_REQUIRED")
    assert_envelope(member.delete(f"/api/connectors/{created['id']}"), 403, "ADMIN_REQUIRED")
    connector = Connector.objects.get(pk=created["id"])
    assert (connector.name, connector.status) == ("Robots", "active")
    assert SyncRun.objects.count() == 0 and Connector.objects.count() == 1


def test_a_read_only_token_of_an_admin_cannot_configure(
    acme: dict[str, Any], api: Callable[..., Any], created: dict[str, Any]
) -> None:
    reader = api(acme["exec"], read_only=True)
    assert reader.get(f"/api/connectors/{created['id']}").status_code == 200
    assert_envelope(reader.patch(f"/api/connectors/{created['id']}", {"name": "X"}), 403, "TOKEN_READ_ONLY")
    assert_envelope(reader.post(f"/api/connectors/{created['id']}/sync", {}), 403, "TOKEN_READ_ONLY")


def test_an_outsider_sees_nothing_and_foreign_looks_like_missing(
    acme: dict[str, Any], api: Callable[..., Any], created: dict[str, Any], outsider: Membership
) -> None:
    stranger = api(outsider)
    assert stranger.get("/api/connectors").json()["results"] == []
    for connector_id in (created["id"], "00000000-0000-0000-0000-000000000000", "nope"):
        for call in (
            lambda c=connector_id: stranger.get(f"/api/connectors/{c}"),
            lambda c=connector_id: stranger.patch(f"/api/connectors/{c}", {"status": "paused"}),
            lambda c=connector_id: stranger.delete(f"/api/connectors/{c}"),
            lambda c=connector_id: stranger.post(f"/api/connectors/{c}/sync", {}),
            lambda c=connector_id: stranger.get(f"/api/connectors/{c}/runs"),
            lambda c=connector_id: stranger.post(f"/api/connectors/{c}/credentials", {"credentials": {"token": "x"}}),
            lambda c=connector_id: stranger.post(f"/api/connectors/{c}/test", {}),
        ):
            body = assert_envelope(call(), 404, "NOT_FOUND")
            assert body["message"] == "No such connector."
    connector = Connector.objects.get(pk=created["id"])
    assert connector.status == "active" and SyncRun.objects.count() == 0


def test_patch_pauses_resumes_and_changes_settings_and_refuses_unknown_fields(
    acme: dict[str, Any], api: Callable[..., Any], created: dict[str, Any], stub_server: StubServer
) -> None:
    admin = api(acme["exec"])
    url = f"/api/connectors/{created['id']}"
    paused = admin.patch(url, {"status": "paused"})
    assert paused.status_code == 200 and paused.json()["status"] == "paused"
    assert_envelope(admin.post(f"{url}/sync", {}), 409, "CONNECTOR_PAUSED")
    assert admin.patch(url, {"status": "active"}).json()["status"] == "active"
    changed = admin.patch(
        url,
        {
            "per_run_cap": 7,
            "interval_minutes": 30,
            "config": {"repositories": ["acme/robots", "acme/arms"], "api_url": stub_server.url},
        },
    )
    assert changed.status_code == 200, changed.content
    assert (changed.json()["per_run_cap"], changed.json()["interval_minutes"]) == (7, 30)
    assert changed.json()["config"]["repositories"] == ["acme/robots", "acme/arms"]
    assert_envelope(admin.patch(url, {"credentials": {"token": "x"}}), 400, "VALIDATION_ERROR")
    assert_envelope(admin.patch(url, {"interval_minutes": 0}), 400, "INVALID_NUMBER")
    assert Connector.objects.get(pk=created["id"]).interval_minutes == 30
    actions = list(AuditEvent.objects.filter(target_id=created["id"]).values_list("action", flat=True).order_by("id"))
    assert actions == ["connector.create", "connector.pause", "connector.resume", "connector.update"]


def test_sync_now_answers_202_then_409_with_the_running_run(
    acme: dict[str, Any], api: Callable[..., Any], created: dict[str, Any]
) -> None:
    admin = api(acme["exec"])
    url = f"/api/connectors/{created['id']}/sync"
    first = admin.post(url, {})  # the run's first page is enqueued on commit, which a test transaction never reaches
    assert first.status_code == 202
    run_id = first.json()["run_id"]
    second = assert_envelope(admin.post(url, {}), 409, "SYNC_IN_PROGRESS")
    assert second["details"] == {"run_id": run_id}
    statuses = dict(SyncRun.objects.values_list("status", "trigger"))
    assert statuses == {"queued": "manual", "skipped": "manual"}
    runs = admin.get(f"/api/connectors/{created['id']}/runs").json()["results"]
    assert [r["status"] for r in runs] == ["skipped", "queued"]
    one = admin.get(f"/api/connectors/{created['id']}/runs/{run_id}")
    assert one.status_code == 200 and one.json()["id"] == run_id
    health = admin.get(f"/api/connectors/{created['id']}").json()["health"]
    assert health["running_run_id"] == run_id
    assert_envelope(admin.post(url, {"backfill": "maybe"}), 400, "VALIDATION_ERROR")


def test_runs_page_by_cursor_newest_first(acme: dict[str, Any], api: Callable[..., Any], created: dict[str, Any]) -> None:
    admin = api(acme["exec"])
    url = f"/api/connectors/{created['id']}/sync"
    for _ in range(4):  # one queued run, then three recorded as skipped while it is queued
        admin.post(url, {})
    first = admin.get(f"/api/connectors/{created['id']}/runs", {"limit": 3}).json()
    assert len(first["results"]) == 3 and first["next"]
    rest = admin.get(first["next"]).json()
    assert len(rest["results"]) == 1 and rest["next"] is None
    ids = [r["id"] for r in first["results"] + rest["results"]]
    assert len(set(ids)) == 4
    assert ids == [str(pk) for pk in SyncRun.objects.order_by("-created_at", "-id").values_list("id", flat=True)]
    assert_envelope(admin.get(f"/api/connectors/{created['id']}/runs", {"cursor": "nonsense"}), 404, "INVALID_CURSOR")


def test_rotating_credentials_keeps_them_secret_and_can_make_a_new_webhook_secret(
    acme: dict[str, Any], api: Callable[..., Any], created: dict[str, Any]
) -> None:
    admin = api(acme["exec"])
    url = f"/api/connectors/{created['id']}/credentials"
    rotated = admin.post(url, {"credentials": {"token": "ghp_rotated-not-real"}})
    assert rotated.status_code == 200 and "webhook_secret" not in rotated.json()
    assert "ghp_rotated" not in rotated.content.decode()
    connector = Connector.objects.get(pk=created["id"])
    assert connector.credentials["token"] == "ghp_rotated-not-real"
    assert connector.credentials["webhook_secret"] == created["webhook_secret"]
    fresh = admin.post(url, {"credentials": {"webhook_secret": ""}}).json()
    assert fresh["webhook_secret"] != created["webhook_secret"]
    assert Connector.objects.get(pk=created["id"]).credentials["webhook_secret"] == fresh["webhook_secret"]
    event = AuditEvent.objects.filter(action="connector.credentials_rotate").order_by("-id").first()
    assert event is not None and event.details["credential_keys"] == ["webhook_secret"]
    _no_secrets(json.dumps(event.details), fresh["webhook_secret"])


def test_delete_stops_the_connector_and_keeps_its_memories(
    acme: dict[str, Any],
    api: Callable[..., Any],
    make_github: Callable[..., Connector],
    post_github: Callable[..., Any],
    stub_server: StubServer,
) -> None:
    from github_webhooks import github_fixture

    from memories.models import Memory

    connector = make_github(acme["exec"], token=None)
    assert post_github(connector, github_fixture("pull_request__closed_merged.json")).status_code == 200
    assert api(acme["exec"]).delete(f"/api/connectors/{connector.pk}").status_code == 204
    assert not Connector.objects.filter(pk=connector.pk).exists()
    assert Memory.objects.filter(source="GitHub", status="active").count() == 1
    assert AuditEvent.objects.filter(action="connector.delete", target_id=str(connector.pk)).exists()
    assert post_github(connector, github_fixture("pull_request__closed_merged.json")).status_code == 404


def test_test_connection_reports_what_github_said(
    acme: dict[str, Any], api: Callable[..., Any], created: dict[str, Any], stub_server: StubServer
) -> None:
    from support.stub_server import StubResponse

    stub_server.route("GET", "/user", StubResponse(json={"login": "robot"}))
    stub_server.route("GET", "/repos/acme/robots", StubResponse(json={"full_name": "acme/robots", "id": 1}))
    ok = api(acme["exec"]).post(f"/api/connectors/{created['id']}/test", {}).json()
    assert ok == {"ok": True, "message": "Connected as @robot; 1 repository visible."}
    stub_server.route("GET", "/user", StubResponse(status=401, json={"message": "Bad credentials"}))
    bad = api(acme["exec"]).post(f"/api/connectors/{created['id']}/test", {}).json()
    assert bad["ok"] is False and "revoked" in bad["message"] and TOKEN not in bad["message"]
    assert [r.headers["authorization"] for r in stub_server.requests_to("/user")] == [f"token {TOKEN}"] * 2


def test_the_openapi_schema_documents_the_connector_api(api: Callable[..., Any], acme: dict[str, Any]) -> None:
    schema = api(acme["exec"]).get("/api/schema/", HTTP_ACCEPT="application/json")
    assert schema.status_code == 200
    text = schema.content.decode()
    paths = json.loads(text)["paths"] if text.lstrip().startswith("{") else {}
    if not paths:
        import yaml  # drf-spectacular answers YAML by default

        paths = yaml.safe_load(text)["paths"]
    assert {"/api/connectors", "/api/connectors/{connector_id}", "/api/connectors/{connector_id}/sync"} <= set(paths)
    sync = paths["/api/connectors/{connector_id}/sync"]["post"]["responses"]
    assert {"202", "403", "404", "409"} <= set(sync)
    assert "SYNC_IN_PROGRESS" in json.dumps(sync)


def test_which_items_failed_is_shown_only_to_those_who_may_read_what_the_connector_writes(
    acme: dict[str, Any], api: Callable[..., Any], stub_server: StubServer, client: Any
) -> None:
    connector = api(acme["exec"]).post("/api/connectors", _body(stub_server, scope="sales")).json()
    failures = [{"external_id": "acme/robots#41", "reason": "GitHub refused 'Layoff plan for Q3' (403)."}]
    run = SyncRun.objects.create(
        connector_id=connector["id"],
        organization_id=acme["org"].pk,
        trigger="manual",
        status="succeeded",
        items_failed=1,
        failures=failures,
    )
    runs, one = f"/api/connectors/{connector['id']}/runs", f"/api/connectors/{connector['id']}/runs/{run.pk}"

    for member, sees in (("exec", True), ("manager", True), ("employee", False)):  # the employee has no sales grant
        reader = api(acme[member])
        listed, alone = reader.get(runs).json()["results"][0], reader.get(one).json()
        assert (listed["items_failed"], alone["items_failed"]) == (1, 1)  # the counts are everyone's
        assert listed["failures"] == alone["failures"] == (failures if sees else []), member
    # The connector's page likewise.
    client.force_login(acme["employee"].user)
    page = client.get(f"/connectors/{connector['id']}/").content.decode()
    assert "Layoff plan" not in page and "acme/robots#41" not in page
    client.force_login(acme["manager"].user)
    assert "Layoff plan for Q3" in client.get(f"/connectors/{connector['id']}/").content.decode()

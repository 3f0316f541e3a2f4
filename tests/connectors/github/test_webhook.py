"""GitHub webhooks end to end: signed recorded deliveries → Delivery → worker (eager) → memory,
with PyGithub fetching the changed files from the loopback stub."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlencode

import pytest
from django.test import Client
from github_webhooks import github_fixture, github_json, github_signature
from support import assert_envelope
from support.stub_server import Received, StubResponse, StubServer

from audit.models import AuditEvent
from connectors.models import Connector, ConnectorItem, Delivery, SyncRun
from memories.models import Memory

pytestmark = pytest.mark.django_db

REPO = "robvanderleek/create-issue-branch"
FILES_PATH = f"/repos/{REPO}/pulls/117/files"
MERGED = "pull_request__closed_merged.json"
FILES = [
    {"sha": "a1", "filename": "README.md", "status": "modified", "additions": 3, "deletions": 1, "changes": 4},
    {"sha": "b2", "filename": "src/app.js", "status": "added", "additions": 40, "deletions": 0, "changes": 40},
]


def _memories(connector: Connector) -> list[Memory]:
    return list(Memory.objects.filter(organization_id=connector.organization_id, source="GitHub").order_by("created_at"))


def test_a_merged_pull_request_becomes_a_memory_with_its_changed_files(
    post_github: Callable[..., Any], acme: dict[str, Any], make_github: Callable[..., Connector], stub_server: StubServer
) -> None:
    stub_server.route("GET", FILES_PATH, StubResponse(json=FILES))
    stub_server.route("GET", f"/repos/{REPO}/pulls/111", StubResponse(status=404, json={"message": "Not Found"}))
    connector = make_github(acme["exec"])

    response = post_github(connector, github_fixture(MERGED), delivery="d-117")

    assert response.status_code == 200, response.content
    delivery = Delivery.objects.get(connector=connector, delivery_id="d-117")
    assert delivery.status == Delivery.Status.PROCESSED and delivery.event == "pull_request.closed"
    [memory] = _memories(connector)
    assert memory.title == 'Revert "Update README.md"'
    assert memory.category == "pr" and memory.source == "GitHub"
    assert memory.source_url == "https://github.com/robvanderleek/create-issue-branch/pull/117"
    assert memory.valid_from == datetime(2020, 3, 23, 6, 46, 56, tzinfo=UTC)
    assert memory.external_id == f"{REPO}#117"
    assert memory.scope.slug == "engineering"
    assert memory.author_name == "@robvanderleek"
    for fact in (
        "Reverts robvanderleek/create-issue-branch#111",
        f"{REPO}#117 was opened by @robvanderleek and merged by @robvanderleek into master "
        "from revert-111-robvanderleek-patch-1 on 2020-03-23T06:46:56+00:00",
        f"Files changed in {REPO}#117: README.md (modified, +3 −1), src/app.js (added, +40 −0).",
    ):
        assert fact in memory.content, fact
    # PyGithub really called the stub, with the connector's token.
    [files_call] = stub_server.requests_to(FILES_PATH)
    assert files_call.headers["authorization"] == "token ghp_test-token-not-real"
    assert ConnectorItem.objects.get(connector=connector, external_id=f"{REPO}#117").memory_id == memory.pk
    run = SyncRun.objects.get(connector=connector, trigger=SyncRun.Trigger.WEBHOOK)
    assert (run.status, run.items_created) == (SyncRun.Status.SUCCEEDED, 1)
    # The reverted PR could not be fetched (404 at the stub): the run says so, the memory stands.
    assert any("reverted pull request could not be updated" in f["reason"] for f in run.failures)
    # The write is the connector's in the audit log, and the delivery was accepted (recorded by the
    # worker that processed it: tests/connectors/test_delivery_audit.py).
    event = AuditEvent.objects.get(action="memory.create", target_id=str(memory.pk))
    assert event.actor_kind == AuditEvent.ActorKind.CONNECTOR and event.actor_connector_id == str(connector.pk)
    [accept] = AuditEvent.objects.filter(action="webhook.accept", organization=acme["org"])
    assert accept.target_id == str(delivery.pk)


def test_when_changed_files_cannot_be_fetched_the_memory_is_still_written_and_the_run_says_why(
    post_github: Callable[..., Any], acme: dict[str, Any], make_github: Callable[..., Connector], stub_server: StubServer
) -> None:
    stub_server.route("GET", FILES_PATH, StubResponse(status=403, json={"message": "Resource not accessible by integration"}))
    connector = make_github(acme["exec"])

    assert post_github(connector, github_fixture(MERGED)).status_code == 200

    [memory] = _memories(connector)
    assert f"{REPO}#117 was opened" in memory.content and "Files changed" not in memory.content
    run = SyncRun.objects.get(connector=connector, trigger=SyncRun.Trigger.WEBHOOK)
    assert run.items_created == 1
    [reason] = [f["reason"] for f in run.failures if "Changed files" in f["reason"]]
    assert "403" in reason and "ghp_" not in reason
    assert Connector.objects.get(pk=connector.pk).status == Connector.Status.ACTIVE


def test_without_a_token_the_memory_comes_from_the_payload_alone(
    post_github: Callable[..., Any], acme: dict[str, Any], make_github: Callable[..., Connector], stub_server: StubServer
) -> None:
    connector = make_github(acme["exec"], token=None)
    assert post_github(connector, github_fixture(MERGED)).status_code == 200
    assert len(_memories(connector)) == 1
    assert stub_server.received == []


def test_a_closed_unmerged_pull_request_is_ignored_and_recorded(
    post_github: Callable[..., Any], acme: dict[str, Any], make_github: Callable[..., Connector]
) -> None:
    connector = make_github(acme["exec"], repositories=["Codertocat/Hello-World"])
    response = post_github(connector, github_fixture("pull_request__closed_not_merged.json"), delivery="d-2")
    assert response.status_code == 202
    assert response.json()["ignored"] is True
    delivery = Delivery.objects.get(connector=connector, delivery_id="d-2")
    assert delivery.status == Delivery.Status.IGNORED and "without being merged" in delivery.error
    assert delivery.payload == {}
    assert _memories(connector) == []
    # Recorded after the answer, by the batch step its commit triggered.
    assert AuditEvent.objects.filter(action="webhook.ignore", target_id=str(delivery.pk)).count() == 1


def test_ping_is_answered_and_other_events_are_ignored(
    post_github: Callable[..., Any], acme: dict[str, Any], make_github: Callable[..., Connector]
) -> None:
    connector = make_github(acme["exec"], repositories=["Codertocat/Hello-World"])
    ping = post_github(connector, github_fixture("ping__hook.json"), event="ping")
    assert ping.status_code == 200 and ping.json()["pong"] is True
    push = post_github(connector, github_fixture("push__branch_1_commit.json"), event="push", delivery="push-1")
    assert push.status_code == 202
    assert Delivery.objects.get(delivery_id="push-1").status == Delivery.Status.IGNORED
    assert _memories(connector) == []


def test_a_merged_pull_request_on_an_unconfigured_repository_is_ignored(
    post_github: Callable[..., Any], acme: dict[str, Any], make_github: Callable[..., Connector], stub_server: StubServer
) -> None:
    connector = make_github(acme["exec"], repositories=["acme/robots"])
    response = post_github(connector, github_fixture(MERGED), delivery="d-3")
    assert response.status_code == 202
    assert "not configured" in Delivery.objects.get(delivery_id="d-3").error
    assert _memories(connector) == [] and stub_server.received == []


def test_a_replayed_delivery_does_nothing_and_the_same_pr_again_creates_nothing_new(
    post_github: Callable[..., Any], acme: dict[str, Any], make_github: Callable[..., Connector], stub_server: StubServer
) -> None:
    stub_server.route("GET", FILES_PATH, StubResponse(json=FILES))
    connector = make_github(acme["exec"])
    body = github_fixture(MERGED)
    assert post_github(connector, body, delivery="same").status_code == 200
    again = post_github(connector, body, delivery="same")
    assert again.status_code == 200 and again.json()["duplicate"] is True
    assert Delivery.objects.filter(connector=connector).count() == 1
    # The retry writes nothing, no audit event either: the delivery's own event is in the chain once.
    assert not AuditEvent.objects.filter(action="webhook.duplicate").exists()
    assert AuditEvent.objects.filter(action="webhook.accept", organization=acme["org"]).count() == 1
    # GitHub's "Redeliver" of the same event under a new id: processed, nothing new.
    assert post_github(connector, body, delivery="other").status_code == 200
    assert len(_memories(connector)) == 1
    runs = SyncRun.objects.filter(connector=connector, trigger=SyncRun.Trigger.WEBHOOK).order_by("created_at")
    assert [(r.items_created, r.items_skipped) for r in runs] == [(1, 0), (0, 1)]


def test_an_edited_merged_pull_request_supersedes_its_memory(
    post_github: Callable[..., Any], acme: dict[str, Any], make_github: Callable[..., Connector], stub_server: StubServer
) -> None:
    stub_server.route("GET", FILES_PATH, StubResponse(json=FILES))
    connector = make_github(acme["exec"])
    assert post_github(connector, github_fixture(MERGED)).status_code == 200
    [first] = _memories(connector)

    edited = github_json(MERGED)
    edited["action"] = "edited"
    edited["pull_request"]["title"] = 'Revert "Update README.md" (broke the badge)'
    assert post_github(connector, json.dumps(edited).encode()).status_code == 200

    first.refresh_from_db()
    current = Memory.objects.get(organization=acme["org"], source="GitHub", status=Memory.Status.ACTIVE)
    assert first.status == Memory.Status.SUPERSEDED and first.superseded_by_id == current.pk
    assert current.title.endswith("(broke the badge)") and current.external_id == f"{REPO}#117"
    assert ConnectorItem.objects.get(connector=connector).memory_id == current.pk


@pytest.mark.parametrize("signature", ["sha256=" + "0" * 64, "", "sha1=abc"])
def test_a_bad_or_missing_signature_is_refused_before_anything_is_stored(
    post_github: Callable[..., Any],
    acme: dict[str, Any],
    make_github: Callable[..., Connector],
    signature: str,
    stub_server: StubServer,
) -> None:
    connector = make_github(acme["exec"])
    response = post_github(connector, github_fixture(MERGED), signature=signature)
    body = assert_envelope(response, 401, "INVALID_SIGNATURE")
    assert "secret" in body["message"] or "missing" in body["message"]
    assert Delivery.objects.count() == 0 and _memories(connector) == [] and stub_server.received == []
    assert AuditEvent.objects.filter(action="webhook.reject", outcome="denied", organization=acme["org"]).count() == 1


def test_a_body_signed_with_another_secret_is_refused(
    post_github: Callable[..., Any], acme: dict[str, Any], make_github: Callable[..., Connector]
) -> None:
    connector = make_github(acme["exec"])
    body = github_fixture(MERGED)
    assert_envelope(post_github(connector, body, signature=github_signature(body, "another-secret")), 401, "INVALID_SIGNATURE")
    # A correct signature of a different body does not carry over either.
    assert_envelope(post_github(connector, body + b" ", signature=github_signature(body)), 401, "INVALID_SIGNATURE")


def test_unknown_connectors_and_kinds_are_not_found(acme: dict[str, Any], make_github: Callable[..., Connector]) -> None:
    connector = make_github(acme["exec"])
    body = github_fixture(MERGED)

    for path in (
        "/api/webhooks/github/00000000-0000-0000-0000-000000000000",
        "/api/webhooks/github/not-a-uuid",
        f"/api/webhooks/slack/{connector.pk}",
        f"/api/webhooks/nope/{connector.pk}",
    ):
        assert_envelope(Client().post(path, data=body, content_type="application/json"), 404, "NOT_FOUND")
    assert Client().get(f"/api/webhooks/github/{connector.pk}").status_code == 405


def test_a_paused_connector_records_deliveries_as_ignored(
    post_github: Callable[..., Any], acme: dict[str, Any], make_github: Callable[..., Connector]
) -> None:
    from connectors.services.connectors import connector_pause
    from memories.access import Principal

    connector = make_github(acme["exec"])
    connector_pause(principal=Principal(acme["exec"]), connector_id=connector.pk)
    response = post_github(connector, github_fixture(MERGED), delivery="while-paused")
    assert response.status_code == 202
    assert Delivery.objects.get(delivery_id="while-paused").error == "The connector is paused."
    assert _memories(connector) == []


@pytest.mark.parametrize(
    "changes",
    [{"pull_request": "not an object"}, {"pull_request": [117]}, {"repository": REPO}],
    ids=["pull_request-string", "pull_request-list", "repository-string"],
)
def test_a_signed_pull_request_delivery_of_an_unexpected_shape_is_ignored_not_a_server_error(
    post_github: Callable[..., Any], acme: dict[str, Any], make_github: Callable[..., Connector], changes: dict[str, Any]
) -> None:
    connector = make_github(acme["exec"])
    payload = {**github_json(MERGED), **changes}

    response = post_github(connector, json.dumps(payload).encode(), delivery="odd-shape")

    assert response.status_code == 202 and response.json()["ignored"] is True
    assert Delivery.objects.get(connector=connector, delivery_id="odd-shape").status == Delivery.Status.IGNORED
    assert _memories(connector) == []


def test_nul_characters_and_broken_surrogates_in_a_pull_request_do_not_lose_it(
    post_github: Callable[..., Any], acme: dict[str, Any], make_github: Callable[..., Connector], stub_server: StubServer
) -> None:
    # JSON may escape what PostgreSQL cannot store: NUL, and half of a surrogate pair.
    stub_server.route("GET", FILES_PATH, StubResponse(json=FILES))
    connector = make_github(acme["exec"], token=None)
    payload = github_json(MERGED)
    payload["pull_request"]["title"] = "Parse logs TITLE"
    payload["pull_request"]["body"] = "BODY"
    body = (
        json.dumps(payload)
        .replace("TITLE", r"with \u0000 bytes")
        .replace('"BODY"', r'"The dump ended in \u0000\u0000; the emoji was cut: \ud83d."')
        .encode()
    )

    response = post_github(connector, body, delivery="nul")

    assert response.status_code == 200, response.content
    assert Delivery.objects.get(connector=connector, delivery_id="nul").status == Delivery.Status.PROCESSED
    [memory] = _memories(connector)
    assert memory.title == "Parse logs with  bytes"
    assert memory.content.startswith("The dump ended in ; the emoji was cut: \ufffd.")


def test_a_pull_request_with_more_labels_than_a_memory_has_tags_is_stored_with_every_label_in_its_text(
    post_github: Callable[..., Any], acme: dict[str, Any], make_github: Callable[..., Connector]
) -> None:
    connector = make_github(acme["exec"], token=None)
    payload = github_json(MERGED)
    names = [f"area: part {n}" for n in range(30)]  # GitHub allows up to 100 labels on a pull request
    payload["pull_request"]["labels"] = [{"id": n, "name": name, "color": "ededed"} for n, name in enumerate(names)]

    assert post_github(connector, json.dumps(payload).encode()).status_code == 200

    [memory] = _memories(connector)
    assert f"labels of {REPO}#117: {', '.join(names)}" in memory.content
    assert memory.tags[:3] == ["pull-request", "area:-part-0", "area:-part-1"]
    assert len(memory.tags) == 20


@pytest.mark.parametrize(("title", "expected"), [("x" * 400, "x" * 299 + "…"), ("   ", f"{REPO}#117")])
def test_a_title_cortex_cannot_store_as_is_is_shortened_or_replaced_not_lost(
    post_github: Callable[..., Any],
    acme: dict[str, Any],
    make_github: Callable[..., Connector],
    settings: Any,
    title: str,
    expected: str,
) -> None:
    settings.CORTEX_MAX_TITLE_CHARS = 300
    connector = make_github(acme["exec"], token=None)
    payload = github_json(MERGED)
    payload["pull_request"]["title"] = title

    assert post_github(connector, json.dumps(payload).encode()).status_code == 200

    [memory] = _memories(connector)
    assert memory.title == expected


def test_a_pull_request_with_more_changed_files_than_are_listed_says_how_many_more(
    post_github: Callable[..., Any], acme: dict[str, Any], make_github: Callable[..., Connector], stub_server: StubServer
) -> None:
    files = [{"filename": f"src/part_{n}.py", "status": "modified", "additions": 1, "deletions": 1} for n in range(700)]

    def page_of_files(request: Received) -> StubResponse:
        page, size = int(request.query.get("page", "1")), int(request.query["per_page"])
        link = f'<{stub_server.url}{FILES_PATH}?per_page={size}&page={page + 1}>; rel="next"'
        return StubResponse(json=files[(page - 1) * size : page * size], headers={"Link": link})

    stub_server.route("GET", FILES_PATH, page_of_files)
    connector = make_github(acme["exec"])
    payload = github_json(MERGED)
    payload["pull_request"].update(body="Split the monolith into parts.", changed_files=len(files))

    assert post_github(connector, json.dumps(payload).encode()).status_code == 200

    [memory] = _memories(connector)
    assert memory.content.count("src/part_") == 300
    assert memory.content.endswith("src/part_299.py (modified, +1 −1), and 400 more.")


def test_a_form_encoded_delivery_githubs_default_content_type_is_read_like_json(
    acme: dict[str, Any], make_github: Callable[..., Connector], django_capture_on_commit_callbacks: Any
) -> None:
    connector = make_github(acme["exec"], token=None)
    # GitHub signs the body as sent: here the form, whose `payload` field holds the JSON.
    form = urlencode({"payload": github_fixture(MERGED).decode()}).encode()
    headers = {"X-GitHub-Event": "pull_request", "X-GitHub-Delivery": "form-1", "X-Hub-Signature-256": github_signature(form)}
    with django_capture_on_commit_callbacks(execute=True):
        response = Client().post(
            f"/api/webhooks/github/{connector.pk}", data=form, content_type="application/x-www-form-urlencoded", headers=headers
        )

    assert response.status_code == 200, response.content
    [memory] = _memories(connector)
    assert memory.external_id == "robvanderleek/create-issue-branch#" + str(github_json(MERGED)["pull_request"]["number"])
    # A form without the field is a malformed delivery, refused and audited like any other.
    unsigned = b"action=closed"
    headers |= {"X-GitHub-Delivery": "form-2", "X-Hub-Signature-256": github_signature(unsigned)}
    refused = Client().post(
        f"/api/webhooks/github/{connector.pk}", data=unsigned, content_type="application/x-www-form-urlencoded", headers=headers
    )
    assert_envelope(refused, 400, "MALFORMED_REQUEST")
    assert not Delivery.objects.filter(connector=connector, delivery_id="form-2").exists()

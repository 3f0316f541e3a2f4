"""Bad webhook deliveries, table-driven for every kind that takes webhooks (GitHub, Slack): each is
refused with the right status and error_code in the envelope, audited as `webhook.reject` against
its connector with that code, and nothing else is written (no delivery, no memory, no job).

A replayed delivery id is not an error: the source retries with the same id, so it is answered
200 `duplicate` and writes nothing (no audit event either: the first delivery's is recorded once). Kinds without webhooks
(Drive, Gmail, Notion) have no webhook address: 404, like an unknown connector.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from django.test import Client
from github_webhooks import WEBHOOK_SECRET, github_fixture, github_signature
from support import assert_envelope
from support.slack_workspace import BOT_TOKEN, SIGNING_SECRET, FakeSlack, fixture_bytes, sign
from support.stub_server import StubServer

from audit.models import AuditEvent
from connectors.models import Connector, Delivery
from connectors.services.connectors import connector_create
from memories.access import Principal
from memories.models import Memory

pytestmark = pytest.mark.django_db

MIB = 1024 * 1024


@dataclass(frozen=True)
class Case:
    name: str
    status: int
    error_code: str
    body: bytes | None = None  # None: the kind's good body
    headers: dict[str, str | None] = field(default_factory=dict)  # None removes a header
    sign_body: bool = True  # sign what is sent (False: keep the good body's signature)
    content_type: str = "application/json"
    declared_length: int | None = None


def github_good() -> bytes:
    return github_fixture("pull_request__closed_merged.json")


def github_headers(body: bytes) -> dict[str, str]:
    return {
        "X-GitHub-Event": "pull_request",
        "X-GitHub-Delivery": str(uuid.uuid4()),
        "X-Hub-Signature-256": github_signature(body),
    }


def slack_good() -> bytes:
    return fixture_bytes("event_callback__message")


def slack_headers(body: bytes) -> dict[str, str]:
    return sign(body)


KINDS: dict[str, tuple[Callable[[], bytes], Callable[[bytes], dict[str, str]]]] = {
    "github": (github_good, github_headers),
    "slack": (slack_good, slack_headers),
}

CASES: dict[str, list[Case]] = {
    "github": [
        Case("wrong signature", 401, "INVALID_SIGNATURE", headers={"X-Hub-Signature-256": "sha256=" + "0" * 64}),
        Case("missing signature", 401, "INVALID_SIGNATURE", headers={"X-Hub-Signature-256": None}),
        Case(
            "signed with another secret",
            401,
            "INVALID_SIGNATURE",
            headers={"X-Hub-Signature-256": github_signature(github_good(), "another-secret")},
        ),
        Case("body changed after signing", 401, "INVALID_SIGNATURE", body=b'{"action": "closed"}', sign_body=False),
        Case("missing event header", 400, "MISSING_HEADER", headers={"X-GitHub-Event": None}),
        Case("missing delivery header", 400, "MISSING_HEADER", headers={"X-GitHub-Delivery": None}),
        Case("malformed JSON", 400, "MALFORMED_REQUEST", body=b'{"action": "closed",'),
        Case("JSON but not an object", 400, "MALFORMED_REQUEST", body=b'["closed"]'),
        # GitHub's default content type: the JSON must be its `payload` field, which a raw JSON body is not.
        Case("form-encoded without a payload field", 400, "MALFORMED_REQUEST", content_type="application/x-www-form-urlencoded"),
        Case("text", 415, "UNSUPPORTED_MEDIA_TYPE", content_type="text/plain"),
        Case("no content type", 415, "UNSUPPORTED_MEDIA_TYPE", content_type=""),
        Case("oversized", 413, "PAYLOAD_TOO_LARGE", declared_length=30 * MIB),
    ],
    "slack": [
        Case("wrong signature", 401, "INVALID_SIGNATURE", headers={"X-Slack-Signature": "v0=" + "0" * 64}),
        Case("missing signature", 401, "INVALID_SIGNATURE", headers={"X-Slack-Signature": None}),
        Case("missing timestamp", 401, "INVALID_SIGNATURE", headers={"X-Slack-Request-Timestamp": None}),
        Case("stale timestamp", 401, "INVALID_SIGNATURE", headers={"stale": "yes"}),
        Case("timestamp not a number", 401, "INVALID_SIGNATURE", headers={"X-Slack-Request-Timestamp": "yesterday"}),
        Case("body changed after signing", 401, "INVALID_SIGNATURE", body=b'{"type": "event_callback"}', sign_body=False),
        Case("malformed JSON", 400, "MALFORMED_REQUEST", body=b'{"type": "event_callback",'),
        Case("JSON but not an object", 400, "MALFORMED_REQUEST", body=b'"event_callback"'),
        Case("form-encoded", 415, "UNSUPPORTED_MEDIA_TYPE", content_type="application/x-www-form-urlencoded"),
        Case("oversized", 413, "PAYLOAD_TOO_LARGE", declared_length=30 * MIB),
    ],
}


@pytest.fixture
def connectors(acme: dict[str, Any], stub_server: StubServer) -> dict[str, Connector]:
    slack = FakeSlack(stub_server)
    slack.install()
    slack.add_channel("C06NRA6JLER", "general")
    principal = Principal(acme["exec"])
    github = connector_create(
        principal=principal,
        kind="github",
        name="Robots",
        config={"repositories": ["robvanderleek/create-issue-branch"], "api_url": stub_server.url, "mode": "webhook"},
        credentials={"webhook_secret": WEBHOOK_SECRET},
        scope="engineering",
    ).connector
    slack_connector = connector_create(
        principal=principal,
        kind="slack",
        name="Acme Slack",
        config={"channels": ["C06NRA6JLER"], "api_url": slack.api_url},
        credentials={"bot_token": BOT_TOKEN, "signing_secret": SIGNING_SECRET},
    ).connector
    return {"github": github, "slack": slack_connector}


class Unreadable:
    def read(self, *_args: Any) -> bytes:
        raise AssertionError("the body was read")

    readline = read


def send(connector: Connector, case: Case) -> Any:
    good, headers_for = KINDS[connector.kind]
    body = case.body if case.body is not None else good()
    headers: dict[str, str] = headers_for(body if case.sign_body else good())
    if case.headers.get("stale"):
        headers = sign(body, timestamp=int(time.time()) - 360)
    else:
        for name, value in case.headers.items():
            if value is None:
                headers.pop(name, None)
            else:
                headers[name] = value
    path = f"/api/webhooks/{connector.kind}/{connector.pk}"
    if case.declared_length is not None:
        unread: dict[str, Any] = {
            "CONTENT_LENGTH": str(case.declared_length),
            "CONTENT_TYPE": case.content_type,
            "wsgi.input": Unreadable(),
        }
        return Client().generic("POST", path, b"", headers=headers, **unread)
    return Client().generic("POST", path, body, content_type=case.content_type, headers=headers)


TABLE = [(kind, case) for kind, cases in CASES.items() for case in cases]


@pytest.mark.parametrize(("kind", "case"), TABLE, ids=[f"{kind}: {case.name}" for kind, case in TABLE])
def test_a_bad_delivery_is_refused_audited_and_writes_nothing(connectors: dict[str, Connector], kind: str, case: Case) -> None:
    connector = connectors[kind]
    before = AuditEvent.objects.filter(organization=connector.organization_id).count()
    response = send(connector, case)
    body = assert_envelope(response, case.status, case.error_code)
    assert SIGNING_SECRET not in body["message"] and WEBHOOK_SECRET not in body["message"]
    events = list(AuditEvent.objects.filter(organization=connector.organization_id).order_by("id")[before:])
    assert [(e.action, e.outcome, e.target_id) for e in events] == [("webhook.reject", "denied", str(connector.pk))]
    assert events[0].details["error_code"] == case.error_code and events[0].details["kind"] == kind
    assert not Delivery.objects.exists()
    assert not Memory.objects.filter(organization=connector.organization_id).exists()


@pytest.mark.parametrize("kind", ["github", "slack"])
def test_a_replayed_delivery_id_is_answered_as_a_duplicate_and_writes_nothing_new(
    connectors: dict[str, Connector], kind: str
) -> None:
    connector = connectors[kind]
    good, headers_for = KINDS[kind]
    body = good()
    headers = headers_for(body)
    path = f"/api/webhooks/{kind}/{connector.pk}"
    first = Client().post(path, body, content_type="application/json", headers=headers)
    assert first.status_code in (200, 202), first.content
    events = AuditEvent.objects.filter(organization=connector.organization_id)
    before = events.count()
    again = Client().post(path, body, content_type="application/json", headers=headers)
    assert (again.status_code, again.json()) == (200, {"ok": True, "duplicate": True})
    assert Delivery.objects.filter(connector=connector).count() == 1
    # Not even an audit event: the delivery's own is recorded once, after its first answer.
    assert events.count() == before


@pytest.mark.parametrize("kind", ["drive", "gmail", "notion", "jira"])
def test_kinds_without_webhooks_have_no_webhook_address(
    connectors: dict[str, Connector], acme: dict[str, Any], kind: str
) -> None:
    # A real connector id under another kind's address: still no such webhook (it used to be a 500 for
    # kinds whose source has no webhooks).
    existing = Connector.objects.create(
        organization=acme["org"], kind=kind if kind != "jira" else "github", name="x", installed_by=acme["exec"]
    )
    body = json.dumps({"hello": "world"}).encode()
    response = Client().post(f"/api/webhooks/{kind}/{existing.pk}", body, content_type="application/json")
    assert_envelope(response, 404, "NOT_FOUND")
    assert not AuditEvent.objects.filter(action="webhook.reject").exists()

"""Secrets never reach a log line, an API answer or an audit detail.

One full flow creates every kind of secret Cortex handles — passwords (sign-in, a failed sign-in,
a change), API tokens (made in the UI, used, revoked and then tried again), a connector's
credentials (given, used against the loopback GitHub stub, refused by it, rotated), its webhook
secret (given, used to sign a delivery, regenerated), a cron secret — while every log record of
every logger is captured at DEBUG. Then every captured line, every connector and audit answer
(REST and pages) and every stored audit detail is searched for each secret.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

import pytest
from django.test import Client
from github_webhooks import github_fixture, github_signature
from support.stub_server import StubResponse, StubServer

from audit.models import AuditEvent
from memories.models import ApiToken

pytestmark = pytest.mark.django_db

GITHUB_TOKEN = "ghp_leakcheck0token0" + uuid.uuid4().hex
ROTATED_TOKEN = "ghp_leakcheck0rotated" + uuid.uuid4().hex
WEBHOOK_SECRET = "whsec-leakcheck-" + uuid.uuid4().hex
CRON_SECRET = "cron-leakcheck-" + uuid.uuid4().hex
FIRST_PASSWORD = "First-leakcheck-" + uuid.uuid4().hex[:12]
NEW_PASSWORD = "Second-leakcheck-" + uuid.uuid4().hex[:12]
WRONG_PASSWORD = "Wrong-leakcheck-" + uuid.uuid4().hex[:12]


def _record_text(record: logging.LogRecord) -> str:
    """Everything a handler could write for a record: the message, its arguments, the traceback,
    and any extra attributes (structured logging puts secrets there too)."""
    parts = [record.getMessage(), repr(record.args)]
    if record.exc_info:
        parts.append(logging.Formatter().formatException(record.exc_info))
    if record.exc_text:
        parts.append(record.exc_text)
    if record.stack_info:
        parts.append(record.stack_info)
    standard = set(vars(logging.makeLogRecord({})))
    parts += [repr(value) for name, value in vars(record).items() if name not in standard]
    return "\n".join(parts)


def _sign_in(email: str, password: str) -> Client:
    client = Client()
    token = client.get("/login/").cookies["csrftoken"].value
    response = client.post("/login/", {"username": email, "password": password, "csrfmiddlewaretoken": token})
    assert response.status_code == 302, response.content[:500]
    return client


def test_a_full_flow_logs_no_secret_and_no_answer_or_audit_detail_carries_a_credential(
    acme: dict[str, Any],
    make_member: Callable[..., Any],
    outsider: Any,
    stub_server: StubServer,
    caplog: pytest.LogCaptureFixture,
    settings: Any,
    django_capture_on_commit_callbacks: Any,
) -> None:
    # Everything at DEBUG, as LOG_LEVEL=DEBUG would: loggers the settings pin (django.template,
    # django.db.backends) keep their configured level, which is part of what is tested.
    caplog.set_level(logging.DEBUG)
    for name in ("github", "urllib3", "httpx", "connectors", "memories", "audit", "cortex_site", "celery", "oauth2_provider"):
        caplog.set_level(logging.DEBUG, logger=name)
    settings.CORTEX_CRON_SECRETS = {"acme": CRON_SECRET}
    admin = make_member(acme["org"], "Executive", admin=True, password=FIRST_PASSWORD, grants={"engineering": True})
    email = admin.user.email

    # Passwords: a failed sign-in, a sign-in, a change, a sign-in with the new one.
    failed = Client()
    csrf = failed.get("/login/").cookies["csrftoken"].value
    assert failed.post("/login/", {"username": email, "password": WRONG_PASSWORD, "csrfmiddlewaretoken": csrf}).status_code == 200
    browser = _sign_in(email, FIRST_PASSWORD)
    changed = browser.post(
        "/settings/password/", {"old_password": FIRST_PASSWORD, "new_password1": NEW_PASSWORD, "new_password2": NEW_PASSWORD}
    )
    assert changed.status_code in {200, 302}, changed.content[:500]
    browser = _sign_in(email, NEW_PASSWORD)

    # An API token made in the UI (shown once), used, revoked, then tried again.
    made = browser.post("/settings/tokens/", {"name": "leak check"})
    assert made.status_code == 201
    token = ApiToken.objects.get(name="leak check", membership=admin)
    page = made.content.decode()
    api_secret = next(word for word in page.replace('"', " ").split() if word.startswith(f"ctx_{token.prefix}_"))
    bearer = {"Authorization": f"Bearer {api_secret}"}
    assert Client().get("/api/me", headers=bearer).status_code == 200
    assert browser.post(f"/settings/tokens/{token.pk}/revoke/").status_code in {200, 302}
    assert Client().get("/api/me", headers=bearer).status_code == 401

    # A connector: credentials given, used against the loopback GitHub, refused by it, rotated.
    from memories.services import tenancy

    _row, admin_secret = tenancy.token_create(membership=admin, name="admin api")
    api = {"Authorization": f"Bearer {admin_secret}"}
    client = Client()
    created = client.post(
        "/api/connectors",
        {
            "kind": "github",
            "name": "Robots",
            "scope": "engineering",
            "config": {"repositories": ["robvanderleek/create-issue-branch"], "api_url": stub_server.url},
            "credentials": {"token": GITHUB_TOKEN, "webhook_secret": WEBHOOK_SECRET},
        },
        content_type="application/json",
        headers=api,
    )
    assert created.status_code == 201, created.content
    connector_id = created.json()["id"]
    stub_server.route("GET", "/user", StubResponse(json={"login": "robot"}))
    stub_server.route(
        "GET",
        "/repos/robvanderleek/create-issue-branch",
        StubResponse(json={"full_name": "robvanderleek/create-issue-branch", "id": 1}),
    )
    assert client.post(f"/api/connectors/{connector_id}/test", {}, content_type="application/json", headers=api).json()["ok"]
    stub_server.route("GET", "/user", StubResponse(status=401, json={"message": "Bad credentials"}))
    assert not client.post(f"/api/connectors/{connector_id}/test", {}, content_type="application/json", headers=api).json()["ok"]
    # The token really went to GitHub (so the flow exercised it) — and only there.
    assert f"token {GITHUB_TOKEN}" in [r.headers["authorization"] for r in stub_server.requests_to("/user")]

    # The webhook secret signs a delivery; then it is regenerated, and the new one is shown once.
    body = github_fixture("pull_request__closed_merged.json")
    with django_capture_on_commit_callbacks(execute=True):
        delivered = Client().post(
            f"/api/webhooks/github/{connector_id}",
            data=body,
            content_type="application/json",
            headers={
                "X-GitHub-Event": "pull_request",
                "X-GitHub-Delivery": str(uuid.uuid4()),
                "X-Hub-Signature-256": github_signature(body, WEBHOOK_SECRET),
            },
        )
    assert delivered.status_code == 200, delivered.content
    rotated = client.post(
        f"/api/connectors/{connector_id}/credentials",
        {"credentials": {"token": ROTATED_TOKEN, "webhook_secret": ""}},
        content_type="application/json",
        headers=api,
    )
    assert rotated.status_code == 200, rotated.content
    new_webhook_secret = rotated.json()["webhook_secret"]

    # The cron endpoint, with its secret right and wrong.
    cron = Client().post("/api/cron/connectors?organization=acme", headers={"Authorization": f"Bearer {CRON_SECRET}"})
    wrong_cron = Client().post("/api/cron/connectors?organization=acme", headers={"Authorization": "Bearer not-the-secret"})
    assert cron.status_code < 500 and wrong_cron.status_code in {401, 403, 404}

    service_passwords = [urlsplit(str(settings.REDIS_URL)).password, settings.DATABASES["default"].get("PASSWORD")]
    secrets = {
        "password (first)": FIRST_PASSWORD,
        "password (new)": NEW_PASSWORD,
        "password (wrong attempt)": WRONG_PASSWORD,
        "API token (UI, revoked)": api_secret,
        "API token (admin)": admin_secret,
        "GitHub token": GITHUB_TOKEN,
        "GitHub token (rotated)": ROTATED_TOKEN,
        "webhook secret": WEBHOOK_SECRET,
        "webhook secret (regenerated)": new_webhook_secret,
        "cron secret": CRON_SECRET,
        "secret key": settings.SECRET_KEY,
        **{f"service password {n}": password for n, password in enumerate(service_passwords) if password},
    }

    # 1. No log line, of any logger at any level, carries a secret.
    assert len(caplog.records) > 10, "the flow logged next to nothing: is logging captured?"
    leaked = [
        f"{what} in {record.name}:{record.levelname}: {record.getMessage()[:120]}"
        for record in caplog.records
        for what, secret in secrets.items()
        if secret in _record_text(record)
    ]
    assert leaked == []

    # 2. Connector answers (REST and pages) and audit answers never carry a credential.
    credentials = {name: secrets[name] for name in ("GitHub token", "GitHub token (rotated)", "webhook secret")}
    answers = {
        "list": client.get("/api/connectors", headers=api),
        "detail": client.get(f"/api/connectors/{connector_id}", headers=api),
        "runs": client.get(f"/api/connectors/{connector_id}/runs", headers=api),
        "audit": client.get("/api/audit?limit=100", headers=api),  # the API's largest page
        "audit export": client.get("/api/audit/export", headers=api),
        "connectors page": browser.get("/connectors/"),
        "connector page": browser.get(f"/connectors/{connector_id}/"),
        "audit page": browser.get("/audit/"),
    }
    for event in AuditEvent.objects.filter(organization=acme["org"]).order_by("id"):
        answers[f"audit event {event.action}"] = browser.get(f"/audit/{event.pk}/")
    for run in client.get(f"/api/connectors/{connector_id}/runs", headers=api).json().get("results", []):
        answers[f"run {run['id']}"] = client.get(f"/api/connectors/{connector_id}/runs/{run['id']}", headers=api)
    for where, response in answers.items():
        assert response.status_code == 200, (where, response.status_code)
        text = response.getvalue().decode()  # streamed answers (the audit export) too
        for what, secret in credentials.items():
            assert secret not in text, f"{what} in the {where} answer"
        assert new_webhook_secret not in text, f"the regenerated webhook secret shown again in the {where} answer"

    # 3. The stored audit details themselves (what exports, checkpoints and verify read).
    stored = json.dumps(list(AuditEvent.objects.values("action", "details", "target_id")), default=str)
    assert AuditEvent.objects.filter(action__startswith="connector.").count() >= 3
    for what, secret in secrets.items():
        assert secret not in stored, f"{what} in an audit detail"

    # 4. The outsider sees none of it: foreign connectors look missing.
    foreign = Client().get(f"/api/connectors/{connector_id}", headers={"Authorization": f"Bearer {_outsider_token(outsider)}"})
    assert foreign.status_code == 404


def _outsider_token(outsider: Any) -> str:
    from memories.services import tenancy

    _row, secret = tenancy.token_create(membership=outsider, name="outsider")
    return secret


def test_debug_pages_mask_the_database_password_too(settings: Any) -> None:
    """With the embedded PostgreSQL now password-protected, DATABASES and every URL setting hide it."""
    from cortex_site.reporting import CredentialMaskingFilter

    password = settings.DATABASES["default"].get("PASSWORD")
    assert password, "the embedded PostgreSQL of the test run wants a password"
    safe = CredentialMaskingFilter().get_safe_settings()
    assert password not in repr(safe)

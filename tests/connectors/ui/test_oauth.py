""" "Connect Google account" and "Connect Notion workspace" through Django's test client, with the
provider's consent screen and token endpoint at the loopback stub (authlib and notion-client really
send their requests), then one sync with the granted token (google-auth refreshes with it).

The provider fakes are in support/oauth_providers.py (documented response shapes: no real captures exist).
"""

from __future__ import annotations

import html
import logging
import re
import socket
import time
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import parse_qs, quote, urlsplit

import httpx
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from django.core import signing
from support import principal, signed_in
from support.gmail_mailbox import FakeMailbox
from support.notion_workspace import FakeNotion, block
from support.oauth_providers import GMAIL_SCOPE, FakeGoogle, FakeNotionOAuth
from support.stub_server import StubServer
from support.sync_runs import run_sync

from audit.models import AuditEvent
from connectors.models import Connector, SyncRun
from connectors.services.connectors import connector_create, connector_rotate_credentials
from memories.models import Membership, Memory

pytestmark = pytest.mark.django_db

CALLBACK = {
    "google": "http://testserver/connectors/oauth/google/callback/",
    "notion": "http://testserver/connectors/oauth/notion/callback/",
}
REFUSED = "This sign-in link is not valid any more"


@pytest.fixture
def google(stub_server: StubServer, settings: Any) -> FakeGoogle:
    settings.CORTEX_GOOGLE_OAUTH_AUTH_URI = f"{stub_server.url}/o/oauth2/v2/auth"
    settings.CORTEX_GOOGLE_OAUTH_CLIENT_ID = ""
    settings.CORTEX_GOOGLE_OAUTH_CLIENT_SECRET = ""
    fake = FakeGoogle(stub_server, FakeMailbox(stub_server))
    fake.install()
    return fake


@pytest.fixture
def notion_oauth(stub_server: StubServer, settings: Any) -> FakeNotionOAuth:
    settings.CORTEX_NOTION_REQUESTS_PER_SECOND = 0
    settings.CORTEX_NOTION_OAUTH_CLIENT_ID = ""
    settings.CORTEX_NOTION_OAUTH_CLIENT_SECRET = ""
    fake = FakeNotionOAuth(stub_server)
    fake.install()
    return fake


def gmail_form(stub: StubServer, google: FakeGoogle, **overrides: Any) -> dict[str, Any]:
    data = {
        "name": "Team inbox",
        "query": "",
        "label": "",
        "client_id": google.client[0],
        "client_secret": google.client[1],
        "refresh_token": "",
        "credentials_json": "",
        "token_uri": f"{stub.url}/token",
        "api_url": stub.url,
        "scope": "engineering",
        "clearance_min": "Employee",
        "oauth": "1",
    }
    data.update(overrides)
    return data


def authorize_url(response: Any) -> str:
    """The provider address the interstitial page sends the browser to."""
    assert response.status_code == 200, response.content[:400]
    assert response["Cache-Control"] == "no-store"
    found = re.search(r'href="([^"]+)" data-oauth-authorize', response.content.decode())
    assert found, response.content.decode()[:400]
    return html.unescape(found.group(1))


def consent(url: str) -> str:
    """The admin at the consent screen: the provider redirects back; returns the callback path and query."""
    answer = httpx.get(url, follow_redirects=False)
    assert answer.status_code == 302
    back = urlsplit(answer.headers["location"])
    return f"{back.path}?{back.query}"


def page_messages(client: Any, response: Any) -> str:
    assert response.status_code == 302
    return client.get(response["Location"]).content.decode()


def assert_no_secret(texts: list[str], *secrets_: str) -> None:
    for text in texts:
        for secret in secrets_:
            assert secret not in text


def test_connect_google_account_creates_the_gmail_connector_and_its_sync_refreshes_with_the_granted_token(
    acme: dict[str, Any], stub_server: StubServer, google: FakeGoogle, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    google.mailbox.add(text="Budget approved for Q3.", date=datetime.now(UTC) - timedelta(hours=2), subject="Budget")
    client = signed_in(acme["exec"])
    started = client.post("/connectors/new/gmail/", gmail_form(stub_server, google))
    url = authorize_url(started)
    assert Connector.objects.count() == 0  # nothing exists until Google answers

    parts = urlsplit(url)
    query = {name: values[-1] for name, values in parse_qs(parts.query).items()}
    assert f"{parts.scheme}://{parts.netloc}{parts.path}" == f"{stub_server.url}/o/oauth2/v2/auth"
    assert query["client_id"] == google.client[0] and query["response_type"] == "code"
    assert query["redirect_uri"] == CALLBACK["google"] and query["scope"] == GMAIL_SCOPE
    assert (query["access_type"], query["prompt"], query["code_challenge_method"]) == ("offline", "consent", "S256")
    assert len(query["code_challenge"]) == 43 and query["state"]
    assert google.client[1] not in url and google.client[1] not in started.content.decode()

    done = client.get(consent(url))
    assert done.status_code == 302
    connector = Connector.objects.get()
    assert done["Location"] == f"/connectors/{connector.pk}/"
    page = client.get(done["Location"]).content.decode()
    assert "Team inbox is connected to Google" in page
    assert connector.kind == "gmail" and connector.config["api_url"] == stub_server.url
    assert connector.scope is not None and connector.scope.slug == "engineering"
    assert connector.credentials == {
        "client_id": google.client[0],
        "client_secret": google.client[1],
        "refresh_token": google.refresh_token,
        "token_uri": f"{stub_server.url}/token",
    }
    assert google.refresh_token not in connector.credentials_encrypted  # encrypted at rest

    run = run_sync(connector)
    assert (run.status, run.items_created) == (SyncRun.Status.SUCCEEDED, 1), run.error
    assert Memory.objects.filter(title="Budget").exists()
    refreshes = [r.form() for r in stub_server.requests_to("/token") if r.form().get("grant_type") == "refresh_token"]
    assert refreshes and refreshes[0]["refresh_token"] == google.refresh_token

    connected = AuditEvent.objects.get(action="connector.oauth_connected")
    assert connected.target_id == str(connector.pk)
    assert connected.details["provider"] == "google" and connected.details["created"] is True
    audit = [str(e.details) for e in AuditEvent.objects.all()]
    assert_no_secret(
        [page, started.content.decode(), caplog.text, *audit], google.refresh_token, google.access_token, google.client[1]
    )


def test_reconnecting_an_existing_connector_uses_its_stored_client_and_replaces_the_old_refresh_token(
    acme: dict[str, Any], stub_server: StubServer, google: FakeGoogle
) -> None:
    connector = connector_create(
        principal=principal(acme["exec"]),
        kind="gmail",
        name="Ada's mail",
        config={"api_url": stub_server.url},
        credentials={
            "client_id": google.client[0],
            "client_secret": google.client[1],
            "refresh_token": "1//revoked-long-ago",
            "token_uri": f"{stub_server.url}/token",
        },
    ).connector
    client = signed_in(acme["exec"])
    form = gmail_form(stub_server, google, name="Ada's mail", client_id="", client_secret="", token_uri="")
    url = authorize_url(client.post(f"/connectors/{connector.pk}/oauth/", form))
    assert parse_qs(urlsplit(url).query)["client_id"] == [google.client[0]]
    done = client.get(consent(url))
    assert done["Location"] == f"/connectors/{connector.pk}/"
    assert "Google access for Ada" in client.get(done["Location"]).content.decode()
    connector.refresh_from_db()
    assert connector.credentials["refresh_token"] == google.refresh_token
    assert connector.credentials["token_uri"] == f"{stub_server.url}/token"
    assert Connector.objects.count() == 1


def test_a_service_account_connector_switches_to_the_granted_user_credentials(
    acme: dict[str, Any], stub_server: StubServer, google: FakeGoogle, inbox: Connector
) -> None:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    service_account = {
        "type": "service_account",
        "client_email": "sa@acme.iam",
        "private_key": key.decode(),
        "subject": "ada@acme.test",
    }
    connector_rotate_credentials(principal=principal(acme["exec"]), connector_id=inbox.pk, credentials=service_account)
    inbox.refresh_from_db()
    assert inbox.credentials["type"] == "service_account"
    client = signed_in(acme["exec"])
    form = gmail_form(stub_server, google, name="Team inbox")
    done = client.get(consent(authorize_url(client.post(f"/connectors/{inbox.pk}/oauth/", form))))
    assert done["Location"] == f"/connectors/{inbox.pk}/"
    inbox.refresh_from_db()
    assert set(inbox.credentials) == {"client_id", "client_secret", "refresh_token", "token_uri"}
    assert inbox.credentials["refresh_token"] == google.refresh_token
    assert AuditEvent.objects.filter(action="connector.oauth_connected", target_id=str(inbox.pk)).exists()


def test_drive_asks_for_read_access_to_drive(acme: dict[str, Any], stub_server: StubServer, google: FakeGoogle) -> None:
    form = gmail_form(stub_server, google, name="Shared docs", folder_id="")
    url = authorize_url(signed_in(acme["exec"]).post("/connectors/new/drive/", form))
    assert parse_qs(urlsplit(url).query)["scope"] == ["https://www.googleapis.com/auth/drive.readonly"]
    assert "Connect Google account" in signed_in(acme["exec"]).get("/connectors/new/drive/").content.decode()


def test_a_state_works_once_and_a_tampered_one_not_at_all(
    acme: dict[str, Any], stub_server: StubServer, google: FakeGoogle
) -> None:
    client = signed_in(acme["exec"])
    callback = consent(authorize_url(client.post("/connectors/new/gmail/", gmail_form(stub_server, google))))
    assert client.get(callback).status_code == 302
    assert Connector.objects.count() == 1

    again = client.get(callback)
    assert again["Location"] == "/connectors/"
    assert REFUSED in page_messages(client, again)
    state = parse_qs(urlsplit(callback).query)["state"][0]
    tampered = client.get(f"/connectors/oauth/google/callback/?code=x&state={quote(state[:-2] + 'xx')}")
    assert REFUSED in page_messages(client, tampered)
    assert Connector.objects.count() == 1
    reasons = list(
        AuditEvent.objects.filter(action="connector.oauth_failed").order_by("id").values_list("details__reason", flat=True)
    )
    assert reasons == ["state_used_or_expired", "invalid_state"]


def test_an_expired_state_is_refused_even_while_the_sign_in_is_still_stored(
    acme: dict[str, Any], stub_server: StubServer, google: FakeGoogle, monkeypatch: pytest.MonkeyPatch
) -> None:
    client = signed_in(acme["exec"])
    # The state is signed as if the admin had opened Google's consent an hour ago.
    signed_at = signing.b62_encode(int(time.time()) - 3600)
    with monkeypatch.context() as patched:
        patched.setattr(signing.TimestampSigner, "timestamp", lambda self: signed_at)
        url = authorize_url(client.post("/connectors/new/gmail/", gmail_form(stub_server, google)))
    done = client.get(consent(url))
    assert REFUSED in page_messages(client, done)
    assert not Connector.objects.exists()
    assert AuditEvent.objects.get(action="connector.oauth_failed").details["reason"] == "state_expired"


def test_access_denied_at_google_says_so_on_the_connector_page_and_changes_nothing(
    acme: dict[str, Any], stub_server: StubServer, google: FakeGoogle, inbox: Connector
) -> None:
    before = inbox.credentials_encrypted
    google.deny = True
    client = signed_in(acme["exec"])
    done = client.get(consent(authorize_url(client.post(f"/connectors/{inbox.pk}/oauth/", gmail_form(stub_server, google)))))
    assert done["Location"] == f"/connectors/{inbox.pk}/"
    assert "Google sign-in was cancelled or access was not granted" in page_messages(client, done)
    inbox.refresh_from_db()
    assert inbox.credentials_encrypted == before
    failed = AuditEvent.objects.get(action="connector.oauth_failed")
    assert (failed.details["reason"], failed.target_id) == ("access_denied", str(inbox.pk))


def test_a_code_google_refuses_says_invalid_grant_and_creates_nothing(
    acme: dict[str, Any], stub_server: StubServer, google: FakeGoogle
) -> None:
    client = signed_in(acme["exec"])
    callback = consent(authorize_url(client.post("/connectors/new/gmail/", gmail_form(stub_server, google))))
    done = client.get(re.sub(r"code=[^&]+", "code=4/not-issued", callback))
    assert done["Location"] == "/connectors/new/gmail/"
    assert "invalid_grant" in page_messages(client, done)
    assert not Connector.objects.exists()
    assert AuditEvent.objects.get(action="connector.oauth_failed").details["reason"] == "invalid_grant"


def test_without_an_oauth_client_the_form_says_how_to_configure_one(
    acme: dict[str, Any], stub_server: StubServer, google: FakeGoogle, settings: Any
) -> None:
    client = signed_in(acme["exec"])
    response = client.post("/connectors/new/gmail/", gmail_form(stub_server, google, client_id="", client_secret=""))
    assert response.status_code == 400
    assert "CORTEX_GOOGLE_OAUTH_CLIENT_ID" in response.content.decode()
    assert not stub_server.requests_to("/o/oauth2/v2/auth")

    settings.CORTEX_GOOGLE_OAUTH_CLIENT_ID, settings.CORTEX_GOOGLE_OAUTH_CLIENT_SECRET = google.client
    url = authorize_url(client.post("/connectors/new/gmail/", gmail_form(stub_server, google, client_id="", client_secret="")))
    assert client.get(consent(url)).status_code == 302
    assert Connector.objects.get().credentials["client_id"] == google.client[0]


def test_members_and_other_organizations_cannot_start_or_finish_a_connection(
    acme: dict[str, Any], stub_server: StubServer, google: FakeGoogle, inbox: Connector, outsider: Membership
) -> None:
    member = signed_in(acme["manager"])
    assert member.post("/connectors/new/gmail/", gmail_form(stub_server, google)).status_code == 403
    assert member.post(f"/connectors/{inbox.pk}/oauth/", gmail_form(stub_server, google)).status_code == 403
    stranger = signed_in(outsider)
    assert stranger.post(f"/connectors/{inbox.pk}/oauth/", gmail_form(stub_server, google)).status_code == 404
    assert (
        stranger.post("/connectors/00000000-0000-4000-8000-000000000000/oauth/", gmail_form(stub_server, google)).status_code
        == 404
    )
    assert not stub_server.requests_to("/o/oauth2/v2/auth")

    admin = signed_in(acme["exec"])
    before = inbox.credentials_encrypted
    callback = consent(authorize_url(admin.post(f"/connectors/{inbox.pk}/oauth/", gmail_form(stub_server, google))))
    # The link reaches someone else: another organization's admin, a member, another session of the same admin.
    assert stranger.get(callback)["Location"] == "/connectors/"
    assert member.get(callback).status_code == 403
    other_session = signed_in(acme["exec"])
    assert REFUSED in page_messages(other_session, other_session.get(callback))
    inbox.refresh_from_db()
    assert inbox.credentials_encrypted == before
    assert not AuditEvent.objects.filter(
        action="connector.oauth_failed", organization=outsider.organization, target_id=str(inbox.pk)
    )
    # Their attempts did not spend it: the admin who started it still completes it.
    assert admin.get(callback)["Location"] == f"/connectors/{inbox.pk}/"
    inbox.refresh_from_db()
    assert inbox.credentials["refresh_token"] == google.refresh_token


def notion_form(stub: StubServer, fake: FakeNotionOAuth, **overrides: Any) -> dict[str, Any]:
    data = {
        "name": "Acme wiki",
        "token": "",
        "databases": "",
        "oauth_client_id": fake.client[0],
        "oauth_client_secret": fake.client[1],
        "api_url": stub.url,
        "scope": "engineering",
        "clearance_min": "Employee",
        "oauth": "1",
    }
    data.update(overrides)
    return data


def test_connect_notion_workspace_stores_the_access_token_and_the_sync_reads_with_it(
    acme: dict[str, Any], stub_server: StubServer, notion_oauth: FakeNotionOAuth, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    workspace = FakeNotion(stub_server)
    workspace.install()
    workspace.page("Runbook", [block("paragraph", "Restart the robot arm twice.")], edited=datetime.now(UTC) - timedelta(hours=1))
    client = signed_in(acme["exec"])
    started = client.post("/connectors/new/notion/", notion_form(stub_server, notion_oauth))
    url = authorize_url(started)
    parts = urlsplit(url)
    query = {name: values[-1] for name, values in parse_qs(parts.query).items()}
    assert f"{parts.scheme}://{parts.netloc}{parts.path}" == f"{stub_server.url}/v1/oauth/authorize"
    assert (query["client_id"], query["response_type"], query["owner"]) == (notion_oauth.client[0], "code", "user")
    assert query["redirect_uri"] == CALLBACK["notion"] and query["state"]

    done = client.get(consent(url))
    connector = Connector.objects.get()
    assert done["Location"] == f"/connectors/{connector.pk}/"
    page = client.get(done["Location"]).content.decode()
    assert "Acme wiki is connected to Notion" in page
    assert connector.credentials == {"token": notion_oauth.access_token}
    exchange = stub_server.requests_to("/v1/oauth/token")[0]
    assert exchange.json() == {
        "grant_type": "authorization_code",
        "code": exchange.json()["code"],
        "redirect_uri": CALLBACK["notion"],
    }

    run = run_sync(connector)
    assert (run.status, run.items_created) == (SyncRun.Status.SUCCEEDED, 1), run.error
    searches = stub_server.requests_to("/v1/search")
    assert searches and searches[0].headers["authorization"] == f"Bearer {notion_oauth.access_token}"
    connected = AuditEvent.objects.get(action="connector.oauth_connected")
    assert connected.details["workspace_name"] == "Acme's Notion"
    audit = [str(e.details) for e in AuditEvent.objects.all()]
    assert_no_secret([page, started.content.decode(), caplog.text, *audit], notion_oauth.access_token, notion_oauth.client[1])


def test_reconnecting_notion_with_the_configured_client_and_a_refused_code(
    acme: dict[str, Any], stub_server: StubServer, notion_oauth: FakeNotionOAuth, settings: Any, outsider: Membership
) -> None:
    settings.CORTEX_NOTION_OAUTH_CLIENT_ID, settings.CORTEX_NOTION_OAUTH_CLIENT_SECRET = notion_oauth.client
    connector = connector_create(
        principal=principal(acme["exec"]),
        kind="notion",
        name="Acme wiki",
        config={"api_url": stub_server.url},
        credentials={"token": "ntn_internal-old"},
    ).connector
    client = signed_in(acme["exec"])
    form = notion_form(stub_server, notion_oauth, oauth_client_id="", oauth_client_secret="", api_url="")
    assert signed_in(outsider).post(f"/connectors/{connector.pk}/oauth/", form).status_code == 404
    assert signed_in(acme["manager"]).post(f"/connectors/{connector.pk}/oauth/", form).status_code == 403

    callback = consent(authorize_url(client.post(f"/connectors/{connector.pk}/oauth/", form)))
    refused = client.get(re.sub(r"code=[^&]+", "code=not-issued", callback))
    assert refused["Location"] == f"/connectors/{connector.pk}/"
    assert "Notion refused the sign-in code (invalid_grant)" in page_messages(client, refused)
    connector.refresh_from_db()
    assert connector.credentials == {"token": "ntn_internal-old"}

    callback = consent(authorize_url(client.post(f"/connectors/{connector.pk}/oauth/", form)))
    assert client.get(callback)["Location"] == f"/connectors/{connector.pk}/"
    connector.refresh_from_db()
    assert connector.credentials == {"token": notion_oauth.access_token}


def test_an_unreachable_token_endpoint_is_said_and_creates_nothing(
    acme: dict[str, Any], stub_server: StubServer, google: FakeGoogle
) -> None:
    with socket.socket() as probe:  # a loopback port nobody listens on
        probe.bind(("127.0.0.1", 0))
        closed = probe.getsockname()[1]
    client = signed_in(acme["exec"])
    form = gmail_form(stub_server, google, token_uri=f"http://127.0.0.1:{closed}/token")
    done = client.get(consent(authorize_url(client.post("/connectors/new/gmail/", form))))
    assert done["Location"] == "/connectors/new/gmail/"
    assert "token endpoint could not be reached" in page_messages(client, done)
    assert not Connector.objects.exists()
    assert AuditEvent.objects.get(action="connector.oauth_failed").details["reason"] == "provider_unreachable"

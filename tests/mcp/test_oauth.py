"""OAuth 2.1 for MCP clients, end to end on loopback with the official SDK's OAuth client provider:
discovery → dynamic registration → authorize (a test user consents) → token → tool call →
refresh → revoke → 401; and the failures (no PKCE, plain PKCE, wrong redirect, wrong or missing
resource, expired, revoked, a client registering a redirect it does not own)."""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
import socket
import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import anyio
import httpx2
import pytest
import uvicorn
from django.conf import settings
from django.test import Client, override_settings
from django.utils import timezone
from mcp.client import Client as McpClient
from mcp.client.auth import OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientInformationFull, OAuthClientMetadata, OAuthToken

from memories.models import ApiToken, OAuthGrant
from memories.services.tenancy import token_revoke

pytestmark = pytest.mark.django_db(transaction=True)

REDIRECT = "http://127.0.0.1:33418/callback"


@pytest.fixture(scope="module")
def oauth_server() -> Iterator[str]:
    """A live Cortex whose CORTEX_BASE_URL is its real address, so metadata, issuer and audience
    name the server the client really talks to."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    overrides = override_settings(CORTEX_BASE_URL=url, OAUTH2_PROVIDER={**settings.OAUTH2_PROVIDER, "OIDC_ISS_ENDPOINT": url})
    overrides.enable()
    from cortex_site.asgi import create_application

    server = uvicorn.Server(uvicorn.Config(create_application(), lifespan="on", log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "the OAuth test server did not start"
        time.sleep(0.02)
    yield url
    server.should_exit = True
    thread.join(timeout=10)
    sock.close()
    overrides.disable()


class MemoryStorage:
    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client_info: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client_info

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client_info = client_info


def consent(browser: Client, authorize_url: str, **choices: Any) -> str:
    """The person opens the authorization URL and allows; returns where Cortex redirects them."""
    parts = urlsplit(authorize_url)
    page = browser.get(f"{parts.path}?{parts.query}")
    assert page.status_code == 200, page.content[:500]
    form = page.context["form"]
    data = {name: value for name, value in form.initial.items() if value is not None and name not in {"scopes"}}
    data.update(allow="true", expires="30")
    data["scopes"] = choices.pop("scopes", form.initial["scopes"])
    data.update(choices)
    answer = browser.post(f"{parts.path}?{parts.query}", data)
    assert answer.status_code == 302, answer.content[:500]
    return answer["Location"]


def sdk_flow(server: str, browser: Client, storage: MemoryStorage, tool: str = "recall", **arguments: Any) -> Any:
    """Run the SDK's whole OAuth dance, then one tool call, as Claude Desktop would."""
    captured: dict[str, str] = {}

    async def redirect_handler(url: str) -> None:
        captured["location"] = await anyio.to_thread.run_sync(consent, browser, url)

    async def callback_handler() -> AuthorizationCodeResult:
        query = parse_qs(urlsplit(captured["location"]).query)
        return AuthorizationCodeResult(code=query["code"][0], state=query["state"][0], iss=query.get("iss", [None])[0])

    auth = OAuthClientProvider(
        server_url=f"{server}/mcp/",
        client_metadata=OAuthClientMetadata(
            client_name="Test Desktop",
            redirect_uris=[REDIRECT],  # type: ignore[list-item]
            grant_types=["authorization_code", "refresh_token"],
            response_types=["code"],
            token_endpoint_auth_method="none",
        ),
        storage=storage,
        redirect_handler=redirect_handler,
        callback_handler=callback_handler,
    )

    async def flow() -> Any:
        async with (
            httpx2.AsyncClient(auth=auth, timeout=30) as http,
            McpClient(streamable_http_client(f"{server}/mcp/", http_client=http)) as client,
        ):
            return await client.call_tool(tool, arguments)

    return anyio.run(flow)


def signed_in_browser(membership: Any) -> Client:
    browser = Client()
    browser.force_login(membership.user)
    return browser


def test_metadata_documents_name_this_server(oauth_server: str) -> None:
    with httpx2.Client() as http:
        meta = http.get(f"{oauth_server}/.well-known/oauth-authorization-server").json()
        resource = http.get(f"{oauth_server}/.well-known/oauth-protected-resource/mcp").json()
    assert meta["issuer"] == oauth_server
    assert meta["authorization_endpoint"] == f"{oauth_server}/oauth/authorize/"
    assert meta["token_endpoint"] == f"{oauth_server}/oauth/token/"
    assert meta["registration_endpoint"] == f"{oauth_server}/oauth/register/"
    assert meta["revocation_endpoint"] == f"{oauth_server}/oauth/revoke_token/"
    assert meta["code_challenge_methods_supported"] == ["S256"]
    assert meta["response_types_supported"] == ["code"]
    assert set(meta["grant_types_supported"]) == {"authorization_code", "refresh_token"}
    assert meta["client_id_metadata_document_supported"] is True
    assert resource["resource"] == f"{oauth_server}/mcp/"
    assert [s.rstrip("/") for s in resource["authorization_servers"]] == [oauth_server]


def test_claude_style_client_connects_calls_refreshes_and_is_cut_off_when_revoked(
    oauth_server: str, acme: dict[str, Any], make_member: Any
) -> None:
    from support import remember

    remember(acme["employee"], "The deploy freeze starts on Thursdays at noon.", scope="engineering", title="Deploy freeze")
    remember(acme["exec"], "Board deck lives in the leadership drive.", scope="sales", title="Board deck")
    browser = signed_in_browser(acme["employee"])
    storage = MemoryStorage()

    result = sdk_flow(oauth_server, browser, storage, query="deploy freeze")
    assert not result.is_error, result.content
    assert "Deploy freeze" in result.content[0].text
    grant = OAuthGrant.objects.select_related("token").get()
    assert grant.token.name == "OAuth: Test Desktop"
    assert grant.token.membership_id == acme["employee"].pk
    assert grant.resource.rstrip("/") == f"{oauth_server}/mcp"
    assert storage.tokens is not None and storage.tokens.refresh_token

    # Refresh rotates: the old refresh token stops working, the new access token acts as the same grant.
    old_refresh = storage.tokens.refresh_token
    with httpx2.Client() as http:
        refreshed = http.post(
            f"{oauth_server}/oauth/token/",
            data={
                "grant_type": "refresh_token",
                "refresh_token": old_refresh,
                "client_id": storage.client_info.client_id,  # type: ignore[union-attr]
                "resource": f"{oauth_server}/mcp/",
            },
        )
        assert refreshed.status_code == 200, refreshed.text
        new_tokens = refreshed.json()
        assert new_tokens["refresh_token"] != old_refresh
    assert _initialize(oauth_server, new_tokens["access_token"]).status_code == 200

    # Revoking the grant in Settings → API tokens ends the access at the next request.
    token_revoke(token=ApiToken.objects.get(pk=grant.token_id))
    assert _initialize(oauth_server, new_tokens["access_token"]).status_code == 401


def _initialize(server: str, access_token: str) -> httpx2.Response:
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
    }
    with httpx2.Client() as http:
        return http.post(
            f"{server}/mcp/",
            json=body,
            headers={"Authorization": f"Bearer {access_token}", "Accept": "application/json, text/event-stream"},
        )


def test_oauth_agent_sees_only_the_scopes_consented_to(oauth_server: str, acme: dict[str, Any]) -> None:
    from support import remember

    remember(acme["manager"], "Q3 sales target is 4.2M.", scope="sales", title="Sales target")
    remember(acme["manager"], "Staging runs on the blue cluster.", scope="engineering", title="Staging cluster")
    browser = signed_in_browser(acme["manager"])
    key = str(acme["manager"].pk)

    captured: dict[str, str] = {}
    storage = MemoryStorage()

    def consent_engineering_only(b: Client, url: str) -> str:
        return consent(b, url, scopes=[f"{key}:engineering"], read_only="on")

    async def redirect_handler(url: str) -> None:
        captured["location"] = await anyio.to_thread.run_sync(consent_engineering_only, browser, url)

    async def callback_handler() -> AuthorizationCodeResult:
        query = parse_qs(urlsplit(captured["location"]).query)
        return AuthorizationCodeResult(code=query["code"][0], state=query["state"][0], iss=query.get("iss", [None])[0])

    auth = OAuthClientProvider(
        server_url=f"{oauth_server}/mcp/",
        client_metadata=OAuthClientMetadata(
            client_name="Narrow agent",
            redirect_uris=[REDIRECT],  # type: ignore[list-item]
            token_endpoint_auth_method="none",
        ),
        storage=storage,
        redirect_handler=redirect_handler,
        callback_handler=callback_handler,
    )

    async def flow() -> tuple[Any, Any]:
        async with (
            httpx2.AsyncClient(auth=auth, timeout=30) as http,
            McpClient(streamable_http_client(f"{oauth_server}/mcp/", http_client=http)) as client,
        ):
            recall = await client.call_tool("recall", {"query": "sales target"})
            write = await client.call_tool("remember", {"content": "An agent note", "scope": "engineering"})
            return recall, write

    recall, write = anyio.run(flow)
    assert "Sales target" not in json.dumps([c.model_dump() for c in recall.content])
    assert write.is_error  # read-only consent
    token = OAuthGrant.objects.get().token
    assert token.read_only and token.narrowed
    assert sorted(token.scopes.values_list("slug", flat=True)) == ["engineering"]


# -- failures, driven by hand against the endpoints --------------------------------------------
def _register(server: str, **extra: Any) -> dict[str, Any]:
    with httpx2.Client() as http:
        answer = http.post(
            f"{server}/oauth/register/",
            json={"client_name": "Hand client", "redirect_uris": [REDIRECT], "token_endpoint_auth_method": "none", **extra},
        )
    assert answer.status_code == 201, answer.text
    return answer.json()


def _pkce() -> tuple[str, str]:
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    return verifier, challenge


def _authorize_query(client_id: str, server: str, **overrides: Any) -> str:
    _verifier, challenge = _pkce()
    params = {
        "response_type": "code",
        "client_id": client_id,
        "redirect_uri": REDIRECT,
        "state": "st-1",
        "code_challenge": challenge,
        "code_challenge_method": "S256",
        "resource": f"{server}/mcp/",
        "scope": "mcp",
    }
    params.update(overrides)
    return "/oauth/authorize/?" + urlencode({k: v for k, v in params.items() if v is not None})


def test_authorize_refuses_missing_or_plain_pkce(oauth_server: str, acme: dict[str, Any]) -> None:
    client = _register(oauth_server)
    browser = signed_in_browser(acme["employee"])
    missing = browser.get(_authorize_query(client["client_id"], oauth_server, code_challenge=None, code_challenge_method=None))
    assert missing.status_code == 302 and "error=invalid_request" in missing["Location"]
    plain = browser.get(
        _authorize_query(client["client_id"], oauth_server, code_challenge="x" * 43, code_challenge_method="plain")
    )
    assert plain.status_code == 302 and "error=invalid_request" in plain["Location"]
    assert not OAuthGrant.objects.exists()


def test_authorize_refuses_a_foreign_or_missing_resource(oauth_server: str, acme: dict[str, Any]) -> None:
    client = _register(oauth_server)
    browser = signed_in_browser(acme["employee"])
    for resource in ("https://evil.example/mcp/", None):
        answer = browser.get(_authorize_query(client["client_id"], oauth_server, resource=resource))
        assert answer.status_code == 302, resource
        assert "error=invalid_target" in answer["Location"]
    assert not OAuthGrant.objects.exists()


def test_authorize_never_redirects_to_an_unregistered_uri(oauth_server: str, acme: dict[str, Any]) -> None:
    client = _register(oauth_server)
    browser = signed_in_browser(acme["employee"])
    answer = browser.get(_authorize_query(client["client_id"], oauth_server, redirect_uri="https://evil.example/cb"))
    assert answer.status_code == 400  # shown to the person, never redirected to the attacker
    assert "evil.example" not in answer.get("Location", "")


def test_registration_refuses_a_non_loopback_plain_http_redirect(oauth_server: str) -> None:
    with httpx2.Client() as http:
        answer = http.post(
            f"{oauth_server}/oauth/register/",
            json={"client_name": "Sneaky", "redirect_uris": ["http://evil.example/cb"], "token_endpoint_auth_method": "none"},
        )
    assert answer.status_code == 400


def test_anonymous_person_is_sent_to_sign_in_first(oauth_server: str) -> None:
    client = _register(oauth_server)
    answer = Client().get(_authorize_query(client["client_id"], oauth_server))
    assert answer.status_code == 302 and answer["Location"].startswith("/login/")


def test_a_token_for_another_audience_or_expired_is_refused(oauth_server: str, acme: dict[str, Any]) -> None:
    storage = MemoryStorage()
    result = sdk_flow(oauth_server, signed_in_browser(acme["employee"]), storage, query="anything")
    assert not result.is_error
    from oauth2_provider.models import get_access_token_model

    access_model = get_access_token_model()
    raw = storage.tokens.access_token  # type: ignore[union-attr]
    access = access_model.objects.get(token_checksum=hashlib.sha256(raw.encode()).hexdigest())
    assert _initialize(oauth_server, raw).status_code == 200
    access_model.objects.filter(pk=access.pk).update(resource=["https://other.example/mcp/"])
    assert _initialize(oauth_server, raw).status_code == 401
    access_model.objects.filter(pk=access.pk).update(
        resource=[f"{oauth_server}/mcp/"], expires=timezone.now() - timedelta(seconds=1)
    )
    assert _initialize(oauth_server, raw).status_code == 401

"""Single sign-on against a loopback OpenID Connect provider stub: mozilla-django-oidc really runs
(authorization redirect, state and nonce, PKCE, the token call over HTTP, the signed ID token,
userinfo), and the IdP's email maps to an invited member — nobody else gets in."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from django.core import mail
from django.test import Client
from support import signed_in

from audit.models import AuditEvent
from memories.models import Membership, User

pytestmark = pytest.mark.django_db

CLIENT_ID = "cortex-test"
CLIENT_SECRET = "stub-client-secret-for-hs256-signing-000"


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _id_token(claims: dict[str, Any]) -> str:
    header = _b64(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
    payload = _b64(json.dumps(claims).encode())
    signature = hmac.new(CLIENT_SECRET.encode(), f"{header}.{payload}".encode(), hashlib.sha256).digest()
    return f"{header}.{payload}.{_b64(signature)}"


class StubProvider:
    """What the IdP knows: who signs in next (their claims) and the nonce the client sent."""

    def __init__(self) -> None:
        self.claims: dict[str, Any] = {}
        self.nonce = ""
        self.token_requests: list[dict[str, list[str]]] = []


@pytest.fixture
def provider(settings: Any) -> Iterator[StubProvider]:
    state = StubProvider()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def _json(self, body: dict[str, Any]) -> None:
            data = json.dumps(body).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_POST(self) -> None:
            form = parse_qs(self.rfile.read(int(self.headers["Content-Length"])).decode())
            state.token_requests.append(form)
            if form.get("client_secret") != [CLIENT_SECRET] or form.get("code") != ["good-code"]:
                self.send_response(400)
                self.end_headers()
                return
            claims = {"iss": "stub", "aud": CLIENT_ID, "sub": "abc", "nonce": state.nonce, **state.claims}
            self._json({"access_token": "stub-access-token", "token_type": "Bearer", "id_token": _id_token(claims)})

        def do_GET(self) -> None:
            if self.path != "/userinfo" or self.headers.get("Authorization") != "Bearer stub-access-token":
                self.send_response(401)
                self.end_headers()
                return
            self._json({"sub": "abc", **state.claims})

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    settings.OIDC_RP_CLIENT_ID = CLIENT_ID
    settings.OIDC_RP_CLIENT_SECRET = CLIENT_SECRET
    settings.OIDC_RP_SIGN_ALGO = "HS256"
    settings.OIDC_OP_AUTHORIZATION_ENDPOINT = f"{base}/authorize"
    settings.OIDC_OP_TOKEN_ENDPOINT = f"{base}/token"
    settings.OIDC_OP_USER_ENDPOINT = f"{base}/userinfo"
    settings.OIDC_PROVIDER_NAME = "Stub IdP"
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()


def _sso(client: Client, provider: StubProvider, claims: dict[str, Any], code: str = "good-code") -> Any:
    """Follow the flow as a browser would: start, (the IdP authenticates), come back with a code."""
    start = client.get("/oidc/authenticate/")
    assert start.status_code == 302
    query = parse_qs(urlsplit(start["Location"]).query)
    assert query["client_id"] == [CLIENT_ID] and query["code_challenge_method"] == ["S256"]
    provider.nonce = query["nonce"][0]
    provider.claims = claims
    return client.get("/oidc/callback/", {"code": code, "state": query["state"][0]})


def test_sso_signs_in_an_existing_member_whatever_the_case_of_the_email(provider: StubProvider, acme: dict[str, Any]) -> None:
    client = Client()
    login_page = client.get("/login/").content.decode()
    assert "Sign in with Stub IdP" in login_page
    email = acme["employee"].user.email
    response = _sso(client, provider, {"email": email.upper(), "email_verified": True})
    assert response.status_code == 302 and "sso=failed" not in response["Location"]
    assert client.get("/").status_code == 200
    assert provider.token_requests[-1]["code_verifier"]  # PKCE
    assert AuditEvent.objects.filter(action="auth.login", details__via="oidc", actor_user_id=acme["employee"].user.pk).exists()


def test_sso_accepts_the_pending_invitation_of_a_new_person(
    provider: StubProvider, acme: dict[str, Any], django_capture_on_commit_callbacks: Any
) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        signed_in(acme["exec"]).post(
            "/settings/invites/",
            {"email": "sso.hire@example.test", "clearance": "Manager", "role": "member", "read_scopes": ["sales"]},
        )
    assert mail.outbox
    client = Client()
    response = _sso(client, provider, {"email": "SSO.Hire@example.test", "email_verified": True, "name": "Sso Hire"})
    assert response.status_code == 302 and "sso=failed" not in response["Location"]
    membership = Membership.objects.get(user__email="sso.hire@example.test", organization=acme["org"])
    assert membership.clearance_rank == 2 and membership.grants.get().scope.slug == "sales"
    assert not membership.user.has_usable_password()
    assert client.get("/").status_code == 200


def test_sso_refuses_an_address_nobody_invited(provider: StubProvider, acme: dict[str, Any]) -> None:
    client = Client()
    response = _sso(client, provider, {"email": "stranger@example.test", "email_verified": True})
    assert response.status_code == 302 and "sso=failed" in response["Location"]
    assert not User.objects.filter(email="stranger@example.test").exists()
    assert client.get("/").status_code == 302  # still signed out
    assert "did not match an invited member" in client.get(response["Location"]).content.decode()
    assert AuditEvent.objects.filter(action="auth.login_failed", details__via="oidc").exists()


def test_sso_refuses_an_unverified_email_and_a_bad_code(provider: StubProvider, acme: dict[str, Any]) -> None:
    email = acme["employee"].user.email
    unverified = _sso(Client(), provider, {"email": email, "email_verified": False})
    assert "sso=failed" in unverified["Location"]
    bad_code = _sso(Client(), provider, {"email": email, "email_verified": True}, code="stolen-code")
    assert bad_code.status_code == 302 and "sso=failed" in bad_code["Location"]


def test_sso_refuses_a_replayed_state(provider: StubProvider, acme: dict[str, Any]) -> None:
    client = Client()
    start = client.get("/oidc/authenticate/")
    query = parse_qs(urlsplit(start["Location"]).query)
    provider.nonce, provider.claims = query["nonce"][0], {"email": acme["employee"].user.email, "email_verified": True}
    assert client.get("/oidc/callback/", {"code": "good-code", "state": "forged-state"}).status_code in (302, 400)
    assert client.get("/").status_code == 302


def test_without_configuration_there_is_no_sso(acme: dict[str, Any]) -> None:
    assert Client().get("/oidc/authenticate/").status_code == 404
    assert "Sign in with" not in Client().get("/login/").content.decode()
    # Password sign-in is unaffected by the (idle) OIDC backend.
    assert Client().post("/login/", {"username": acme["employee"].user.email, "password": "pw-for-tests-1"}).status_code == 302

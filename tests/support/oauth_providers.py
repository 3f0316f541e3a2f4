"""Google's and Notion's OAuth at the HTTP boundary, for the loopback stub: the consent screen (it
answers with the redirect back, as after the admin clicks Allow or Cancel) and the token endpoint.

No real OAuth captures exist in the shared fixtures; the answers follow the documented shapes:
Google's authorization-code and refresh responses (developers.google.com/identity/protocols/oauth2/web-server)
and Notion's `POST /v1/oauth/token` response (developers.notion.com/reference/create-a-token).
"""

from __future__ import annotations

import base64
import hashlib
import secrets
from urllib.parse import quote

from support.gmail_mailbox import FakeMailbox
from support.stub_server import Received, StubResponse, StubServer

GMAIL_SCOPE = "https://www.googleapis.com/auth/gmail.readonly"


class FakeGoogle:
    """Google's consent screen (answers with a redirect back, as after the admin clicks Allow or
    Cancel) and token endpoint (authorization code with PKCE, then refresh for the Gmail stub)."""

    def __init__(self, stub: StubServer, mailbox: FakeMailbox) -> None:
        self.stub, self.mailbox = stub, mailbox
        self.deny = False
        self.codes: dict[str, dict[str, str]] = {}
        self.refresh_token = "1//0g-granted-refresh-" + secrets.token_hex(8)
        self.access_token = "ya29.granted-access-" + secrets.token_hex(8)
        self.client = ("cortex-oauth.apps.googleusercontent.com", "GOCSPX-typed-secret-" + secrets.token_hex(4))

    def install(self) -> None:
        self.mailbox.install()
        self.stub.route("GET", "/o/oauth2/v2/auth", self._authorize)
        self.stub.route("POST", "/token", self._token)

    def _authorize(self, request: Received) -> StubResponse:
        query = request.query
        back = query["redirect_uri"]
        if self.deny:
            return StubResponse(status=302, headers={"Location": f"{back}?error=access_denied&state={quote(query['state'])}"})
        code = "4/0AVG7-" + secrets.token_hex(8)
        self.codes[code] = dict(query)
        return StubResponse(
            status=302, headers={"Location": f"{back}?state={quote(query['state'])}&code={code}&scope={quote(GMAIL_SCOPE)}"}
        )

    def _token(self, request: Received) -> StubResponse:
        form = request.form()
        invalid = StubResponse(status=400, json={"error": "invalid_grant", "error_description": "Bad Request"})
        if form.get("grant_type") == "authorization_code":
            asked = self.codes.pop(form.get("code", ""), None)
            if asked is None or (form.get("client_id"), form.get("client_secret")) != self.client:
                return invalid
            challenge = base64.urlsafe_b64encode(hashlib.sha256(form["code_verifier"].encode()).digest()).rstrip(b"=").decode()
            if challenge != asked["code_challenge"] or form.get("redirect_uri") != asked["redirect_uri"]:
                return invalid
            return StubResponse(
                json={
                    "access_token": self.access_token,
                    "expires_in": 3599,
                    "refresh_token": self.refresh_token,
                    "scope": asked["scope"],
                    "token_type": "Bearer",
                }
            )
        if form.get("grant_type") == "refresh_token" and form.get("refresh_token") == self.refresh_token:
            return self.mailbox._token(request)
        return invalid


class FakeNotionOAuth:
    """Notion's consent screen and POST /v1/oauth/token (HTTP Basic client auth, JSON body)."""

    def __init__(self, stub: StubServer) -> None:
        self.stub = stub
        self.codes: dict[str, dict[str, str]] = {}
        self.client = ("1d2d872b-594c-80e3-a2f5-0037e0d5cd3f", "secret_typed-" + secrets.token_hex(8))
        self.access_token = "ntn_granted-" + secrets.token_hex(12)

    def install(self) -> None:
        self.stub.route("GET", "/v1/oauth/authorize", self._authorize)
        self.stub.route("POST", "/v1/oauth/token", self._token)

    def _authorize(self, request: Received) -> StubResponse:
        code = "03a7-" + secrets.token_hex(8)
        self.codes[code] = dict(request.query)
        back = request.query["redirect_uri"]
        return StubResponse(status=302, headers={"Location": f"{back}?code={code}&state={quote(request.query['state'])}"})

    def _token(self, request: Received) -> StubResponse:
        basic = base64.b64encode(":".join(self.client).encode()).decode()
        body = request.json() or {}
        asked = self.codes.pop(body.get("code", ""), None)
        if request.headers.get("authorization") != f"Basic {basic}":
            return StubResponse(status=401, json={"error": "invalid_client", "error_description": "Client secret is invalid."})
        if asked is None or body.get("grant_type") != "authorization_code" or body.get("redirect_uri") != asked["redirect_uri"]:
            return StubResponse(status=400, json={"error": "invalid_grant", "error_description": "Invalid code."})
        return StubResponse(
            json={
                "access_token": self.access_token,
                "token_type": "bearer",
                "refresh_token": None,
                "bot_id": "b3414d65-1224-4a7e-8ffc-cc9d8773d601",
                "workspace_name": "Acme's Notion",
                "workspace_icon": None,
                "workspace_id": "j565j4d7-2882-41bd-964a-6c9d9ac36f7e",
                "owner": {"type": "user", "user": {"object": "user", "id": "u-1"}},
                "duplicated_template_id": None,
                "request_id": "8b6f4c1e-0000-4000-8000-000000000000",
            }
        )

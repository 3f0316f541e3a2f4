"""Google's OAuth web flow for Gmail and Drive: the consent address and the code exchange (authlib).

Offline access with `prompt=consent`, so Google issues a refresh token every time (without
`prompt=consent` a second connection of the same account gets none), and PKCE S256. The token
request goes to the connector's `token_uri` — the same endpoint google-auth refreshes against
later — so a proxy or a loopback stub serves both. Nothing here logs or raises a token: a refusal
carries the provider's error code (`invalid_grant`, ...) and a sentence, never a response body.
"""

from __future__ import annotations

from dataclasses import dataclass

import requests
from authlib.integrations.base_client.errors import OAuthError
from authlib.integrations.requests_client import OAuth2Session

from connectors.errors import RetryableSourceError

SCOPES = {
    "gmail": "https://www.googleapis.com/auth/gmail.readonly",
    "drive": "https://www.googleapis.com/auth/drive.readonly",
}
TIMEOUT_SECONDS = 20.0


class OAuthRefused(Exception):
    """The provider answered the token request with an OAuth error (or without what Cortex needs)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(frozen=True)
class GoogleGrant:
    refresh_token: str
    scopes: tuple[str, ...]


def _session(*, client_id: str, client_secret: str, redirect_uri: str, scope: str) -> OAuth2Session:
    # Google reads the client's credentials from the form body (client_secret_post).
    return OAuth2Session(
        client_id=client_id,
        client_secret=client_secret,
        token_endpoint_auth_method="client_secret_post",  # noqa: S106 - a method name, not a secret
        redirect_uri=redirect_uri,
        scope=scope,
        code_challenge_method="S256",
    )


def authorization_url(*, kind: str, client_id: str, auth_uri: str, redirect_uri: str, state: str, code_verifier: str) -> str:
    session = _session(client_id=client_id, client_secret="", redirect_uri=redirect_uri, scope=SCOPES[kind])
    url, _ = session.create_authorization_url(
        auth_uri, state=state, code_verifier=code_verifier, access_type="offline", prompt="consent"
    )
    return str(url)


def exchange_code(
    *, kind: str, client_id: str, client_secret: str, token_uri: str, redirect_uri: str, code: str, code_verifier: str
) -> GoogleGrant:
    """The authorization code for a refresh token; OAuthRefused when Google says no or leaves out
    the refresh token or the read scope; RetryableSourceError when Google cannot be reached."""
    session = _session(client_id=client_id, client_secret=client_secret, redirect_uri=redirect_uri, scope=SCOPES[kind])
    try:
        token = session.fetch_token(
            token_uri, grant_type="authorization_code", code=code, code_verifier=code_verifier, timeout=TIMEOUT_SECONDS
        )
    except OAuthError as exc:
        raise OAuthRefused(str(exc.error or "invalid_request"), "Google refused the sign-in") from None
    except (requests.RequestException, ValueError) as exc:
        raise RetryableSourceError(f"Google's token endpoint could not be reached ({type(exc).__name__}).") from None
    finally:
        session.close()
    refresh_token = str(token.get("refresh_token") or "")
    if not refresh_token:
        raise OAuthRefused("no_refresh_token", "Google answered without a refresh token")
    granted = tuple(str(token.get("scope") or SCOPES[kind]).split())
    if SCOPES[kind] not in granted:
        raise OAuthRefused("scope_not_granted", "The Google account did not grant read access")
    return GoogleGrant(refresh_token=refresh_token, scopes=granted)

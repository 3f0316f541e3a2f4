"""Notion's OAuth for a public integration: the consent address (authlib builds it) and the code
exchange (notion-client's `oauth.token`: POST /v1/oauth/token with HTTP Basic client auth).

Both live under the connector's `api_url` (default https://api.notion.com), so a proxy or a
loopback stub serves them as it serves the API. Notion documents no PKCE for this flow, so none
is sent; the state is what binds the answer to the sign-in that asked for it. Nothing here logs
or raises a token: a refusal carries Notion's error code and a sentence, never a response body.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import httpx
from authlib.integrations.requests_client import OAuth2Session
from notion_client import APIResponseError, Client
from notion_client.errors import HTTPResponseError, RequestTimeoutError

from connectors.errors import RetryableSourceError
from connectors.sources.gmail.google_oauth import OAuthRefused
from connectors.sources.notion.client import DEFAULT_BASE_URL

TIMEOUT_MS = 20_000


@dataclass(frozen=True)
class NotionGrant:
    access_token: str
    workspace_name: str
    workspace_id: str
    bot_id: str


def _base(api_url: str | None) -> str:
    return (api_url or DEFAULT_BASE_URL).rstrip("/")


def authorization_url(*, client_id: str, api_url: str | None, redirect_uri: str, state: str) -> str:
    # owner=user: the person consenting picks the workspace and the pages the integration may read.
    session = OAuth2Session(client_id=client_id, redirect_uri=redirect_uri)
    try:
        url, _ = session.create_authorization_url(f"{_base(api_url)}/v1/oauth/authorize", state=state, owner="user")
    finally:
        session.close()
    return str(url)


def _error_code(exc: HTTPResponseError) -> str:
    """Notion answers token errors OAuth-style (`{"error": "invalid_grant"}`) or as an API error (`code`)."""
    if isinstance(exc, APIResponseError):
        return str(getattr(exc.code, "value", exc.code))
    try:
        body = json.loads(exc.body or "{}")
    except ValueError:
        body = {}
    if isinstance(body, dict):
        return str(body.get("error") or body.get("code") or f"http_{exc.status}")
    return f"http_{exc.status}"


def exchange_code(*, client_id: str, client_secret: str, api_url: str | None, redirect_uri: str, code: str) -> NotionGrant:
    """The authorization code for the workspace's access token; OAuthRefused when Notion says no,
    RetryableSourceError when it cannot be reached."""
    client = Client(base_url=_base(api_url), timeout_ms=TIMEOUT_MS, retry=False)
    try:
        answer = client.oauth.token(
            client_id=client_id,
            client_secret=client_secret,
            grant_type="authorization_code",
            code=code,
            redirect_uri=redirect_uri,
        )
    except HTTPResponseError as exc:
        if exc.status >= 500 or exc.status == 429:
            raise RetryableSourceError(f"Notion answered {exc.status} to the token request.") from None
        raise OAuthRefused(_error_code(exc), "Notion refused the sign-in") from None
    except (RequestTimeoutError, httpx.HTTPError) as exc:
        raise RetryableSourceError(f"Notion's token endpoint could not be reached ({type(exc).__name__}).") from None
    finally:
        client.close()
    if not isinstance(answer, dict):  # the synchronous client answers a dict
        raise OAuthRefused("no_access_token", "Notion answered without an access token")
    token = str(answer.get("access_token") or "")
    if not token:
        raise OAuthRefused("no_access_token", "Notion answered without an access token")
    return NotionGrant(
        access_token=token,
        workspace_name=str(answer.get("workspace_name") or ""),
        workspace_id=str(answer.get("workspace_id") or ""),
        bot_id=str(answer.get("bot_id") or ""),
    )

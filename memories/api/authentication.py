"""API authentication: `Authorization: Bearer <token>` or the browser session (with CSRF)."""

from __future__ import annotations

from typing import Any

from rest_framework import authentication, exceptions
from rest_framework.request import Request

from audit.context import current_client_ip
from audit.services import Actor, record
from memories import login_throttle
from memories.access import Principal, touch_token
from memories.services.tenancy import token_authenticate


class InvalidToken(exceptions.AuthenticationFailed):
    default_code = "INVALID_TOKEN"


class BearerTokenAuthentication(authentication.BaseAuthentication):
    """Authenticates API tokens. Sets `request.auth` to the ApiToken; the Principal follows from it."""

    keyword = "Bearer"

    def authenticate(self, request: Request) -> tuple[Any, Any] | None:
        header = request.META.get("HTTP_AUTHORIZATION", "")
        if not header:
            return None
        parts = header.split()
        if parts[0].lower() != self.keyword.lower():
            raise InvalidToken(
                "Malformed Authorization header: use 'Authorization: Bearer <token>'.", code="MALFORMED_AUTHORIZATION"
            )
        if len(parts) != 2:
            raise InvalidToken(
                "Malformed Authorization header: use 'Authorization: Bearer <token>'.", code="MALFORMED_AUTHORIZATION"
            )
        address = current_client_ip()
        wait = login_throttle.retry_after("token", address=address)
        if wait is not None:
            # Before the lookup and without an audit row: a guessing flood costs nothing but a 429.
            raise exceptions.Throttled(wait=wait)
        token = token_authenticate(parts[1])
        if token is None:
            if login_throttle.note_failure("token", address=address):
                record(
                    "auth.token_throttled",
                    organization=None,
                    actor=Actor.anonymous(),
                    outcome="denied",
                    details={"path": request.path},
                )
            record(
                "auth.token_rejected",
                organization=None,
                actor=Actor.anonymous(),
                outcome="denied",
                details={"path": request.path},
            )
            raise InvalidToken("The token is invalid, expired or revoked.", code="INVALID_TOKEN")
        touch_token(token)
        request._cortex_principal = Principal(token.membership, token)  # type: ignore[attr-defined]
        return token.membership.user, token

    def authenticate_header(self, request: Request) -> str:
        # Makes DRF answer 401 (not 403) with a challenge when credentials are missing.
        return 'Bearer realm="cortex"'


class CsrfSessionAuthentication(authentication.SessionAuthentication):
    """Session auth with CSRF enforced (DRF's default behaviour, named for clarity)."""

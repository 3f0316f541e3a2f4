"""Bearer tokens for MCP: the SDK's token-verifier hook, backed by our ApiToken table.

Two kinds of bearer are accepted: a Cortex API token (`ctx_…`, pasted into Cursor or Claude
Code) and an OAuth access token that Cortex itself issued to a client (Claude.ai, Claude
Desktop) for this endpoint — it acts as the ApiToken of the person's consent
(memories.services.oauth), so both kinds end in the same Principal.

The SDK calls `ApiTokenVerifier.verify_token` for every HTTP request to the endpoint, before
any MCP message is read; `None` makes it answer 401 with a `WWW-Authenticate` challenge that
points at the protected-resource metadata. A tool turns the verified token back into a
Principal with `principal_for`, which authenticates the secret again, so a token revoked or
expired between the HTTP check and the tool run is refused too.

Organization, user and clearance come from the token's membership and nowhere else.
"""

from __future__ import annotations

from django.conf import settings
from mcp.server.auth.provider import AccessToken

from audit.context import current_client_ip
from audit.models import AuditEvent
from audit.services import Actor, record
from cortex_site.errors import NotAuthenticated
from memories import login_throttle
from memories.access import Principal, touch_token
from memories.mcp.threads import in_worker_thread
from memories.models import ApiToken
from memories.services.oauth import oauth_access_authenticate
from memories.services.tenancy import TOKEN_PREFIX, token_authenticate

# Where our own facts about a verified token live inside the SDK's AccessToken.claims.
CLAIMS_KEY = "cortex"


class ApiTokenVerifier:
    """Implements `mcp.server.auth.provider.TokenVerifier` over Cortex API tokens.

    Cortex tokens are not audience-bound: one token serves REST and MCP alike, so the
    AccessToken carries no `resource` and the SDK's resource check stays off.
    """

    async def verify_token(self, token: str) -> AccessToken | None:
        return await in_worker_thread(verify_api_token)(token)


def mcp_resource_url() -> str:
    """This endpoint's public URL: the only audience OAuth access tokens are accepted for."""
    return f"{settings.CORTEX_BASE_URL}/mcp/"


def bearer_token(raw: str) -> ApiToken | None:
    """The usable Cortex token a bearer stands for: an API token, or an OAuth access token
    issued for this endpoint (expired, revoked, foreign-audience and unknown ones are None)."""
    if raw.startswith(f"{TOKEN_PREFIX}_"):
        return token_authenticate(raw)
    return oauth_access_authenticate(raw, resource=mcp_resource_url())


def verify_api_token(raw: str) -> AccessToken | None:
    """The SDK's view of a usable Cortex token, or None (unknown, wrong secret, revoked, expired).

    A rejected token is audited like REST does; a good one has its last use recorded.
    """
    address = current_client_ip()
    if login_throttle.retry_after("token", address=address) is not None:
        return None  # this address used up its bad-token budget: refused without a lookup or an audit row
    token = bearer_token(raw)
    if token is None:
        if login_throttle.note_failure("token", address=address):
            record(
                "auth.token_throttled", organization=None, actor=Actor.anonymous(), outcome="denied", details={"interface": "mcp"}
            )
        record(
            "auth.token_rejected",
            organization=None,
            actor=Actor.anonymous(),
            outcome=AuditEvent.Outcome.DENIED,
            details={"interface": "mcp"},
        )
        return None
    touch_token(token)
    actor = Principal(token.membership, token).actor
    return AccessToken(
        token=raw,
        client_id=f"cortex-token-{token.prefix}",
        scopes=[],
        expires_at=int(token.expires_at.timestamp()) if token.expires_at else None,
        subject=str(token.membership.user_id),
        claims={
            CLAIMS_KEY: {
                "organization_id": token.membership.organization_id,
                "token_id": str(token.pk),
                "user_id": str(token.membership.user_id),
                "actor_label": actor.label,
            }
        },
    )


def principal_for(access: AccessToken) -> Principal:
    """The Principal a verified token acts as, checked afresh (call from sync code)."""
    token = bearer_token(access.token)
    if token is None:
        raise NotAuthenticated(
            "This token is no longer valid: it was revoked or has expired. Create a new token in Cortex.",
            error_code="INVALID_TOKEN",
        )
    touch_token(token)
    return Principal(token.membership, token)


def actor_for(access: AccessToken | None) -> tuple[int | None, Actor]:
    """(organization id, actor) as verified at the start of the HTTP request, without a query.

    For audit events written where no Principal was built (a call the SDK refused before our
    tool ran); the label is the one `Principal.actor` gave at verification.
    """
    facts = ((access.claims or {}).get(CLAIMS_KEY) if access is not None else None) or {}
    if not facts:
        return None, Actor.anonymous()
    return facts["organization_id"], Actor(
        kind=AuditEvent.ActorKind.TOKEN,
        label=facts["actor_label"],
        user_id=facts["user_id"],
        token_id=facts["token_id"],
    )

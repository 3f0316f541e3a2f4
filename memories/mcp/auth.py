"""Bearer tokens for MCP: the SDK's token-verifier hook, backed by our ApiToken table.

The SDK calls `ApiTokenVerifier.verify_token` for every HTTP request to the endpoint, before
any MCP message is read; `None` makes it answer 401 with a `WWW-Authenticate` challenge that
points at the protected-resource metadata. A tool turns the verified token back into a
Principal with `principal_for`, which authenticates the secret again, so a token revoked or
expired between the HTTP check and the tool run is refused too.

Organization, user and clearance come from the token's membership and nowhere else.
"""

from __future__ import annotations

from mcp.server.auth.provider import AccessToken

from audit.context import current_client_ip
from audit.models import AuditEvent
from audit.services import Actor, record
from cortex_site.errors import NotAuthenticated
from memories import login_throttle
from memories.access import Principal, touch_token
from memories.mcp.threads import in_worker_thread
from memories.services.tenancy import token_authenticate

# Where our own facts about a verified token live inside the SDK's AccessToken.claims.
CLAIMS_KEY = "cortex"


class ApiTokenVerifier:
    """Implements `mcp.server.auth.provider.TokenVerifier` over Cortex API tokens.

    Cortex tokens are not audience-bound: one token serves REST and MCP alike, so the
    AccessToken carries no `resource` and the SDK's resource check stays off.
    """

    async def verify_token(self, token: str) -> AccessToken | None:
        return await in_worker_thread(verify_api_token)(token)


def verify_api_token(raw: str) -> AccessToken | None:
    """The SDK's view of a usable Cortex token, or None (unknown, wrong secret, revoked, expired).

    A rejected token is audited like REST does; a good one has its last use recorded.
    """
    address = current_client_ip()
    if login_throttle.retry_after("token", address=address) is not None:
        return None  # this address used up its bad-token budget: refused without a lookup or an audit row
    token = token_authenticate(raw)
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
    token = token_authenticate(access.token)
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

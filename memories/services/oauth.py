"""OAuth grants for MCP clients: consent, the toolkit's hooks, and turning an access token into
the Cortex token it acts as (see memories.models.oauth for the design).

An access token is usable only when all of these hold: the toolkit knows it and it has not
expired; it carries the `mcp` scope; its audience (RFC 8707 resource) is exactly this server's MCP
endpoint — a token minted for another resource, or for none, is refused; its refresh-token family
is a Cortex grant; and that grant's ApiToken is still usable (not revoked or expired, its user
active, its membership not deactivated). Revoking the ApiToken therefore ends the client's access
at its next request.
"""

from __future__ import annotations

import hashlib
import uuid
from datetime import datetime
from typing import Any

from django.db import transaction
from oauth2_provider.models import get_access_token_model, get_refresh_token_model

from audit.services import record
from cortex_site.errors import NotFound, ValidationFailed
from memories.access import Principal
from memories.models import ApiToken, Membership, OAuthGrant
from memories.services.tenancy import token_create

OAUTH_SCOPE = "mcp"


def same_resource(a: str, b: str) -> bool:
    """Resource indicators compared as the same endpoint (`/mcp` and `/mcp/` are one)."""
    return a.rstrip("/") == b.rstrip("/")


@transaction.atomic
def oauth_grant_create(
    *,
    membership: Membership,
    application: Any,
    resource: str,
    scope_slugs: list[str] | None,
    read_only: bool,
    expires_at: datetime | None,
    default_scope_slug: str | None = None,
) -> OAuthGrant:
    """Record a person's consent: an ApiToken with their choices (a narrowing of their own
    access, checked by token_create) and the grant the client's tokens will act through.
    A deactivated membership consents to nothing (its tokens would never authenticate anyway)."""
    if membership.deactivated_at is not None:
        raise NotFound("You are not an active member of that organization.")
    client_name = (application.name or application.client_id)[:80]
    principal = Principal(membership)
    token, _secret = token_create(
        membership=membership,
        name=f"OAuth: {client_name}",
        scope_slugs=scope_slugs,
        read_only=read_only,
        expires_at=expires_at,
        by=principal,
    )
    # The token's own secret is never shown: the client holds the toolkit's tokens instead.
    if default_scope_slug:
        default_scope = next((sc for sc in principal.writable_scopes() if sc.slug == default_scope_slug), None)
        if default_scope is None or default_scope_slug not in (scope_slugs or [default_scope_slug]):
            raise ValidationFailed(
                f"The agent cannot write to {default_scope_slug!r}, so it cannot be its default scope.",
                error_code="DEFAULT_SCOPE_NOT_WRITABLE",
            )
        ApiToken.objects.filter(pk=token.pk).update(default_scope=default_scope)
    grant = OAuthGrant.objects.create(
        organization_id=token.organization_id, token=token, application=application, resource=resource
    )
    record(
        "oauth.grant",
        organization=membership.organization_id,
        actor=principal.actor,
        target_type="token",
        target_id=token.pk,
        details={
            "client_id": application.client_id,
            "client_name": client_name,
            "scopes": sorted(scope_slugs) if scope_slugs is not None else "all readable",
            "read_only": read_only,
            "expires_at": expires_at.isoformat() if expires_at else None,
            "resource": resource,
            "default_scope": default_scope_slug,
        },
    )
    return grant


def oauth_grant_attach_code(*, grant_id: Any, application: Any, code: str) -> None:
    """Called by the toolkit when it stores the authorization code of a consent."""
    updated = OAuthGrant.objects.filter(pk=grant_id, application=application, authorization_code="").update(
        authorization_code=code
    )
    if updated != 1:
        raise ValidationFailed("This authorization is not known or was already used.", error_code="INVALID_GRANT")


def oauth_grant_for_code(*, application: Any, code: str) -> OAuthGrant | None:
    """The grant an authorization code belongs to, consuming the code (it is single use)."""
    grant = OAuthGrant.objects.filter(application=application, authorization_code=code).first()
    if grant is not None:
        OAuthGrant.objects.filter(pk=grant.pk).update(authorization_code="")
    return grant


def oauth_access_authenticate(raw: str, *, resource: str) -> ApiToken | None:
    """The Cortex token an OAuth access token acts as, or None (see the module docstring)."""
    checksum = hashlib.sha256(raw.encode()).hexdigest()
    access = get_access_token_model().objects.filter(token_checksum=checksum).first()
    if access is None or access.is_expired() or not access.allow_scopes([OAUTH_SCOPE]):
        return None
    if not access.resource or not all(same_resource(r, resource) for r in access.resource):
        return None
    family = get_refresh_token_model().objects.filter(access_token=access).values_list("token_family", flat=True).first()
    if not isinstance(family, uuid.UUID):
        return None
    grant = (
        OAuthGrant.objects.select_related("token__membership__organization", "token__membership__user")
        .filter(pk=family, application_id=access.application_id)
        .first()
    )
    if grant is None or not same_resource(grant.resource, resource):
        return None
    token = grant.token
    if not token.is_usable() or not token.membership.user.is_active or token.membership.deactivated_at is not None:
        return None
    return token


def oauth_grant_discard_unused(*, grant_id: Any) -> None:
    """Delete a consent the toolkit issued no code for (it refused the request after all), with its
    token. Runs before the redirect reaches the client, so no code can have been exchanged yet."""
    ApiToken.objects.filter(oauth_grant__pk=grant_id, oauth_grant__authorization_code="").delete()

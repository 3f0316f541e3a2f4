"""Reading the organization's people, scopes, grants and tokens on behalf of a principal.

Everything is limited to the principal's organization; a foreign or missing id raises NotFound.
Members see their own tokens; admins see the organization's members, every scope and grant
(metadata, not content: reading memories still needs a grant and the clearance).
"""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from django.utils import timezone

from cortex_site.errors import Denial, NotFound
from memories.access import DenialRule, Principal, hidden, parse_id, parse_int_id
from memories.models import ApiToken, Invite, Membership, Scope, ScopeGrant


def _require_admin(principal: Principal) -> None:
    principal.require_admin()


def my_tokens(principal: Principal) -> QuerySet[ApiToken]:
    """The principal's own tokens (revoked ones too, for the record), newest first."""
    return ApiToken.objects.filter(membership=principal.membership).prefetch_related("scopes").order_by("-created_at")


def token_for(principal: Principal, token_id: Any) -> ApiToken:
    parsed = parse_id(token_id)
    if parsed is None:
        raise NotFound("Token not found.")
    token = (
        ApiToken.objects.select_related("membership__organization", "membership__user")
        .filter(membership=principal.membership, pk=parsed)
        .first()
    )
    if token is None:
        raise NotFound("Token not found.", denial=_hidden_token(principal, parsed))
    return token


def _hidden_token(principal: Principal, token_id: Any) -> Denial | None:
    """A token belongs to a membership: its organization owns it; in the principal's own, it is someone else's."""
    owner = ApiToken.objects.filter(pk=token_id).values_list("membership__organization_id", flat=True).first()
    if owner is None:
        return None
    rule = DenialRule.OWNER if owner == principal.organization_id else DenialRule.ORGANIZATION
    return Denial(organization_id=owner, target_type="token", target_id=str(token_id), rule=rule)


def organization_members(principal: Principal) -> QuerySet[Membership]:
    _require_admin(principal)
    return (
        Membership.objects.filter(organization_id=principal.organization_id)
        .select_related("user", "organization")
        .order_by("user__email")
    )


def member_for(principal: Principal, membership_id: Any) -> Membership:
    _require_admin(principal)
    pk = parse_int_id(membership_id)
    if pk is None:
        raise NotFound("Member not found.")
    membership = (
        Membership.objects.select_related("user", "organization").filter(organization_id=principal.organization_id, pk=pk).first()
    )
    if membership is None:
        foreign = Membership.objects.filter(pk=pk).only("id", "organization_id").first()
        raise NotFound("Member not found.", denial=hidden(principal, "member", foreign, None))
    return membership


def organization_scopes(principal: Principal) -> QuerySet[Scope]:
    _require_admin(principal)
    return Scope.objects.filter(organization_id=principal.organization_id).select_related("organization").order_by("slug")


def organization_scope(principal: Principal, slug: str) -> Scope:
    _require_admin(principal)
    scope = Scope.objects.select_related("organization").filter(organization_id=principal.organization_id, slug=slug).first()
    if scope is None:
        raise NotFound("Scope not found.", error_code="UNKNOWN_SCOPE")
    return scope


def organization_grants(principal: Principal) -> QuerySet[ScopeGrant]:
    _require_admin(principal)
    return (
        ScopeGrant.objects.filter(scope__organization_id=principal.organization_id)
        .select_related("membership__user", "scope")
        .order_by("scope__slug", "membership__user__email")
    )


def organization_invites(principal: Principal) -> QuerySet[Invite]:
    """Pending invitations (admins only), newest first."""
    _require_admin(principal)
    return Invite.objects.filter(
        organization_id=principal.organization_id, accepted_at=None, revoked_at=None, expires_at__gt=timezone.now()
    ).select_related("organization", "invited_by")


def invite_for(principal: Principal, invite_id: Any) -> Invite:
    _require_admin(principal)
    parsed = parse_id(invite_id)
    if parsed is None:
        raise NotFound("Invitation not found.")
    invite = Invite.objects.select_related("organization").filter(organization_id=principal.organization_id, pk=parsed).first()
    if invite is None:
        foreign = Invite.objects.filter(pk=parsed).only("id", "organization_id").first()
        raise NotFound("Invitation not found.", denial=hidden(principal, "invite", foreign, None))
    return invite

"""The browser side of who-is-acting: the session's current organization."""

from __future__ import annotations

from django.http import HttpRequest

from memories.access import Principal
from memories.models import Membership

SESSION_ORGANIZATION_KEY = "cortex_organization_id"


def session_principal(request: HttpRequest) -> Principal | None:
    """The Principal for a logged-in browser user in their current organization.

    The current organization is kept in the session; when it is missing or the user left it,
    the first organization (by name) is used. None when the user belongs to no organization.
    """
    cached = getattr(request, "_cortex_principal", None)
    if cached is not None:
        return cached
    user = request.user
    if not user.is_authenticated:
        return None
    memberships = (
        Membership.objects.filter(user=user, deactivated_at=None)
        .select_related("organization", "user")
        .order_by("organization__name")
    )
    wanted = request.session.get(SESSION_ORGANIZATION_KEY)
    membership = next((m for m in memberships if m.organization_id == wanted), None) or next(iter(memberships), None)
    if membership is None:
        return None
    principal = Principal(membership)
    request._cortex_principal = principal  # type: ignore[attr-defined]
    return principal


def switch_organization(request: HttpRequest, organization_slug: str) -> Principal | None:
    """Make another of the user's organizations current. None when the user is not a member (→ 404)."""
    membership = (
        Membership.objects.filter(user=request.user, organization__slug=organization_slug, deactivated_at=None)  # type: ignore[misc]
        .select_related("organization", "user")
        .first()
    )
    if membership is None:
        return None
    request.session[SESSION_ORGANIZATION_KEY] = membership.organization_id
    principal = Principal(membership)
    request._cortex_principal = principal  # type: ignore[attr-defined]
    return principal

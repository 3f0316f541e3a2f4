"""Single sign-on with OpenID Connect (mozilla-django-oidc), configured from the environment.

The IdP vouches for an email address; Cortex maps it to a person it already knows — an existing
account, or an address an admin invited (the pending invitations are accepted on the way in).
Anyone else is refused: signing in with SSO never creates a stray account or membership.
"""

from __future__ import annotations

import logging
from typing import Any

import requests
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.exceptions import SuspiciousOperation
from django.http import Http404, HttpRequest, HttpResponse
from mozilla_django_oidc.auth import OIDCAuthenticationBackend
from mozilla_django_oidc.views import OIDCAuthenticationCallbackView, OIDCAuthenticationRequestView

from audit.services import Actor, record
from memories.models import User
from memories.services import accounts

logger = logging.getLogger("cortex.auth")


def sso_enabled() -> bool:
    return bool(settings.OIDC_RP_CLIENT_ID and settings.OIDC_OP_AUTHORIZATION_ENDPOINT)


class InvitedMemberBackend(OIDCAuthenticationBackend):
    """Authenticates the OIDC code flow; a no-op backend while SSO is not configured."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        if sso_enabled():
            super().__init__(*args, **kwargs)
        else:
            self.UserModel = get_user_model()

    def authenticate(self, request: HttpRequest | None, **kwargs: Any) -> Any:
        if not sso_enabled():
            return None
        try:
            return super().authenticate(request, **kwargs)
        except requests.RequestException as exc:
            # The IdP refused the code (reused, expired, forged) or could not be reached: a failed
            # sign-in, not a server error.
            logger.warning("single sign-on failed at the identity provider: %s", exc)
            return None

    def verify_claims(self, claims: dict[str, Any]) -> bool:
        # An unverified address proves nothing about who is signing in.
        return bool(claims.get("email")) and claims.get("email_verified") is True

    def filter_users_by_claims(self, claims: dict[str, Any]) -> Any:
        return self.UserModel.objects.filter(email__iexact=str(claims.get("email", "")).strip(), is_active=True)

    def update_user(self, user: User, claims: dict[str, Any]) -> User:
        accounts.invites_accept_verified(email=user.email)  # invitations sent since their last visit
        return user

    def create_user(self, claims: dict[str, Any]) -> User:
        user = accounts.invites_accept_verified(email=str(claims["email"]), name=str(claims.get("name") or ""))
        if user is None:
            # Not an invited member: refused (the library turns this into a failed sign-in).
            raise SuspiciousOperation("no account and no pending invitation for this address")
        return user


class SsoStartView(OIDCAuthenticationRequestView):
    def dispatch(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not sso_enabled():
            raise Http404("Single sign-on is not configured.")
        return super().dispatch(request, *args, **kwargs)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        if sso_enabled():
            super().__init__(*args, **kwargs)


class SsoCallbackView(OIDCAuthenticationCallbackView):
    def dispatch(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not sso_enabled():
            raise Http404("Single sign-on is not configured.")
        return super().dispatch(request, *args, **kwargs)

    def login_success(self) -> HttpResponse:
        response = super().login_success()
        user = self.user
        record(
            "auth.login",
            organization=None,
            actor=Actor(kind="session", label=user.email, user_id=user.pk),
            details={"via": "oidc"},
        )
        return response

    def login_failure(self) -> HttpResponse:
        record("auth.login_failed", organization=None, actor=Actor.anonymous(), outcome="denied", details={"via": "oidc"})
        return super().login_failure()

"""Template context for the app shell: who I am, where I am, and what the nav offers me."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest

from memories.selectors.activity import unseen_count
from memories.sessions import session_principal


def shell(request: HttpRequest) -> dict[str, Any]:
    if not getattr(request, "user", None) or not request.user.is_authenticated:
        return {"principal": None, "organizations": []}
    principal = session_principal(request)
    organizations = [
        {
            "slug": m.organization.slug,
            "name": m.organization.name,
            "current": principal is not None and m.pk == principal.membership.pk,
        }
        for m in request.user.memberships.filter(deactivated_at=None)  # type: ignore[union-attr]
        .select_related("organization")
        .order_by("organization__name")
    ]
    return {
        "principal": principal,
        "organizations": organizations,
        "activity_unseen": unseen_count(principal) if principal is not None else 0,
    }

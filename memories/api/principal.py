"""How an API request becomes a Principal."""

from __future__ import annotations

from rest_framework.request import Request

from cortex_site.errors import PermissionDenied
from memories.access import Principal
from memories.sessions import session_principal


def request_principal(request: Request) -> Principal:
    """The Principal of an authenticated API request (token or session)."""
    principal = getattr(request, "_cortex_principal", None) or getattr(request._request, "_cortex_principal", None)
    if principal is not None:
        return principal
    principal = session_principal(request._request)
    if principal is None:
        raise PermissionDenied("You are not a member of any organization.", error_code="NO_ORGANIZATION")
    request._cortex_principal = principal  # type: ignore[attr-defined]
    return principal

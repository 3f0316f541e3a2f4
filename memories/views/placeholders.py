"""Nav targets whose features come with later issues: a clean page in the shell rather than a 404."""

from __future__ import annotations

from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from memories.access import Principal
from memories.views.common import principal_view


@principal_view
@require_GET
def audit_soon(request: HttpRequest, principal: Principal) -> HttpResponse:
    if not principal.is_admin:
        raise Http404("No such page")  # the audit log is for admins; others see no trace of it
    return render(request, "memories/coming_soon.html", {"feature": "audit"})

"""Nav targets whose features come with later issues: a clean page in the shell rather than a 404."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from memories.access import Principal
from memories.views.common import principal_view


@principal_view
@require_GET
def connectors_soon(request: HttpRequest, principal: Principal) -> HttpResponse:
    return render(request, "memories/coming_soon.html", {"feature": "connectors"})

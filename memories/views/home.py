"""The landing page."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from memories.sessions import session_principal


@login_required
def home(request: HttpRequest) -> HttpResponse:
    principal = session_principal(request)
    if principal is None:
        return render(request, "memories/no_organization.html", status=403)
    return render(request, "memories/home.html", {"scopes": principal.readable_scopes()})

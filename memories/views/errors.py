"""Error pages in the app shell (the API's errors are JSON; see cortex_site.middleware)."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render


def bad_request(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    return render(request, "errors/400.html", status=400)


def permission_denied(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    return render(request, "errors/403.html", status=403)


def page_not_found(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    return render(request, "errors/404.html", status=404)


def server_error(request: HttpRequest) -> HttpResponse:
    # No context processors: whatever broke may be what they need.
    from django.template import loader

    return HttpResponse(
        loader.get_template("errors/500.html").render({"request_id": getattr(request, "request_id", "")}), status=500
    )

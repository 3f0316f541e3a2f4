"""Site-wide HTTP behaviour: security headers, and JSON errors everywhere under /api/."""

from __future__ import annotations

from collections.abc import Callable
from http import HTTPStatus

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse

from cortex_site.api import error_body

_API_PREFIX = "/api/"
_CODES = {
    400: "BAD_REQUEST",
    401: "NOT_AUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    405: "METHOD_NOT_ALLOWED",
    413: "PAYLOAD_TOO_LARGE",
    415: "UNSUPPORTED_MEDIA_TYPE",
    429: "RATE_LIMITED",
    500: "INTERNAL_ERROR",
}


class SecurityHeadersMiddleware:
    """Content-Security-Policy (Django 5.2 has no built-in CSP) and a permissions policy."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        response.headers.setdefault("Content-Security-Policy", settings.CONTENT_SECURITY_POLICY)
        response.headers.setdefault("Permissions-Policy", "camera=(), microphone=(), geolocation=()")
        return response


class ApiErrorMiddleware:
    """Errors produced outside DRF (unknown URL, CSRF page, crash) become the JSON envelope under /api/.

    DRF views already answer with the envelope; this catches what never reached one.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if not request.path.startswith(_API_PREFIX) or response.status_code < 400:
            return response
        if response.get("Content-Type", "").startswith("application/json"):
            return response
        status = response.status_code
        code = _CODES.get(status, "ERROR")
        try:
            message = HTTPStatus(status).phrase
        except ValueError:
            message = "Error"
        if status == 404:
            message = "No such API endpoint or object."
        json_response = JsonResponse(error_body(code, message), status=status, json_dumps_params={"ensure_ascii": False})
        for header in ("Allow", "Retry-After", "WWW-Authenticate"):
            if header in response:
                json_response[header] = response[header]
        return json_response


class MethodNotAllowedPageMiddleware:
    """A page opened with the wrong method (e.g. a form's POST address typed into the address bar)
    gets Cortex's 405 page instead of Django's blank one; the Allow header stays."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if response.status_code != 405 or request.path.startswith(_API_PREFIX) or response.content:
            return response
        from django.shortcuts import render

        page = render(request, "errors/405.html", {"allowed": response.get("Allow", "")}, status=405)
        if "Allow" in response:
            page["Allow"] = response["Allow"]
        return page

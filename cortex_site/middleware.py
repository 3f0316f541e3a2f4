"""Site-wide HTTP behaviour: security headers, and JSON errors everywhere under /api/."""

from __future__ import annotations

import logging
from collections.abc import Callable
from http import HTTPStatus

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse, QueryDict

from cortex_site.api import RETRY_AFTER_SECONDS, error_body
from cortex_site.errors import infrastructure_error

logger = logging.getLogger(__name__)

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


class NulInQueryMiddleware:
    """An API query-string value holding a NUL character is refused (400) before any view reads it: no
    text Cortex stores can hold one (PostgreSQL refuses it), so as a filter it could only fail the
    query it was put in — a 500 — never match. The OpenAPI documents every free-text query
    parameter with a pattern that says so (cortex_site/api_schema.py). A page's query string has
    its NULs dropped instead: pages read their parameters leniently."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        name = next((key for key, values in request.GET.lists() if "\x00" in key or any("\x00" in v for v in values)), None)
        if name is None:
            return self.get_response(request)
        if not request.path.startswith(_API_PREFIX):
            # Pages are lenient (a link someone mangled still opens): the NULs are dropped.
            cleaned = QueryDict(mutable=True)
            for key, values in request.GET.lists():
                cleaned.setlist(key.replace("\x00", ""), [value.replace("\x00", "") for value in values])
            cleaned._mutable = False
            request.GET = cleaned  # type: ignore[assignment]  # django-stubs: an immutable QueryDict, which this now is
            return self.get_response(request)
        shown = name.replace("\x00", "\\0")
        message = f"The query parameter {shown!r} holds a NUL character, which no text in Cortex can hold."
        return JsonResponse(error_body("INVALID_QUERY", message, {"parameter": shown}), status=400)


class ServiceUnavailableMiddleware:
    """A view that fails because PostgreSQL or Redis is unavailable answers 503 (507 when the
    database volume is full) with Retry-After — the JSON envelope under /api/, a
    standalone page elsewhere — instead of a 500 that reads like a bug. DRF views answer the same
    through cortex_site.api.exception_handler; this covers everything else.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        fault = infrastructure_error(exception)
        if fault is None:
            return None
        logger.warning("request failed on an unavailable service: %s", fault.details.get("service"), exc_info=exception)
        response: HttpResponse
        if request.path.startswith(_API_PREFIX):
            response = JsonResponse(error_body(fault.error_code, fault.message, fault.details), status=fault.status)
        else:
            # No context processors and no database: what failed may be what they need.
            from django.template import loader

            page = loader.get_template("errors/503.html").render(
                {"request_id": getattr(request, "request_id", ""), "status": fault.status, "message": fault.message}
            )
            response = HttpResponse(page, status=fault.status)
        response["Retry-After"] = str(RETRY_AFTER_SECONDS)
        return response


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

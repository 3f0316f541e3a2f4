"""Request ids: accept the client's X-Request-ID when it is sane, else make one; echo it on every response."""

from __future__ import annotations

import re
from collections.abc import Callable

from django.http import HttpRequest, HttpResponse

from audit.context import client_ip_var, new_request_id, request_id_var

_VALID_REQUEST_ID = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")


def client_ip(request: HttpRequest) -> str | None:
    # Behind a proxy, deployments set BEHIND_TLS_PROXY and the proxy sets REMOTE_ADDR via uvicorn's
    # --proxy-headers; we never trust X-Forwarded-For ourselves.
    return request.META.get("REMOTE_ADDR") or None


class RequestIdMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        supplied = request.headers.get("X-Request-ID", "")
        request_id = supplied if _VALID_REQUEST_ID.match(supplied) else new_request_id()
        request.request_id = request_id  # type: ignore[attr-defined]
        rid_token = request_id_var.set(request_id)
        ip_token = client_ip_var.set(client_ip(request))
        try:
            response = self.get_response(request)
        finally:
            request_id_var.reset(rid_token)
            client_ip_var.reset(ip_token)
        response["X-Request-ID"] = request_id
        return response

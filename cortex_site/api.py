"""REST conventions shared by every Cortex API view: the error envelope, pagination, throttling.

Every error under /api/ is `{"error_code", "message", "request_id", "details"}` with the
right status; every response carries X-Request-ID (set by audit.middleware).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, cast

from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.exceptions import RequestDataTooBig, TooManyFieldsSent
from django.core.exceptions import ValidationError as DjangoValidationError
from django.http import Http404
from rest_framework import exceptions, status
from rest_framework.pagination import CursorPagination
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.throttling import SimpleRateThrottle

from audit.context import current_request_id
from cortex_site.errors import CortexError, NotFound, ValidationFailed, infrastructure_error
from cortex_site.text import encodable

logger = logging.getLogger(__name__)
# What a 503/507 tells clients to wait: the embedded services restart in seconds.
RETRY_AFTER_SECONDS = 5

_DRF_CODES: dict[type[exceptions.APIException], str] = {
    exceptions.ParseError: "MALFORMED_REQUEST",
    exceptions.AuthenticationFailed: "INVALID_CREDENTIALS",
    exceptions.NotAuthenticated: "NOT_AUTHENTICATED",
    exceptions.PermissionDenied: "PERMISSION_DENIED",
    exceptions.NotFound: "NOT_FOUND",
    exceptions.MethodNotAllowed: "METHOD_NOT_ALLOWED",
    exceptions.NotAcceptable: "NOT_ACCEPTABLE",
    exceptions.UnsupportedMediaType: "UNSUPPORTED_MEDIA_TYPE",
    exceptions.Throttled: "RATE_LIMITED",
    exceptions.ValidationError: "VALIDATION_ERROR",
}


def error_body(error_code: str, message: str, details: dict[str, Any] | None = None) -> dict[str, Any]:
    # A refusal may repeat what was sent (a field's name, a choice): half an emoji there could not be answered.
    return {
        "error_code": error_code,
        "message": encodable(message),
        "request_id": current_request_id() or "",
        "details": encodable(details or {}),
    }


def error_response(
    status_code: int, error_code: str, message: str, details: dict[str, Any] | None = None, headers: dict[str, str] | None = None
) -> Response:
    return Response(error_body(error_code, message, details), status=status_code, headers=headers)


def _validation_message(detail: Any) -> str:
    if isinstance(detail, dict):
        for field, problems in detail.items():
            first = problems[0] if isinstance(problems, list) and problems else problems
            if isinstance(first, dict):
                return f"{field}: {_validation_message(first)}"
            return f"{field}: {first}" if field != "non_field_errors" else str(first)
    if isinstance(detail, list) and detail:
        return str(detail[0])
    return str(detail)


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response:
    if isinstance(exc, CortexError):
        _audit_refusal(exc, context.get("request"))
        return error_response(exc.status, exc.error_code, exc.message, exc.details)
    if isinstance(exc, RequestDataTooBig):
        return error_response(
            status.HTTP_413_REQUEST_ENTITY_TOO_LARGE, "PAYLOAD_TOO_LARGE", "The request body is larger than this server accepts."
        )
    if isinstance(exc, TooManyFieldsSent):
        return error_response(status.HTTP_400_BAD_REQUEST, "MALFORMED_REQUEST", "Too many fields in the request.")
    if isinstance(exc, Http404):
        return error_response(status.HTTP_404_NOT_FOUND, "NOT_FOUND", "Not found.")
    if isinstance(exc, DjangoPermissionDenied):
        return error_response(status.HTTP_403_FORBIDDEN, "PERMISSION_DENIED", "You are not allowed to do this.")
    if isinstance(exc, exceptions.APIException):
        headers: dict[str, str] = {}
        wait = getattr(exc, "wait", None) if isinstance(exc, exceptions.Throttled) else None
        if wait is not None:
            headers["Retry-After"] = str(int(wait) + 1)
        if isinstance(exc, exceptions.NotAuthenticated | exceptions.AuthenticationFailed):
            request: Request | None = context.get("request")
            view = context.get("view")
            if request is not None and view is not None:
                challenge = view.get_authenticate_header(request)
                if challenge:
                    headers["WWW-Authenticate"] = challenge
                    exc.status_code = status.HTTP_401_UNAUTHORIZED
        code = next((c for cls, c in _DRF_CODES.items() if isinstance(exc, cls)), "ERROR")
        if isinstance(exc, exceptions.AuthenticationFailed):
            detail_code = exc.get_codes()
            if isinstance(detail_code, str) and detail_code.isupper():
                code = detail_code
        if isinstance(exc, exceptions.ValidationError):
            return error_response(exc.status_code, code, _validation_message(exc.detail), {"fields": exc.detail}, headers)
        details: dict[str, Any] = {}
        if wait is not None:
            details["retry_after_seconds"] = int(wait) + 1
        return error_response(exc.status_code, code, str(exc.detail), details, headers)
    fault = infrastructure_error(exc)
    if fault is not None:
        logger.warning("API request failed on an unavailable service: %s", fault.details.get("service"), exc_info=exc)
        return error_response(
            fault.status, fault.error_code, fault.message, fault.details, {"Retry-After": str(RETRY_AFTER_SECONDS)}
        )
    logger.exception("Unhandled error in API view")
    return error_response(
        status.HTTP_500_INTERNAL_SERVER_ERROR,
        "INTERNAL_ERROR",
        "Something went wrong on our side; the request id identifies it in the logs.",
    )


def _audit_refusal(exc: CortexError, request: Request | None) -> None:
    """A 403 of an authenticated request goes to the audit log with its rule (memories.services.denials)."""
    if request is None:
        return
    principal = getattr(request, "_cortex_principal", None) or getattr(request._request, "_cortex_principal", None)
    if principal is None:
        return
    from memories.services.denials import denial_record

    denial_record(exc, principal=principal, via="rest", path=request.path)


_WHOLE_NUMBER = re.compile(r"-?[0-9]{1,18}")


def query_choice(request: Request, name: str, choices: Iterable[str], *, default: str | None) -> str | None:
    """An enum query parameter as the schema documents it: absent → `default`; one of `choices`, given
    once; anything else (blank included) → 400 INVALID_<NAME>."""
    allowed = sorted(choices)
    values = request.query_params.getlist(name)
    if not values:
        return default
    if len(values) == 1 and values[0] in allowed:
        return values[0]
    raise ValidationFailed(f"{name} must be one of {', '.join(allowed)}.", error_code=f"INVALID_{name.upper()}")


def query_int(request: Request, name: str, *, minimum: int, maximum: int) -> int | None:
    """A whole-number query parameter: absent → None; minimum..maximum, given once; else 400 INVALID_<NAME>."""
    values = request.query_params.getlist(name)
    if not values:
        return None
    if len(values) == 1 and _WHOLE_NUMBER.fullmatch(values[0]) and minimum <= int(values[0]) <= maximum:
        return int(values[0])
    raise ValidationFailed(
        f"{name} must be a whole number from {minimum} to {maximum}, given once.", error_code=f"INVALID_{name.upper()}"
    )


def query_limit(request: Request, *, default: int, maximum: int, name: str = "limit") -> int:
    """`?limit=` as the schema documents it: absent → `default`; a whole number 1..maximum; else 400 INVALID_LIMIT.

    Out-of-range values are refused rather than clamped, so what a client asked for is what it gets
    (the MCP tools refuse them too).
    """
    values = request.query_params.getlist(name)
    if not values:
        return default
    if len(values) == 1 and _WHOLE_NUMBER.fullmatch(values[0]) and 1 <= int(values[0]) <= maximum:
        return int(values[0])
    raise ValidationFailed(
        f"{name} must be a whole number from 1 to {maximum}, given once.",
        error_code="INVALID_LIMIT",
        details={"maximum": maximum},
    )


class CortexCursorPagination(CursorPagination):
    """Opaque-cursor pagination answering `{"results": [...], "next": url | null}`."""

    page_size = 20
    page_size_query_param = "limit"
    max_page_size = 100
    ordering = ("-created_at", "-id")

    # A cursor names a page this API handed out; one it did not names no page — 404, like any
    # object that is not there (an OpenAPI client cannot tell a real cursor from a string).
    _INVALID = "The cursor is not one this API handed out; start again without it and follow `next`."

    def get_page_size(self, request: Request) -> int:
        return query_limit(request, default=self.page_size, maximum=self.max_page_size)

    def decode_cursor(self, request: Request) -> Any:
        try:
            return super().decode_cursor(request)
        except exceptions.NotFound:
            raise NotFound(self._INVALID, error_code="INVALID_CURSOR") from None

    def paginate_queryset(self, queryset: Any, request: Request, view: Any = None) -> Any:
        # A readable cursor whose position is not a timestamp fails in the query, not in decoding.
        try:
            return super().paginate_queryset(queryset, request, view)
        except DjangoValidationError:
            raise NotFound(self._INVALID, error_code="INVALID_CURSOR") from None

    @classmethod
    def parameters(cls) -> list[Any]:
        """The OpenAPI query parameters this paginator reads."""
        # Imported here: the schema module imports DRF's views, which import this module's throttle.
        from cortex_site.api_schema import cursor_parameter, limit_parameter

        return [cursor_parameter(), limit_parameter(default=cls.page_size, maximum=cls.max_page_size)]

    def get_paginated_response(self, data: Any) -> Response:
        return Response({"results": data, "next": self.get_next_link()})

    def get_paginated_response_schema(self, schema: dict[str, Any]) -> dict[str, Any]:
        return {
            "type": "object",
            "required": ["results", "next"],
            "properties": {"results": schema, "next": {"type": "string", "nullable": True, "format": "uri"}},
        }


def _client_address(request: Request) -> str:
    """The audited client address (X-Forwarded-For only from CORTEX_TRUSTED_PROXIES).

    DRF's own get_ident believes any X-Forwarded-For when NUM_PROXIES is unset, so a caller could
    pick a fresh address, and a fresh budget, with every request.
    """
    from audit.middleware import client_ip

    return client_ip(getattr(request, "_request", request)) or "unknown"


class PrincipalRateThrottle(SimpleRateThrottle):
    """One budget per token, per signed-in user, or per IP for anonymous calls.

    A token's budget is shared by REST and MCP (see `token_throttle_wait`).
    """

    scope = "principal"

    def get_ident(self, request: Request) -> str:
        return _client_address(request)

    def get_cache_key(self, request: Request, view: Any) -> str | None:
        if request.auth is not None and hasattr(request.auth, "pk"):
            ident = f"token:{request.auth.pk}"
        elif request.user and request.user.is_authenticated:
            ident = f"user:{request.user.pk}"
        else:
            ident = f"ip:{self.get_ident(request)}"
        return self.cache_format % {"scope": self.scope, "ident": ident}


class AddressRateThrottle(SimpleRateThrottle):
    """One budget per client address, whoever calls: many tokens or accounts used from one place
    share it. Generous by default (CORTEX_API_RATE_PER_ADDRESS), since a NAT puts a whole office
    behind one address."""

    scope = "address"

    def get_cache_key(self, request: Request, view: Any) -> str | None:
        return self.cache_format % {"scope": self.scope, "ident": _client_address(request)}


@dataclass(frozen=True)
class _TokenCall:
    """What PrincipalRateThrottle reads of a request, for a call that did not come through DRF."""

    auth: Any
    user: Any = None


def token_throttle_wait(token: Any) -> float | None:
    """Charge one call to a token's budget (the same one its REST calls use): None when the call
    may go ahead, else the seconds until it may."""
    throttle = PrincipalRateThrottle()
    # The throttle reads the request only (never the view), so there is no view to pass.
    if throttle.allow_request(cast(Request, _TokenCall(auth=token)), cast(Any, None)):
        return None
    return throttle.wait() or 1.0

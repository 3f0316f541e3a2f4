"""Domain errors: what went wrong, as a status, an UPPER_SNAKE code and a sentence.

Services raise these; every interface (REST, UI, MCP, CLI) turns them into its own
shape. REST renders the envelope `{"error_code", "message", "request_id", "details"}`.
"""

from __future__ import annotations

from typing import Any


class CortexError(Exception):
    status: int = 400
    error_code: str = "BAD_REQUEST"
    default_message: str = "The request could not be processed."

    def __init__(
        self, message: str | None = None, *, error_code: str | None = None, details: dict[str, Any] | None = None
    ) -> None:
        self.message = message or self.default_message
        if error_code is not None:
            self.error_code = error_code
        self.details = details or {}
        super().__init__(self.message)


class ValidationFailed(CortexError):
    status = 400
    error_code = "VALIDATION_ERROR"
    default_message = "Some fields are invalid."


class NotAuthenticated(CortexError):
    status = 401
    error_code = "NOT_AUTHENTICATED"
    default_message = "Authentication is required."


class PermissionDenied(CortexError):
    status = 403
    error_code = "PERMISSION_DENIED"
    default_message = "You are not allowed to do this."


class NotFound(CortexError):
    """Missing and forbidden look the same from outside: both are NotFound."""

    status = 404
    error_code = "NOT_FOUND"
    default_message = "Not found."


class Conflict(CortexError):
    status = 409
    error_code = "CONFLICT"
    default_message = "The request conflicts with the current state."


class PayloadTooLarge(CortexError):
    status = 413
    error_code = "PAYLOAD_TOO_LARGE"
    default_message = "The request body is too large."


class UnsupportedMediaType(CortexError):
    status = 415
    error_code = "UNSUPPORTED_MEDIA_TYPE"
    default_message = "This content type is not supported."


class Unprocessable(CortexError):
    status = 422
    error_code = "UNPROCESSABLE"
    default_message = "The request is well-formed but cannot be processed."


class RateLimited(CortexError):
    status = 429
    error_code = "RATE_LIMITED"
    default_message = "Too many requests; retry shortly."


class ServiceUnavailable(CortexError):
    status = 503
    error_code = "SERVICE_UNAVAILABLE"
    default_message = "A service Cortex depends on is unavailable; retry shortly."

"""Domain errors: what went wrong, as a status, an UPPER_SNAKE code and a sentence.

Services raise these; every interface (REST, UI, MCP, CLI) turns them into its own
shape. REST renders the envelope `{"error_code", "message", "request_id", "details"}`.
"""

from __future__ import annotations

from dataclasses import dataclass
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


@dataclass(frozen=True)
class Denial:
    """Why an object that exists was answered as not found: the organization that owns it, what it
    is, and the access rule that hid it (`memories.access.DenialRule`). Never shown to the caller:
    the interfaces hand it to `memories.services.denials`, which records it in the owner's log."""

    organization_id: int
    target_type: str
    target_id: str
    rule: str


class NotFound(CortexError):
    """Missing and forbidden look the same from outside: both are NotFound.

    A selector that found the object but may not show it attaches `denial` (the owner and the rule);
    a missing id has none. The caller's answer is the same either way.
    """

    status = 404
    error_code = "NOT_FOUND"
    default_message = "Not found."

    def __init__(
        self,
        message: str | None = None,
        *,
        error_code: str | None = None,
        details: dict[str, Any] | None = None,
        denial: Denial | None = None,
    ) -> None:
        super().__init__(message, error_code=error_code, details=details)
        self.denial = denial


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


class InsufficientStorage(CortexError):
    status = 507
    error_code = "STORAGE_FULL"
    default_message = "The database has no space left to store this; nothing was saved. Retry once space is freed."


# PostgreSQL SQLSTATE 53100 disk_full ("could not extend file ...: No space left on device").
_DISK_FULL = "53100"


def infrastructure_error(exc: BaseException) -> CortexError | None:
    """The envelope error for a failure of a service Cortex depends on, or None if `exc` is not one.

    PostgreSQL unreachable or dropping the connection (Django's OperationalError/InterfaceError),
    Redis or the broker unreachable: 503 SERVICE_UNAVAILABLE with Retry-After. A database failure
    leaves nothing half-written (every multi-step write is one transaction, rolled back); memory
    writes never fail on the broker (their post-write work is swept up later, see
    memories.services.post_write). A full database volume: 507 STORAGE_FULL. Anything else is a
    bug and stays a 500.
    """
    from django.db import InterfaceError, OperationalError
    from kombu.exceptions import OperationalError as BrokerError
    from redis.exceptions import ConnectionError as RedisConnectionError
    from redis.exceptions import TimeoutError as RedisTimeoutError

    if isinstance(exc, OperationalError | InterfaceError):
        if getattr(exc.__cause__, "sqlstate", None) == _DISK_FULL:
            return InsufficientStorage(details={"service": "database"})
        return ServiceUnavailable(
            "The database is unavailable; nothing was changed. Retry shortly.", details={"service": "database"}
        )
    if isinstance(exc, RedisConnectionError | RedisTimeoutError | BrokerError):
        return ServiceUnavailable("Redis is unavailable; retry shortly.", details={"service": "redis"})
    return None

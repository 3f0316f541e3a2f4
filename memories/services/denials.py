"""Refused changes in the audit log, each with the rule that refused it.

A refusal that answers 403 — a read-only token, admin required, not enough authority, a token
narrowed away from a scope, a scope the principal may not write — is recorded as `access.denied`
with the rule (its error code) and where it happened. A refusal that answers 404 is not: foreign,
forbidden and missing look the same, and the log must not be the one place that tells them apart.

The interfaces record it once the refused work has rolled back (an event written inside the
service's transaction would vanish with it): REST's exception handler, the UI's `principal_view`
and form errors. MCP records its own in `mcp.call` (outcome denied, with the error code).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from audit.models import AuditEvent
from audit.services import record
from cortex_site.errors import CortexError, PermissionDenied
from memories.access import Principal

_bound: ContextVar[tuple[Principal, str, str] | None] = ContextVar("cortex_denial_principal", default=None)


@contextmanager
def denials_audited(principal: Principal, *, via: str, path: str = "") -> Iterator[None]:
    """Within this block, `denial_record(exc)` knows who was refused, through which interface and where."""
    token = _bound.set((principal, via, path))
    try:
        yield
    finally:
        _bound.reset(token)


def denial_record(exc: CortexError, *, principal: Principal | None = None, via: str = "", path: str = "") -> None:
    """Record a 403 refusal once (a second call for the same exception adds nothing)."""
    if not isinstance(exc, PermissionDenied) or getattr(exc, "_cortex_audited", False):
        return
    bound = _bound.get()
    if principal is None and bound is not None:
        principal, via, path = bound[0], via or bound[1], path or bound[2]
    if principal is None:
        return
    exc._cortex_audited = True  # type: ignore[attr-defined]
    record(
        "access.denied",
        organization=principal.organization_id,
        actor=principal.actor,
        outcome=AuditEvent.Outcome.DENIED,
        details={"rule": exc.error_code, "message": exc.message[:300], "via": via or "ui", "path": path[:300]},
    )

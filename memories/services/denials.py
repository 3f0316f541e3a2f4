"""Refusals in the audit log, each with the rule that refused it (action `access.denied`).

Two kinds, recorded by the interfaces once the refused work has rolled back (an event written
inside the service's transaction would vanish with it): REST's exception handler, the UI's
`principal_view` and form errors, and MCP's `run_tool`.

- A **403** (a read-only token, admin required, not enough authority, a token narrowed away from a
  scope, a scope the principal may not write) goes to the principal's own organization with the
  rule as its error code. MCP records those in `mcp.call` (outcome denied, with the error code).
- A **404 for something that exists** (another organization's object, a scope the principal may
  not read or its token was narrowed away from, a clearance above its rung, someone else's job or
  token) goes to the organization that OWNS the target, with the rule the selector found
  (`memories.access.DenialRule`) and the prober's identity as given, never to the prober's
  organization: its admins must not learn that the id exists elsewhere. A missing id has no
  owner and records nothing. The caller's answer is the same 404 as for a missing id.

Probing must not flood a chain: at most one 404 event per actor, rule and target a minute
(`DENIAL_WINDOW_SECONDS`, counted in the cache). While Redis is unreachable the window cannot be
counted and no 404 event is written (the 403 events, which are the caller's own, still are).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from django.core.cache import cache

from audit.models import AuditEvent
from audit.services import Actor, record
from cortex_site.errors import CortexError, Denial, NotFound, PermissionDenied
from memories.access import Principal

DENIAL_WINDOW_SECONDS = 60

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
    """Record a 403 refusal, or a 404 that hid an existing object, once (a second call for the same
    exception adds nothing). Any other error, and a 404 for a missing id, records nothing."""
    hidden = exc.denial if isinstance(exc, NotFound) else None
    if not (isinstance(exc, PermissionDenied) or hidden is not None) or getattr(exc, "_cortex_audited", False):
        return
    bound = _bound.get()
    if principal is None and bound is not None:
        principal, via, path = bound[0], via or bound[1], path or bound[2]
    if principal is None:
        return
    exc._cortex_audited = True  # type: ignore[attr-defined]
    if hidden is not None:
        _record_hidden(hidden, principal.actor, via=via or "ui", path=path)
        return
    record(
        "access.denied",
        organization=principal.organization_id,
        actor=principal.actor,
        outcome=AuditEvent.Outcome.DENIED,
        details={"rule": exc.error_code, "message": exc.message[:300], "via": via or "ui", "path": path[:300]},
    )


def _record_hidden(denial: Denial, actor: Actor, *, via: str, path: str) -> None:
    """One event in the owner's chain per actor, rule and target and window."""
    who = f"{actor.kind}:{actor.user_id or ''}:{actor.token_id or ''}:{actor.connector_id}"
    key = f"{denial.organization_id}|{who}|{denial.rule}|{denial.target_type}:{denial.target_id}"
    if not cache.add(f"cortex:denial:{hashlib.sha256(key.encode()).hexdigest()}", 1, DENIAL_WINDOW_SECONDS):
        return
    record(
        "access.denied",
        organization=denial.organization_id,
        actor=actor,
        target_type=denial.target_type,
        target_id=denial.target_id,
        outcome=AuditEvent.Outcome.DENIED,
        details={"rule": denial.rule, "answered": 404, "via": via, "path": path[:300]},
    )

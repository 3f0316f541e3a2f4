"""`record()` — the one way anything is written to the audit log — and `verify_chain()`."""

from __future__ import annotations

import hashlib
import ipaddress
import json
from dataclasses import dataclass
from typing import Any

from django.db import connection, transaction
from django.utils import timezone

from audit.actions import Action
from audit.context import current_client_ip, current_request_id
from audit.models import AuditEvent

GENESIS_HASH = "0" * 64


@dataclass(frozen=True)
class Actor:
    """Who acted, and through what (a session, a token, a connector, the CLI, the system)."""

    kind: str
    label: str = ""
    user_id: Any = None
    token_id: Any = None
    connector_id: str = ""

    @classmethod
    def system(cls, label: str = "system") -> Actor:
        return cls(kind=AuditEvent.ActorKind.SYSTEM, label=label)

    @classmethod
    def cli(cls, label: str = "cli") -> Actor:
        return cls(kind=AuditEvent.ActorKind.CLI, label=label)

    @classmethod
    def anonymous(cls, label: str = "") -> Actor:
        return cls(kind=AuditEvent.ActorKind.ANONYMOUS, label=label)


def _as_stored(details: dict[str, Any], ip: str | None) -> tuple[Any, str | None]:
    """`details` and `ip` exactly as PostgreSQL will give them back, so hashes recomputed later match.

    jsonb normalises numbers (1e20 comes back as 100000000000000000000, -0.0 as 0.0) and inet
    normalises addresses (2001:0DB8::1 comes back as 2001:db8::1); hashing the values we sent
    instead of the stored ones would make an intact chain look tampered with.
    """
    try:
        address = ipaddress.ip_address(ip) if ip else None
    except ValueError:
        address = None  # not an address (a misconfigured proxy header): record none rather than fail
    if address is not None and getattr(address, "scope_id", None):
        address = None  # inet has no zone ids
    with connection.cursor() as cursor:
        cursor.execute("SELECT %s::jsonb, host(%s::inet)", [json.dumps(details, default=str), str(address) if address else None])
        stored_details, stored_ip = cursor.fetchone()
    if isinstance(stored_details, str):  # Django loads jsonb as text and decodes it in JSONField
        stored_details = json.loads(stored_details)
    return stored_details, stored_ip


def _event_digest(event: AuditEvent) -> str:
    payload = {
        "organization_id": event.organization_id,
        "created_at": event.created_at.isoformat(),
        "actor": [
            event.actor_kind,
            str(event.actor_user_id or ""),
            str(event.actor_token_id or ""),
            event.actor_connector_id,
            event.actor_label,
        ],
        "action": event.action,
        "target": [event.target_type, event.target_id],
        "outcome": event.outcome,
        "request_id": event.request_id,
        "ip": event.ip or "",
        "details": event.details,
        "prev_hash": event.prev_hash,
    }
    blob = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(blob.encode()).hexdigest()


def _chain_lock(organization_id: int | None) -> None:
    # One writer per organization chain at a time; the lock ends with the transaction.
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(%s, %s)", [7301, organization_id or 0])


def record(
    action: Action | str,
    *,
    organization: Any,
    actor: Actor,
    target_type: str = "",
    target_id: Any = "",
    outcome: str = AuditEvent.Outcome.OK,
    details: dict[str, Any] | None = None,
) -> AuditEvent:
    """Append one event to the organization's chain (or the global chain when organization is None).

    Runs in its own (possibly nested) transaction: when the caller's transaction rolls back,
    the event goes with it — an audit row never claims a write that did not happen. Raises
    ValueError for an action that is not in `audit.actions.Action`.
    """
    try:
        action = Action(action)
    except ValueError:
        raise ValueError(f"unknown audit action {action!r}: add it to audit.actions.Action") from None
    organization_id = getattr(organization, "pk", organization)
    with transaction.atomic():
        _chain_lock(organization_id)
        stored_details, stored_ip = _as_stored(details or {}, current_client_ip())
        prev = AuditEvent.objects.filter(organization_id=organization_id).order_by("-id").values_list("hash", flat=True).first()
        event = AuditEvent(
            organization_id=organization_id,
            created_at=timezone.now(),
            actor_kind=actor.kind,
            actor_user_id=actor.user_id,
            actor_token_id=actor.token_id,
            actor_connector_id=actor.connector_id,
            actor_label=actor.label[:320],
            action=action.value,
            target_type=target_type,
            target_id=str(target_id or "")[:128],
            outcome=outcome,
            request_id=current_request_id() or "",
            ip=stored_ip,
            details=stored_details,
            prev_hash=prev or GENESIS_HASH,
        )
        event.hash = _event_digest(event)
        event.save(force_insert=True)
    return event


@dataclass(frozen=True)
class ChainReport:
    ok: bool
    count: int
    first_broken: int | None = None


def verify_chain(organization: Any) -> ChainReport:
    """Recompute every hash of an organization's chain in order; report the first event that does not match."""
    organization_id = getattr(organization, "pk", organization)
    expected_prev = GENESIS_HASH
    count = 0
    for event in AuditEvent.objects.filter(organization_id=organization_id).order_by("id").iterator(chunk_size=2000):
        count += 1
        if event.prev_hash != expected_prev or _event_digest(event) != event.hash:
            return ChainReport(ok=False, count=count, first_broken=event.pk)
        expected_prev = event.hash
    return ChainReport(ok=True, count=count)

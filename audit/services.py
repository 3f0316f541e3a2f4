"""`record()` — the one way anything is written to the audit log — `verify_chain()`, signed
checkpoints that anchor each chain's head outside the events table, and retention."""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from audit.actions import Action
from audit.context import current_client_ip, current_request_id
from audit.models import AuditCheckpoint, AuditEvent

logger = logging.getLogger("cortex.audit")

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


def valid_address(ip: str | None) -> str | None:
    """The client address as inet can store it, or None."""
    try:
        address = ipaddress.ip_address(ip) if ip else None
    except ValueError:
        return None  # not an address (a misconfigured proxy header): record none rather than fail
    if address is None or getattr(address, "scope_id", None):
        return None  # inet has no zone ids
    return str(address)


def _as_stored(details: dict[str, Any], ip: str | None) -> tuple[Any, str | None]:
    """`details` and `ip` exactly as PostgreSQL will give them back, so hashes recomputed later match.

    jsonb normalises numbers (1e20 comes back as 100000000000000000000, -0.0 as 0.0) and inet
    normalises addresses (2001:0DB8::1 comes back as 2001:db8::1); hashing the values we sent
    instead of the stored ones would make an intact chain look tampered with.
    """
    with connection.cursor() as cursor:
        cursor.execute("SELECT %s::jsonb, host(%s::inet)", [json.dumps(details, default=str), valid_address(ip)])
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


def lock_chain(organization: Any) -> None:
    """Take the organization's audit-chain lock now (it ends with the transaction).

    For a write that locks rows and then records: taking the chain first keeps one lock order —
    chain, then rows — with writes that record before they touch those rows, so the two never
    wait on each other in a cycle.
    """
    _chain_lock(getattr(organization, "pk", organization))


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
        # Before the chain lock, which every writer of the organization waits for: nothing here
        # depends on the chain, and each statement under the lock is a round trip all of them wait out.
        stored_details, stored_ip = _as_stored(details or {}, current_client_ip())
        _chain_lock(organization_id)
        prev = _chain_head(organization_id)
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
            prev_hash=prev,
        )
        event.hash = _event_digest(event)
        event.save(force_insert=True)
    return event


def _chain_head(organization_id: Any) -> str:
    """The hash the organization's next event links to; call it holding the chain lock."""
    head = AuditEvent.objects.filter(organization_id=organization_id).order_by("-id").values_list("hash", flat=True).first()
    if head is None:
        # Retention may have removed every event: the chain goes on from the last one removed.
        head = (
            AuditCheckpoint.objects.filter(organization_id=organization_id, kind=AuditCheckpoint.Kind.RETENTION)
            .order_by("-id")
            .values_list("last_hash", flat=True)
            .first()
        )
    return head or GENESIS_HASH


@dataclass(frozen=True)
class EventSpec:
    """One event for `record_many`: what `record` takes besides the organization and the actor."""

    action: Action | str
    target_type: str = ""
    target_id: Any = ""
    outcome: str = AuditEvent.Outcome.OK
    details: dict[str, Any] | None = None
    # An event recorded after the request it belongs to (a webhook delivery's, appended by a
    # worker) carries that request's id and client address; None: the current context's.
    request_id: str | None = None
    ip: str | None = None


def record_many(events: Sequence[EventSpec], *, organization: Any, actor: Actor) -> list[AuditEvent]:
    """Append several events by one actor to the organization's chain, in order, under one chain lock.

    The same chain as `record` called once per event (each event's `prev_hash` is the hash of the
    one before it), written with four statements whatever the count: the lock, one round trip
    that normalises every `details` (and ip) as PostgreSQL stores it, the chain's head, and one
    INSERT. Ids follow the list's order (one INSERT assigns the sequence row by row), which is the
    order `verify_chain` walks. Same transaction rules as `record`; raises ValueError, before
    writing anything, for an action that is not in `audit.actions.Action`.
    """
    try:
        actions = [Action(event.action) for event in events]
    except ValueError as exc:
        raise ValueError(f"unknown audit action: add it to audit.actions.Action ({exc})") from None
    if not events:
        return []
    organization_id = getattr(organization, "pk", organization)
    with transaction.atomic():
        _chain_lock(organization_id)
        context_ip, context_request_id = current_client_ip(), current_request_id() or ""
        stored = _as_stored_many(
            [event.details or {} for event in events], [context_ip if event.ip is None else event.ip for event in events]
        )
        prev = _chain_head(organization_id)
        rows: list[AuditEvent] = []
        for event, action, (stored_ip, details) in zip(events, actions, stored, strict=True):
            row = AuditEvent(
                organization_id=organization_id,
                created_at=timezone.now(),
                actor_kind=actor.kind,
                actor_user_id=actor.user_id,
                actor_token_id=actor.token_id,
                actor_connector_id=actor.connector_id,
                actor_label=actor.label[:320],
                action=action.value,
                target_type=event.target_type,
                target_id=str(event.target_id or "")[:128],
                outcome=event.outcome,
                request_id=(context_request_id if event.request_id is None else event.request_id)[:128],
                ip=stored_ip,
                details=details,
                prev_hash=prev,
            )
            row.hash = prev = _event_digest(row)
            rows.append(row)
        AuditEvent.objects.bulk_create(rows)
    return rows


def _as_stored_many(details: Sequence[dict[str, Any]], ips: Sequence[str | None]) -> list[tuple[str | None, Any]]:
    """`_as_stored` for several (details, ip) pairs at once, in one round trip, in order."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT host(i::inet), d::jsonb FROM unnest(%s::text[], %s::text[]) WITH ORDINALITY AS t(d, i, n) ORDER BY n",
            [[json.dumps(d, default=str) for d in details], [valid_address(ip) for ip in ips]],
        )
        rows = cursor.fetchall()
    return [(ip, json.loads(value) if isinstance(value, str) else value) for ip, value in rows]


@dataclass(frozen=True)
class ChainReport:
    ok: bool
    count: int
    first_broken: int | None = None
    reason: str = ""
    head_id: int | None = None
    head_hash: str = ""


# -- signed checkpoints ---------------------------------------------------------------------------------
def _signature(
    organization_id: int | None, kind: str, last_event_id: int, last_hash: str, event_count: int, created_at: Any
) -> str:
    message = f"{organization_id or ''}|{kind}|{last_event_id}|{last_hash}|{event_count}|{created_at.isoformat()}"
    return hmac.new(settings.CORTEX_AUDIT_KEY.encode(), message.encode(), hashlib.sha256).hexdigest()


def _signed(checkpoint: AuditCheckpoint) -> bool:
    expected = _signature(
        checkpoint.organization_id,
        checkpoint.kind,
        checkpoint.last_event_id,
        checkpoint.last_hash,
        checkpoint.event_count,
        checkpoint.created_at,
    )
    return hmac.compare_digest(expected, checkpoint.signature)


def _checkpoint(organization_id: Any, kind: str, last_event_id: int, last_hash: str, event_count: int) -> AuditCheckpoint:
    created_at = timezone.now()
    checkpoint = AuditCheckpoint.objects.create(
        organization_id=organization_id,
        kind=kind,
        created_at=created_at,
        last_event_id=last_event_id,
        last_hash=last_hash,
        event_count=event_count,
        signature=_signature(organization_id, kind, last_event_id, last_hash, event_count, created_at),
    )
    # Also to the log, so a copy of every head lives outside the database too.
    logger.info(
        "audit checkpoint org=%s kind=%s event=%s hash=%s count=%s sig=%s",
        organization_id,
        kind,
        last_event_id,
        last_hash,
        event_count,
        checkpoint.signature,
    )
    return checkpoint


def _latest(organization_id: Any, kind: str) -> AuditCheckpoint | None:
    return AuditCheckpoint.objects.filter(organization_id=organization_id, kind=kind).order_by("-id").first()


def _walk(organization_id: Any, *, after_id: int, expected_prev: str, counted: int) -> ChainReport:
    count = counted
    head_id, head_hash = None, expected_prev
    events = AuditEvent.objects.filter(organization_id=organization_id, id__gt=after_id).order_by("id")
    for event in events.iterator(chunk_size=2000):
        count += 1
        if event.prev_hash != expected_prev or _event_digest(event) != event.hash:
            return ChainReport(ok=False, count=count, first_broken=event.pk, reason="an event was changed, inserted or removed")
        expected_prev = event.hash
        head_id, head_hash = event.pk, event.hash
    return ChainReport(ok=True, count=count, head_id=head_id, head_hash=head_hash)


def verify_chain(organization: Any) -> ChainReport:
    """Recompute an organization's chain in order and check it against the signed checkpoints.

    The walk starts after the latest retention cut (the first event left must follow the removed
    one's hash); the latest head checkpoint's event must still be there with its hash, so removing
    the newest events — or all of them — is reported, not mistaken for a shorter chain.
    """
    organization_id = getattr(organization, "pk", organization)
    cut = _latest(organization_id, AuditCheckpoint.Kind.RETENTION)
    head = _latest(organization_id, AuditCheckpoint.Kind.HEAD)
    for checkpoint in (cut, head):
        if checkpoint is not None and not _signed(checkpoint):
            return ChainReport(
                ok=False, count=0, first_broken=checkpoint.last_event_id, reason="a checkpoint's signature is wrong"
            )
    after_id = cut.last_event_id if cut is not None else 0
    report = _walk(
        organization_id,
        after_id=after_id,
        expected_prev=cut.last_hash if cut is not None else GENESIS_HASH,
        counted=cut.event_count if cut is not None else 0,
    )
    if not report.ok or head is None or head.last_event_id <= after_id:
        return report
    anchored = AuditEvent.objects.filter(organization_id=organization_id, pk=head.last_event_id, hash=head.last_hash).exists()
    if not anchored:
        return ChainReport(
            ok=False,
            count=report.count,
            first_broken=head.last_event_id,
            reason="events up to a signed checkpoint are missing (the newest events were removed)",
        )
    return report


def checkpoint(organization: Any) -> ChainReport:
    """Verify what was appended since the last head checkpoint and, when intact, sign the new head.

    Incremental (cheap enough to run every few minutes); a broken chain is reported and never signed.
    """
    organization_id = getattr(organization, "pk", organization)
    with transaction.atomic():
        _chain_lock(organization_id)
        head = _latest(organization_id, AuditCheckpoint.Kind.HEAD)
        cut = _latest(organization_id, AuditCheckpoint.Kind.RETENTION)
        start = max((c for c in (head, cut) if c is not None), key=lambda c: c.last_event_id, default=None)
        if start is not None:
            if not _signed(start):
                return ChainReport(
                    ok=False, count=0, first_broken=start.last_event_id, reason="a checkpoint's signature is wrong"
                )
            if (
                start.kind == AuditCheckpoint.Kind.HEAD
                and not AuditEvent.objects.filter(
                    organization_id=organization_id, pk=start.last_event_id, hash=start.last_hash
                ).exists()
            ):
                return ChainReport(
                    ok=False,
                    count=start.event_count,
                    first_broken=start.last_event_id,
                    reason="events up to a signed checkpoint are missing (the newest events were removed)",
                )
        report = _walk(
            organization_id,
            after_id=start.last_event_id if start else 0,
            expected_prev=start.last_hash if start else GENESIS_HASH,
            counted=start.event_count if start else 0,
        )
        if report.ok and report.head_id is not None:
            _checkpoint(organization_id, AuditCheckpoint.Kind.HEAD, report.head_id, report.head_hash, report.count)
        return report


def verify_and_checkpoint(organization: Any) -> ChainReport:
    """A full verification; when it holds, the current head is signed too (verify anchors what it proved)."""
    report = verify_chain(organization)
    if report.ok and report.head_id is not None:
        organization_id = getattr(organization, "pk", organization)
        with transaction.atomic():
            _chain_lock(organization_id)
            latest = _latest(organization_id, AuditCheckpoint.Kind.HEAD)
            if latest is None or latest.last_event_id < report.head_id:
                _checkpoint(organization_id, AuditCheckpoint.Kind.HEAD, report.head_id, report.head_hash, report.count)
    return report


# -- retention ------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class RetentionResult:
    removed: int
    more: bool
    refused: str = ""


def enforce_retention(organization: Any, *, batch_size: int = 1000, now: datetime | None = None) -> RetentionResult:
    """Remove up to `batch_size` of the oldest events past the organization's retention period.

    In one transaction under the chain lock: the removed prefix is verified first (tampered
    history is never blessed), a signed retention checkpoint of the last removed event is written,
    then the rows go (the append-only trigger lets exactly that prefix through) and the removal
    itself is audited. The chain verifies across the cut.
    """
    from memories.models import Organization

    org = organization if isinstance(organization, Organization) else Organization.objects.get(pk=organization)
    cutoff = (now or timezone.now()) - timedelta(days=org.audit_retention_days)
    with transaction.atomic():
        _chain_lock(org.pk)
        cut = _latest(org.pk, AuditCheckpoint.Kind.RETENTION)
        chain = AuditEvent.objects.filter(organization_id=org.pk)
        # Only a prefix of the chain can go: everything before the first event that is still within
        # the period (ids and times normally agree; when a clock stepped back, the younger event wins).
        first_kept = chain.filter(created_at__gte=cutoff).order_by("id").values_list("id", flat=True).first()
        candidates = chain.filter(id__lt=first_kept) if first_kept is not None else chain
        expired = list(candidates.order_by("id").values_list("id", flat=True)[: batch_size + 1])
        if not expired:
            return RetentionResult(removed=0, more=False)
        more = len(expired) > batch_size
        last_id = expired[:batch_size][-1]
        if cut is not None and not _signed(cut):
            return RetentionResult(removed=0, more=False, refused="a checkpoint's signature is wrong")
        expected_prev = cut.last_hash if cut is not None else GENESIS_HASH
        removed = 0
        last_hash = expected_prev
        prefix = AuditEvent.objects.filter(organization_id=org.pk, id__gt=cut.last_event_id if cut else 0, id__lte=last_id)
        for event in prefix.order_by("id").iterator(chunk_size=2000):
            if event.prev_hash != expected_prev or _event_digest(event) != event.hash:
                logger.error("audit retention refused for org %s: event %s does not verify", org.pk, event.pk)
                return RetentionResult(removed=0, more=False, refused=f"event {event.pk} does not verify")
            expected_prev = last_hash = event.hash
            removed += 1
        total = (cut.event_count if cut is not None else 0) + removed
        _checkpoint(org.pk, AuditCheckpoint.Kind.RETENTION, last_id, last_hash, total)
        with connection.cursor() as cursor:
            cursor.execute("SELECT set_config('cortex.audit_purge', %s, true)", [f"{org.pk}:{last_id}"])
            deleted, _ = AuditEvent.objects.filter(organization_id=org.pk, id__lte=last_id).delete()
            cursor.execute("SELECT set_config('cortex.audit_purge', '', true)")
        record(
            "audit.retention",
            organization=org,
            actor=Actor.system("retention"),
            details={
                "removed": deleted,
                "through_event": last_id,
                "older_than": cutoff,
                "retention_days": org.audit_retention_days,
            },
        )
    return RetentionResult(removed=deleted, more=more)

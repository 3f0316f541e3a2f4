"""Webhook deliveries: verify → store (deduplicated) → enqueue on commit → answer; then a worker
turns the stored payload into memories through the same upsert as a sync page.

The signature is checked on the raw body before anything is parsed. A delivery id seen before
is answered as a success and does nothing, so a source's retries never duplicate a memory.

Refusals, in the order they are checked (each audited as `webhook.reject` with its reason, and
nothing else written): an unknown connector, or a kind without webhooks, 404 (no organization to
audit it in); a body over CORTEX_MAX_BODY_BYTES 413 PAYLOAD_TOO_LARGE, before it is read; a bad,
missing or stale signature 401 INVALID_SIGNATURE; a header the source always sends missing 400
MISSING_HEADER; a content type other than JSON 415 UNSUPPORTED_MEDIA_TYPE (GitHub's form-encoded
deliveries are read from their `payload` field); a body that is not a JSON object 400 MALFORMED_REQUEST.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any
from urllib.parse import parse_qs

from django.core.cache import cache
from django.db import connection, transaction
from django.db.models import Q
from django.utils import timezone
from kombu.exceptions import OperationalError as BrokerError
from redis.exceptions import ConnectionError as RedisConnectionError

from audit.context import current_client_ip, current_request_id
from audit.models import AuditEvent
from audit.services import Actor, EventSpec, record, record_many, valid_address
from connectors.base import ParsedDelivery
from connectors.errors import InvalidSignature, PermanentSourceError, RetryableSourceError
from connectors.models import Connector, Delivery, SyncRun
from connectors.registry import SOURCES, source_class, source_for
from connectors.services import backoff
from connectors.services.connectors import connector_set_error
from connectors.services.sync import _apply_counts, _connector_lock, upsert_items
from cortex_site.errors import CortexError, NotFound, PayloadTooLarge, UnsupportedMediaType, ValidationFailed
from cortex_site.model_rows import row_reader, table_and_columns
from cortex_site.text import storable

logger = logging.getLogger(__name__)

FORM = "application/x-www-form-urlencoded"
DELIVERY_ATTEMPTS = 6
# Set while an audit-step task for ignored deliveries is queued (see _enqueue_events).
EVENTS_PENDING = "cortex:delivery-events-pending"
EVENTS_PENDING_SECONDS = 30


class SignatureRejected(CortexError):
    status = 401
    error_code = "INVALID_SIGNATURE"
    default_message = "The webhook signature does not verify."


@dataclass(frozen=True)
class DeliveryAnswer:
    status: int
    body: dict[str, Any]


def _connector(kind: str, connector_id: Any) -> Connector:
    try:
        pk = uuid.UUID(str(connector_id))
    except ValueError:
        raise NotFound("No such webhook.") from None
    # A kind that takes no webhooks has no webhook address, even for a connector that exists.
    if kind not in SOURCES or not source_class(kind).push:
        raise NotFound("No such webhook.")
    connector = _connector_by_id(pk, kind)
    if connector is None:
        raise NotFound("No such webhook.")
    return connector


def _connector_by_id(pk: uuid.UUID, kind: str) -> Connector | None:
    """`Connector.objects.filter(pk=pk, kind=kind).first()` without the queryset, which built and
    compiled its SQL on every delivery: 0.51 → 0.18 ms of the web process's CPU per delivery
    (docs/benchmarks.md). Each value passes through its field's converters, as the ORM's would."""
    reader = row_reader(Connector, connection)
    table, columns = table_and_columns(Connector, reader.fields, connection)
    # The model's own table and column names; the values are parameters.
    sql = f"SELECT {columns} FROM {table} WHERE id = %s AND kind = %s"  # noqa: S608
    with connection.cursor() as cursor:
        cursor.execute(sql, [pk, kind])
        row = cursor.fetchone()
    return None if row is None else reader.read(row, connection)


def _reject(connector: Connector, error: CortexError) -> CortexError:
    """Audit a refused delivery against its connector; the caller raises the error returned."""
    record(
        "webhook.reject",
        organization=connector.organization_id,
        actor=_delivery_actor(connector, ""),
        target_type="connector",
        target_id=connector.pk,
        outcome=AuditEvent.Outcome.DENIED,
        details={"kind": connector.kind, "error_code": error.error_code, "reason": error.message},
    )
    return error


def delivery_refuse_oversized(*, kind: str, connector_id: Any, size: int, limit: int) -> None:
    """A body over the limit, refused (and audited) without reading it: always raises."""
    connector = _connector(kind, connector_id)
    raise _reject(
        connector,
        PayloadTooLarge(
            f"The delivery is {size:,} bytes; this webhook accepts at most {limit:,}.", details={"size": size, "limit": limit}
        ),
    )


def _check_body(connector: Connector, headers: Mapping[str, str], body: bytes) -> dict[str, Any]:
    """After the signature: the headers the source always sends, a JSON content type (or a form
    whose `delivery_form_field` holds the JSON, for a source that sends one), a JSON object —
    returned parsed, so the source does not parse it again."""
    source = source_class(connector.kind)
    missing = [name for name in source.delivery_headers if not (headers.get(name) or "").strip()]
    if missing:
        raise _reject(
            connector,
            ValidationFailed(
                f"The delivery lacks the {', '.join(missing)} header{'s' if len(missing) > 1 else ''} "
                f"{source.label} always sends.",
                error_code="MISSING_HEADER",
                details={"missing": missing},
            ),
        )
    media_type = (headers.get("Content-Type") or "").split(";", 1)[0].strip().lower()
    form_field = source.delivery_form_field
    if media_type == FORM and form_field:
        # The JSON is the form's one `form_field` value (the signature covered the form as sent).
        try:
            values = parse_qs(body.decode("utf-8"), keep_blank_values=True).get(form_field) or []
        except UnicodeDecodeError:
            values = []
        if len(values) != 1:
            raise _reject(
                connector,
                ValidationFailed(
                    f"The form-encoded delivery has no single {form_field} field holding its JSON.",
                    error_code="MALFORMED_REQUEST",
                ),
            )
        body = values[0].encode()
    elif media_type != "application/json":
        accepted = "application/json" + (f" (or {FORM} with a {form_field} field)" if form_field else "")
        raise _reject(
            connector,
            UnsupportedMediaType(
                f"Deliveries must be {accepted}, not {media_type or 'a body without a content type'}; "
                "set the webhook's content type to JSON at the source.",
                details={"content_type": media_type},
            ),
        )
    try:
        payload = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        payload = None
    if not isinstance(payload, dict):
        raise _reject(connector, ValidationFailed("The delivery body is not a JSON object.", error_code="MALFORMED_REQUEST"))
    return payload


def delivery_receive(*, kind: str, connector_id: Any, headers: Mapping[str, str], body: bytes) -> DeliveryAnswer:
    """Everything a webhook view does once the body is read (within its limit); raises NotFound
    (unknown connector or kind), SignatureRejected (401) or the refusals of `_check_body`."""
    connector = _connector(kind, connector_id)
    source = source_for(connector)
    try:
        source.verify_delivery(headers=headers, body=body)
    except InvalidSignature as exc:
        raise _reject(connector, SignatureRejected(exc.message)) from None
    payload = _check_body(connector, headers, body)
    parsed = source.parse_delivery(headers=headers, body=body, payload=payload)
    if parsed.immediate_response is not None:
        return DeliveryAnswer(200, parsed.immediate_response)
    delivery, action, reason = delivery_accept(connector=connector, parsed=parsed)
    if action == "webhook.duplicate":
        return DeliveryAnswer(200, {"ok": True, "duplicate": True})
    if action == "webhook.ignore":
        return DeliveryAnswer(202, {"ok": True, "ignored": True, "reason": reason})
    return DeliveryAnswer(200, {"ok": True, "delivery": str(delivery.pk)})


def delivery_accept(*, connector: Connector, parsed: ParsedDelivery, via: str = "") -> tuple[Delivery, str, str]:
    """Store a verified delivery once (deduplicated by its id) and enqueue it on commit.

    Shared by webhooks and Slack's Socket Mode (`via="socket_mode"`). Returns the delivery, the
    audit action that says what happened (`webhook.accept`, `webhook.ignore` or
    `webhook.duplicate`) and, for an ignored one, why.

    One statement (a duplicate's answer reads the stored one too), and no audit event: recording
    here would take the organization's audit-chain lock, which every audited write of the
    organization waits for, so a burst of deliveries would be answered one at a time. The event is
    appended later, exactly once (`Delivery.audited`): an accepted delivery's by the worker that
    processes it, an ignored one's by `delivery_record_events`, triggered on commit (and by the
    beat sweep, which also records the accepted ones whose task was lost). A duplicate is the
    source retrying an event already stored (and recorded): it writes nothing, no event either.
    """
    paused = connector.status == Connector.Status.PAUSED
    ignored = parsed.ignored or paused
    reason = "The connector is paused." if paused and not parsed.ignored else parsed.reason
    delivery = Delivery(
        connector=connector,
        delivery_id=storable(parsed.delivery_id)[:200],
        organization_id=connector.organization_id,
        event=storable(parsed.event)[:100],
        status=Delivery.Status.IGNORED if ignored else Delivery.Status.RECEIVED,
        # An ignored delivery keeps what it was, not its content. What the source sent may hold a NUL
        # or half an emoji (valid JSON escapes, which PostgreSQL refuses): kept as it can be stored.
        payload={} if ignored else storable(parsed.payload),
        error=storable(reason) if ignored else "",
        processed_at=timezone.now() if ignored else None,
        via=via,
        request_id=(current_request_id() or "")[:128],
        client_ip=valid_address(current_client_ip()),
    )
    # No transaction of its own: the one statement is atomic, and in autocommit it commits without
    # a COMMIT round trip; the on-commit hooks then run at once (or, inside a caller's
    # transaction, when that commits).
    if not _insert_once(delivery):
        return Delivery.objects.get(connector=connector, delivery_id=delivery.delivery_id), "webhook.duplicate", reason
    delivery_pk = delivery.pk
    if ignored:
        transaction.on_commit(_enqueue_events)
        return delivery, "webhook.ignore", reason
    transaction.on_commit(lambda: _enqueue(delivery_pk))
    return delivery, "webhook.accept", reason


def _delivery_actor(connector: Connector, via: str) -> Actor:
    """Who the delivery's audit event names: the source's webhook, or how else it came ("slack socket mode")."""
    label = f"{connector.kind} {via.replace('_', ' ') if via else 'webhook'}"
    return Actor(kind=AuditEvent.ActorKind.ANONYMOUS, label=label, connector_id=str(connector.pk))


def _delivery_event(delivery: Delivery, connector: Connector) -> EventSpec:
    """The delivery's `webhook.accept` or `webhook.ignore`, as the answer saw it.

    Appended after the answer, so the event's own time (`created_at`) is when it joined the chain;
    `received_at` in its details is when the delivery was answered, and its request id and address
    are the answer's.
    """
    details: dict[str, Any] = {
        "kind": connector.kind,
        "event": delivery.event,
        "delivery_id": delivery.delivery_id,
        "received_at": delivery.received_at.isoformat(),
    }
    if delivery.via:
        details["via"] = delivery.via
    ignored = delivery.status == Delivery.Status.IGNORED
    if ignored:
        details["reason"] = delivery.error
    return EventSpec(
        "webhook.ignore" if ignored else "webhook.accept",
        target_type="delivery",
        target_id=delivery.pk,
        details=details,
        request_id=delivery.request_id,
        ip=delivery.client_ip or "",
    )


def _record_delivery_event(delivery: Delivery, connector: Connector) -> None:
    """Append a delivery's event unless it is in the chain already; the caller holds the
    delivery's row lock and saves `audited` in the same transaction."""
    if not delivery.audited:
        record_many(
            [_delivery_event(delivery, connector)],
            organization=connector.organization_id,
            actor=_delivery_actor(connector, delivery.via),
        )
        delivery.audited = True


def delivery_record_events(*, batch_size: int, grace_seconds: int) -> int:
    """Append the events of up to `batch_size` deliveries not yet in the audit chain, oldest first,
    in one transaction (one chain lock per organization, one INSERT per organization and actor);
    returns how many were recorded.

    Ignored deliveries (no worker processes them) are taken at once; any other only
    `grace_seconds` after it arrived, time for its worker to record it — past that its task was
    lost (Redis was down) or it gave up without processing it. Rows a worker holds are skipped,
    and each row's `audited` is set in the transaction that records its event, so overlapping runs,
    and runs repeated, record nothing twice.
    """
    cutoff = timezone.now() - timedelta(seconds=grace_seconds)
    with transaction.atomic():
        deliveries = list(
            Delivery.objects.select_for_update(skip_locked=True, of=("self",))
            .select_related("connector")
            .filter(audited=False)
            .filter(Q(status=Delivery.Status.IGNORED) | Q(received_at__lt=cutoff))
            .order_by("received_at", "pk")[:batch_size]
        )
        groups: dict[tuple[Any, Any, str], list[Delivery]] = {}
        for delivery in deliveries:
            groups.setdefault((delivery.organization_id, delivery.connector_id, delivery.via), []).append(delivery)
        for (organization_id, _connector_id, via), batch in groups.items():
            connector = batch[0].connector
            record_many(
                [_delivery_event(delivery, connector) for delivery in batch],
                organization=organization_id,
                actor=_delivery_actor(connector, via),
            )
        Delivery.objects.filter(pk__in=[delivery.pk for delivery in deliveries]).update(audited=True)
    if deliveries:
        logger.info("recorded the audit events of %d deliveries", len(deliveries))
    return len(deliveries)


def _enqueue_events() -> bool:
    """Ask a worker to record the waiting deliveries' events (on commit), unless a request is
    already waiting; False when the broker is unreachable — the beat sweep records them then.

    One task serves a burst: the answer enqueues only when it sets the EVENTS_PENDING flag, and the
    task clears the flag before it reads (`events_pending_clear`), so a delivery committed after
    that read finds the flag clear and enqueues the next task. The flag expires, so a lost task
    holds nothing back for long (and the sweep records what it missed)."""
    from connectors.tasks import record_delivery_events

    # While Redis is unreachable the (fail-soft) cache adds nothing and the broker, on the same
    # server, takes nothing either: the beat sweep records these events once it is back.
    if not cache.add(EVENTS_PENDING, 1, EVENTS_PENDING_SECONDS):
        return True
    try:
        record_delivery_events.delay()
    except (BrokerError, RedisConnectionError):
        logger.warning("could not enqueue the delivery audit step (broker unreachable); the delivery sweep will")
        return False
    return True


def events_pending_clear() -> None:
    """The audit step is about to read the waiting deliveries: the next one committed enqueues again."""
    cache.delete(EVENTS_PENDING)  # fail-soft: if Redis is unreachable, the flag expires on its own


def _insert_once(delivery: Delivery) -> bool:
    """Insert `delivery` unless its connector already has one with its delivery id; True when inserted.

    One statement (INSERT ... ON CONFLICT DO NOTHING) where get_or_create takes four (SELECT,
    SAVEPOINT, INSERT, RELEASE) — each a round trip inside every webhook answer. A concurrent
    insert of the same id waits for the other transaction: it conflicts if that one commits and
    inserts if it rolls back, so a delivery is stored exactly once either way.
    """
    fields = list(Delivery._meta.concrete_fields)
    values = [field.get_db_prep_save(field.pre_save(delivery, add=True), connection) for field in fields]
    table, columns = table_and_columns(Delivery, fields, connection)
    conflict = "ON CONFLICT (connector_id, delivery_id, organization_id) DO NOTHING RETURNING 1"
    # The model's own table and column names; every value is a parameter.
    sql = f"INSERT INTO {table} ({columns}) VALUES ({', '.join(['%s'] * len(fields))}) {conflict}"  # noqa: S608
    with connection.cursor() as cursor:
        cursor.execute(sql, values)
        return cursor.fetchone() is not None


def _enqueue(delivery_id: Any) -> bool:
    """Hand a stored delivery to the worker (on commit); False when the broker is unreachable.

    The delivery is already stored and its answer is a success either way: a source would retry a
    failed answer with the same delivery id, which dedupe then answers without enqueuing anything.
    A delivery left `received` is picked up again by `delivery_sweep` (beat) once Redis is back.
    """
    from connectors.tasks import process_delivery

    try:
        process_delivery.delay(str(delivery_id))
    except (BrokerError, RedisConnectionError):
        logger.warning("could not enqueue delivery %s (broker unreachable); the delivery sweep will", delivery_id)
        return False
    return True


def delivery_sweep(*, batch_size: int, grace_seconds: int) -> list[str]:
    """Enqueue up to `batch_size` deliveries never attempted `grace_seconds` after they arrived
    (time for the on-commit task to run), oldest first; returns their ids. Stops at the first
    enqueue the broker refuses. Processing is idempotent (a processed delivery is left alone, and
    one a worker holds is skipped), so a sweep overlapping a slow queue only adds no-op tasks."""
    cutoff = timezone.now() - timedelta(seconds=grace_seconds)
    ids = list(
        Delivery.objects.filter(status=Delivery.Status.RECEIVED, attempts=0, received_at__lt=cutoff)
        .order_by("received_at")
        .values_list("pk", flat=True)[:batch_size]
    )
    enqueued: list[str] = []
    for delivery_id in ids:
        if not _enqueue(delivery_id):
            break
        enqueued.append(str(delivery_id))
    if enqueued:
        logger.info("delivery sweep enqueued %d deliveries that never reached a worker", len(enqueued))
    return enqueued


@dataclass(frozen=True)
class DeliveryOutcome:
    retry_after: float | None = None


def delivery_process(*, delivery_id: Any, attempt: int = 0) -> DeliveryOutcome:
    """Turn a stored delivery into memories, once (a processed delivery is left alone)."""
    delivery = Delivery.objects.select_related("connector").filter(pk=delivery_id).first()
    if delivery is None or delivery.status != Delivery.Status.RECEIVED:
        return DeliveryOutcome()
    connector = delivery.connector
    wait = backoff.remaining(connector.pk)
    if wait > 0:
        if attempt >= 4 * DELIVERY_ATTEMPTS:
            delivery_give_up(delivery_id=delivery.pk, message="The source kept asking Cortex to wait.")
            return DeliveryOutcome()
        return DeliveryOutcome(retry_after=wait)
    failure: Exception | None = None
    with transaction.atomic():
        delivery = Delivery.objects.select_for_update(skip_locked=True).filter(pk=delivery_id).first()
        if delivery is None or delivery.status != Delivery.Status.RECEIVED:
            return DeliveryOutcome()  # another worker has it, or had it
        _connector_lock(connector.pk)
        source = source_for(connector)
        delivery.attempts += 1
        try:
            items = source.items_from_delivery(delivery.payload)
        except (RetryableSourceError, PermanentSourceError) as exc:
            failure = exc
        except Exception as exc:
            logger.exception("connector %s: delivery %s could not be processed", connector.pk, delivery.pk)
            failure = exc
        if failure is None:
            now = timezone.now()
            run = SyncRun(
                organization_id=connector.organization_id,
                connector=connector,
                trigger=SyncRun.Trigger.WEBHOOK,
                status=SyncRun.Status.SUCCEEDED,
                started_at=now,
                heartbeat_at=now,
            )
            counts = upsert_items(connector=connector, source=source, items=items)
            _apply_counts(run, counts)
            run.progress_done = len(items)
            run.finished_at = timezone.now()
            run.save(force_insert=True)
            # Under the row lock, so once; after the memories' events (their write takes the chain
            # lock only once they are embedded: recording earlier would hold it over the embedding).
            _record_delivery_event(delivery, connector)
            delivery.status = (
                Delivery.Status.FAILED if counts.failed and not (counts.created or counts.updated) else Delivery.Status.PROCESSED
            )
            delivery.error = "; ".join(f["reason"] for f in counts.failures)[:2000]
            delivery.processed_at = run.finished_at
            delivery.save()
            Connector.objects.filter(pk=connector.pk).update(last_synced_at=run.finished_at)
            record(
                "connector.sync_finish",
                organization=connector.organization_id,
                actor=_connector_actor(connector),
                target_type="sync_run",
                target_id=run.pk,
                details={
                    "connector": str(connector.pk),
                    "kind": connector.kind,
                    "trigger": run.trigger,
                    "delivery": str(delivery.pk),
                    "status": run.status,
                    "created": run.items_created,
                    "updated": run.items_updated,
                    "redacted": run.items_redacted,
                    "skipped": run.items_skipped,
                    "failed": run.items_failed,
                },
            )
            return DeliveryOutcome()
        _record_delivery_event(delivery, connector)
        delivery.save(update_fields=["attempts", "audited"])
    return _delivery_failed(delivery, connector, failure, attempt)


def _connector_actor(connector: Connector) -> Actor:
    from memories.access import Principal

    return Principal.as_connector(connector).actor


def _delivery_failed(delivery: Delivery, connector: Connector, failure: Exception, attempt: int) -> DeliveryOutcome:
    if isinstance(failure, RetryableSourceError):
        if failure.retry_after:
            backoff.set(connector.pk, failure.retry_after)
        if attempt + 1 < DELIVERY_ATTEMPTS:
            delay = failure.retry_after or min(600.0, 15.0 * 2**attempt)
            Delivery.objects.filter(pk=delivery.pk).update(error=f"{failure.message} Retrying in {int(delay)} s.")
            return DeliveryOutcome(retry_after=delay)
        message = f"Gave up after {DELIVERY_ATTEMPTS} attempts: {failure.message}"
    elif isinstance(failure, PermanentSourceError):
        message = failure.message
        connector_set_error(connector=connector, message=message)
    else:
        message = f"An unexpected error stopped processing ({type(failure).__name__}); it is logged."
    Delivery.objects.filter(pk=delivery.pk).update(status=Delivery.Status.FAILED, error=message, processed_at=timezone.now())
    return DeliveryOutcome()


def delivery_give_up(*, delivery_id: Any, message: str) -> None:
    Delivery.objects.filter(pk=delivery_id, status=Delivery.Status.RECEIVED).update(
        status=Delivery.Status.FAILED, error=message, processed_at=timezone.now()
    )

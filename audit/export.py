"""Streaming a filtered range of the audit log as JSONL or CSV (the API and the /audit/ page share it)."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator
from typing import Any

from django.http import StreamingHttpResponse
from django.utils import timezone

from audit import selectors
from audit.services import record
from cortex_site.errors import ValidationFailed

EXPORT_FIELDS = ["id", "created_at", "actor_kind", "actor_label", "actor_user_id", "actor_token_id", "actor_connector_id",
                 "action", "target_type", "target_id", "outcome", "request_id", "ip", "details", "prev_hash", "hash"]  # fmt: skip


def export_lines(events: Any, fmt: str) -> Iterator[str]:
    """The events as JSONL or CSV, one at a time from a server-side cursor (never all in memory)."""
    if fmt == "csv":
        buffer = io.StringIO()
        writer = csv.writer(buffer)
        writer.writerow(EXPORT_FIELDS)
        yield buffer.getvalue()
    for event in events.iterator(chunk_size=1000):
        if fmt == "jsonl":
            yield json.dumps(selectors.present_event(event), ensure_ascii=False, default=str) + "\n"
            continue
        buffer = io.StringIO()
        row = selectors.present_event(event)
        csv.writer(buffer).writerow(
            [row["id"], row["created_at"], event.actor_kind, event.actor_label, row["actor"]["user_id"] or "",
             row["actor"]["token_id"] or "", event.actor_connector_id, event.action, event.target_type, event.target_id,
             event.outcome, event.request_id, event.ip or "", json.dumps(event.details, default=str), event.prev_hash, event.hash]
        )  # fmt: skip
        yield buffer.getvalue()


def export_response(principal: Any, filters: selectors.AuditFilters, fmt: str, *, via: str) -> StreamingHttpResponse:
    if fmt not in ("jsonl", "csv"):
        raise ValidationFailed("format must be jsonl or csv.", error_code="INVALID_FORMAT", details={"format": fmt})
    events = selectors.audit_events(principal, filters).order_by("id")  # oldest first: the chain's own order
    record(
        "audit.export",
        organization=principal.organization,
        actor=principal.actor,
        details={"filters": filters.as_dict(), "format": fmt, "via": via},
    )
    response = StreamingHttpResponse(
        export_lines(events, fmt), content_type="text/csv; charset=utf-8" if fmt == "csv" else "application/x-ndjson"
    )
    stamp = timezone.now().strftime("%Y%m%dT%H%M%SZ")
    response["Content-Disposition"] = f'attachment; filename="audit-{principal.organization.slug}-{stamp}.{fmt}"'
    response["Cache-Control"] = "no-store"
    return response

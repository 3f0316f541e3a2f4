"""GET /api/audit (filtered, cursor-paginated), /api/audit/verify and /api/audit/export — admins only.

Everyone else gets 404, like for an object of another organization. Every read of the log is
itself an audit event.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.http import StreamingHttpResponse
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from audit import selectors
from audit.export import export_response
from audit.models import AuditEvent
from audit.services import record, verify_and_checkpoint
from cortex_site.api import CortexCursorPagination
from cortex_site.api_schema import error_responses
from memories.api.principal import request_principal


class EventOutput(serializers.Serializer):
    id = serializers.IntegerField()
    created_at = serializers.DateTimeField()
    actor = serializers.DictField(
        help_text="kind (session, token, connector, cli, system, anonymous), label, user_id, token_id, connector_id"
    )
    action = serializers.CharField()
    target = serializers.DictField(help_text="type and id")
    outcome = serializers.ChoiceField(choices=AuditEvent.Outcome.choices)
    request_id = serializers.CharField()
    ip = serializers.CharField(allow_null=True)
    details = serializers.DictField()
    prev_hash = serializers.CharField()
    hash = serializers.CharField()


# What parse_filters reads: blank (no bound), a date, or a date-time.
ISO_MOMENT = {"type": "string", "anyOf": [{"maxLength": 0}, {"format": "date"}, {"format": "date-time"}]}
FILTER_PARAMETERS = [
    OpenApiParameter("actor", str, required=False, description="part of the actor's label (email), or a user / token id"),
    OpenApiParameter("action", str, required=False, description="an action (member.update), or a prefix ending in '.' (member.)"),
    OpenApiParameter("target", str, required=False, description="type:id (memory:…), a type, or an id"),
    OpenApiParameter("since", ISO_MOMENT, required=False, description="ISO date or date-time, inclusive"),
    OpenApiParameter("until", ISO_MOMENT, required=False, description="ISO date or date-time, exclusive"),
    # Blank is "any outcome", as for the other filters (the audit page's form sends every field).
    OpenApiParameter("outcome", str, required=False, enum=[*AuditEvent.Outcome.values, ""], description="blank: any"),
]
ERRORS = error_responses(
    (400, "INVALID_DATE, INVALID_OUTCOME, INVALID_FORMAT, INVALID_LIMIT or INVALID_CURSOR"),
    (404, "NOT_FOUND: not an admin of this organization"),
)


class AuditPagination(CortexCursorPagination):
    page_size = 50


class AuditListView(APIView):
    pagination_class = AuditPagination

    @extend_schema(
        summary="The organization's audit log, newest first (admins)",
        parameters=[
            *FILTER_PARAMETERS,
            *AuditPagination.parameters(),
        ],
        responses={200: EventOutput(many=True), **ERRORS},
    )
    def get(self, request: Request) -> Response:
        principal = request_principal(request)
        filters = selectors.parse_filters(request.query_params)
        events = selectors.audit_events(principal, filters)
        paginator = self.pagination_class()
        page = paginator.paginate_queryset(events, request, view=self)
        record(
            "audit.read",
            organization=principal.organization,
            actor=principal.actor,
            details={"filters": filters.as_dict(), "via": "api"},
        )
        return paginator.get_paginated_response([selectors.present_event(e) for e in page or []])


class VerifyOutput(serializers.Serializer):
    ok = serializers.BooleanField()
    count = serializers.IntegerField(help_text="events verified (including those removed by retention, up to the last cut)")
    first_broken = serializers.IntegerField(allow_null=True)
    reason = serializers.CharField()


class AuditVerifyView(APIView):
    @extend_schema(
        summary="Recompute the organization's hash chain against its signed checkpoints (admins); signs the head when intact",
        responses={200: VerifyOutput, **ERRORS},
    )
    def get(self, request: Request) -> Response:
        principal = request_principal(request)
        selectors.audit_events(principal, selectors.AuditFilters())  # admins only (404 otherwise)
        report = verify_and_checkpoint(principal.organization)
        record(
            "audit.verify",
            organization=principal.organization,
            actor=principal.actor,
            outcome="ok" if report.ok else "error",
            details={"ok": report.ok, "count": report.count, "first_broken": report.first_broken},
        )
        return Response({"ok": report.ok, "count": report.count, "first_broken": report.first_broken, "reason": report.reason})


class _NoFormatOverride(DefaultContentNegotiation):
    """`?format=` chooses the export's format here, not DRF's renderer."""

    def select_renderer(self, request: Request, renderers: Iterable[Any], format_suffix: str | None = None) -> tuple[Any, str]:
        first = next(iter(renderers))
        return first, first.media_type


class AuditExportView(APIView):
    content_negotiation_class = _NoFormatOverride

    @extend_schema(
        summary="Export a filtered range of the audit log, oldest first, streamed (admins)",
        parameters=[*FILTER_PARAMETERS, OpenApiParameter("format", str, required=False, enum=["jsonl", "csv"], default="jsonl")],
        responses={
            (200, "application/x-ndjson"): OpenApiResponse(str, description="one event per line (the /api/audit shape)"),
            (200, "text/csv"): OpenApiResponse(str, description="a header row, then one event per row"),
            **ERRORS,
        },
    )
    def get(self, request: Request) -> StreamingHttpResponse:
        principal = request_principal(request)
        filters = selectors.parse_filters(request.query_params)
        return export_response(principal, filters, (request.query_params.get("format") or "jsonl").lower(), via="api")

"""REST: conflicts between memories — list, detail, resolve, reopen — and the representation
shared with memory detail. Only conflicts whose two memories the caller may read exist for it."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from cortex_site.api import CortexCursorPagination, query_choice
from memories.api.principal import request_principal
from memories.interchange.inputs import StrictSerializer
from memories.interchange.shapes import present_conflicts
from memories.models import Conflict
from memories.selectors.conflicts import KINDS, STATUS_FILTERS, checked, conflict_for, visible_conflicts
from memories.services import conflicts as services


class ConflictOutput(serializers.Serializer):
    """Documentation of the conflict shape (rendering uses present_conflicts)."""

    id = serializers.UUIDField()
    kind = serializers.ChoiceField(choices=Conflict.Kind.values)
    similarity = serializers.FloatField()
    memories = serializers.ListField(child=serializers.DictField(), help_text="[new, existing], each a memory with its role")
    explanation = serializers.CharField()
    classifier = serializers.CharField(help_text="content_hash, heuristic, or the LLM as provider:model")
    confidence = serializers.FloatField(allow_null=True)
    status = serializers.ChoiceField(choices=Conflict.Status.values)
    resolution = serializers.ChoiceField(choices=Conflict.Resolution.values, allow_null=True)
    resolved_by = serializers.DictField(
        allow_null=True, help_text='{"type": "person", "id", "name"} or {"type": "policy", "policy"}'
    )
    resolution_note = serializers.CharField(allow_null=True)
    dissent = serializers.DictField(allow_null=True, help_text="the losing memory's claim: memory_id, title, claim, author, ...")
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()
    resolved_at = serializers.DateTimeField(allow_null=True)


class ResolveInput(StrictSerializer):
    resolution = serializers.ChoiceField(choices=Conflict.Resolution.values)
    note = serializers.CharField(required=False, allow_blank=True, max_length=2000)


class ReopenInput(StrictSerializer):
    note = serializers.CharField(required=False, allow_blank=True, max_length=2000)


class ConflictListView(APIView):
    pagination_class = CortexCursorPagination

    @extend_schema(
        summary="Conflicts whose two memories I can read, newest first",
        parameters=[
            OpenApiParameter("status", str, required=False, enum=sorted(STATUS_FILTERS), description="default: open"),
            OpenApiParameter("kind", str, required=False, enum=sorted(KINDS)),
            *CortexCursorPagination.parameters(),
        ],
        responses=ConflictOutput(many=True),
    )
    def get(self, request: Request) -> Response:
        principal = request_principal(request)
        conflicts = visible_conflicts(
            principal,
            status=query_choice(request, "status", STATUS_FILTERS, default="open") or "open",
            kind=query_choice(request, "kind", KINDS, default=None),
        )
        paginator = self.pagination_class()
        page = paginator.paginate_queryset(conflicts, request, view=self)
        return paginator.get_paginated_response(present_conflicts(principal, checked(principal, page or [])))


class ConflictDetailView(APIView):
    @extend_schema(summary="One conflict", responses=ConflictOutput)
    def get(self, request: Request, conflict_id: str) -> Response:
        principal = request_principal(request)
        return Response(present_conflicts(principal, [conflict_for(principal, conflict_id)])[0])


class ConflictResolveView(APIView):
    @extend_schema(
        summary="Decide a conflict: keep_new, keep_existing, keep_both or dismiss", request=ResolveInput, responses=ConflictOutput
    )
    def post(self, request: Request, conflict_id: str) -> Response:
        principal = request_principal(request)
        serializer = ResolveInput(data=request.data)
        serializer.is_valid(raise_exception=True)
        values = serializer.validated_data
        conflict = services.conflict_resolve(
            principal=principal, conflict_id=conflict_id, resolution=values["resolution"], note=values.get("note", "")
        )
        return Response(present_conflicts(principal, [conflict])[0])


class ConflictReopenView(APIView):
    @extend_schema(summary="Put a decided conflict back in the queue", request=ReopenInput, responses=ConflictOutput)
    def post(self, request: Request, conflict_id: str) -> Response:
        principal = request_principal(request)
        serializer = ReopenInput(data=request.data)
        serializer.is_valid(raise_exception=True)
        conflict = services.conflict_reopen(
            principal=principal, conflict_id=conflict_id, note=serializer.validated_data.get("note", "")
        )
        return Response(present_conflicts(principal, [conflict])[0])

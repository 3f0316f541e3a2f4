"""REST: memories (create, list, detail, patch, supersede, redact, delete) and recall.

Views are thin: parse with an Input serializer (unknown fields are an error), call one
service or selector with the request's Principal, render with the shared representation.
"""

from __future__ import annotations

from typing import Any, cast

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from cortex_site.api import CortexCursorPagination
from memories.access import Principal
from memories.api.principal import request_principal
from memories.api.representation import citation, iso, present_memories, present_memory, redaction
from memories.api.shapes import conflict_summary, entity_summary
from memories.models import Memory
from memories.selectors.conflicts import memory_conflicts
from memories.selectors.entities import memory_entities
from memories.selectors.memories import MemoryFilters, memory_for_history, memory_list, supersession_chain
from memories.selectors.recall import MAX_LIMIT, RecallQuery, RecallResult, recall
from memories.services import memories as services


class StrictSerializer(serializers.Serializer):
    """A serializer that refuses fields it does not know, instead of silently ignoring them."""

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, dict):
            unknown = sorted(set(data) - set(self.fields))
            if unknown:
                raise serializers.ValidationError({field: ["Unknown field."] for field in unknown})
            # DRF's CharField turns 12345 into "12345"; a client sending a number where text
            # belongs has a bug we should tell it about, not a memory we should store.
            not_text = sorted(
                name
                for name, field in self.fields.items()
                if isinstance(field, serializers.CharField)
                and name in data
                and data[name] is not None
                and not isinstance(data[name], str)
            )
            if not_text:
                raise serializers.ValidationError({name: ["Must be a string."] for name in not_text})
        return super().to_internal_value(data)


class MemoryFieldsInput(StrictSerializer):
    title = serializers.CharField(required=False, allow_blank=True, trim_whitespace=False)
    content = serializers.CharField(trim_whitespace=False, allow_blank=True)
    scope = serializers.CharField(required=False, allow_null=True, allow_blank=True)
    category = serializers.CharField(required=False, allow_blank=True)
    source = serializers.CharField(required=False)  # type: ignore[assignment]  # a field named like Field.source
    source_url = serializers.CharField(required=False, allow_blank=True, allow_null=True)
    tags = serializers.ListField(child=serializers.CharField(allow_blank=True), required=False)
    clearance_min = serializers.CharField(required=False, allow_null=True, allow_blank=True)
    valid_from = serializers.DateTimeField(required=False, allow_null=True)
    valid_until = serializers.DateTimeField(required=False, allow_null=True)


class MemoryCreateInput(MemoryFieldsInput):
    idempotency_key = serializers.CharField(required=False, allow_blank=True, max_length=255)
    author_name = serializers.CharField(required=False, allow_blank=True, max_length=200)


class SupersedeInput(MemoryFieldsInput):
    content = serializers.CharField(required=False, trim_whitespace=False, allow_blank=True)


class PatchInput(StrictSerializer):
    tags = serializers.ListField(child=serializers.CharField(allow_blank=True), required=False)
    category = serializers.CharField(required=False)
    valid_until = serializers.DateTimeField(required=False, allow_null=True)
    clearance_min = serializers.CharField(required=False)


class RedactInput(StrictSerializer):
    reason = serializers.CharField(allow_blank=True, trim_whitespace=False)


class RecallInput(StrictSerializer):
    query = serializers.CharField(allow_blank=True, trim_whitespace=False)
    limit = serializers.IntegerField(required=False, default=10, min_value=1, max_value=MAX_LIMIT)
    scopes = serializers.ListField(child=serializers.CharField(), required=False, allow_empty=True)
    category = serializers.CharField(required=False, allow_blank=True, allow_null=True)
    tags = serializers.ListField(child=serializers.CharField(), required=False)
    source = serializers.CharField(required=False, allow_blank=True, allow_null=True)  # type: ignore[assignment]
    as_of = serializers.DateTimeField(required=False, allow_null=True)


def recall_query(values: dict[str, Any]) -> RecallQuery:
    """The RecallQuery for validated RecallInput values (REST and MCP build it the same way)."""
    return RecallQuery(
        query=values["query"],
        limit=values["limit"],
        scopes=values.get("scopes") or None,
        category=values.get("category") or None,
        tags=values.get("tags") or (),
        source=values.get("source") or None,
        as_of=values.get("as_of"),
    )


class MemoryOutput(serializers.Serializer):
    """Documentation of the memory shape (rendering uses memory_representation)."""

    id = serializers.UUIDField()
    title = serializers.CharField()
    content = serializers.CharField()
    scope = serializers.CharField()
    category = serializers.CharField()
    source = serializers.CharField()  # type: ignore[assignment]
    source_url = serializers.CharField(allow_null=True)
    author = serializers.DictField()
    tags = serializers.ListField(child=serializers.CharField())
    clearance_min = serializers.CharField()
    status = serializers.ChoiceField(choices=Memory.Status.values)
    valid_from = serializers.DateTimeField()
    valid_until = serializers.DateTimeField(allow_null=True)
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()
    supersedes = serializers.UUIDField(allow_null=True)
    superseded_by = serializers.UUIDField(allow_null=True)


class WriteOutput(MemoryOutput):
    scope_resolution = serializers.ChoiceField(choices=["explicit", "source_rule", "default"])
    deduplicated = serializers.BooleanField()


class EarlierVersionOutput(serializers.Serializer):
    id = serializers.UUIDField()
    title = serializers.CharField()


class RecallHitOutput(serializers.Serializer):
    memory = MemoryOutput()
    score = serializers.FloatField()
    relevance = serializers.FloatField()
    recency = serializers.FloatField()
    snippet = serializers.CharField()
    chunk_index = serializers.IntegerField()
    citation = serializers.DictField()
    earlier_version = EarlierVersionOutput(
        allow_null=True, help_text="The superseded memory whose match led to this one (its current version), else null."
    )


class RecallOutput(serializers.Serializer):
    results = RecallHitOutput(many=True)
    took_ms = serializers.FloatField()


def _draft_fields(data: dict[str, Any]) -> dict[str, Any]:
    fields = dict(data)
    if fields.get("source_url") is None and "source_url" in fields:
        fields["source_url"] = ""
    if "tags" in fields and fields["tags"] is None:
        fields["tags"] = []
    return fields


def _write_response(principal: Principal, result: services.WriteResult) -> Response:
    body = present_memory(principal, result.memory)
    body["scope_resolution"] = result.scope_resolution
    body["deduplicated"] = result.deduplicated
    return Response(body, status=status.HTTP_200_OK if result.deduplicated else status.HTTP_201_CREATED)


def recall_response(principal: Principal, result: RecallResult) -> dict[str, Any]:
    rendered = present_memories(principal, [hit.memory for hit in result.hits])
    return {
        "results": [
            {
                "memory": rendered[position],
                "score": hit.score,
                "relevance": hit.relevance,
                "recency": hit.recency,
                "snippet": hit.snippet,
                "chunk_index": hit.chunk_index,
                "citation": citation(hit.memory),
                "earlier_version": (
                    {"id": str(hit.earlier_version.pk), "title": hit.earlier_version.title}
                    if hit.earlier_version is not None
                    else None
                ),
            }
            for position, hit in enumerate(result.hits)
        ],
        "took_ms": result.took_ms,
    }


class MemoryListCreateView(APIView):
    pagination_class = CortexCursorPagination

    @extend_schema(
        summary="Memories I can see, newest first",
        parameters=[
            OpenApiParameter(name, str, required=False)
            for name in ("scope", "category", "source", "tag", "author", "status", "cursor")
        ]
        + [OpenApiParameter("limit", int, required=False)],
        responses=MemoryOutput(many=True),
    )
    def get(self, request: Request) -> Response:
        principal = request_principal(request)
        params = request.query_params
        filters = MemoryFilters(
            scope=params.get("scope") or None,
            category=params.get("category") or None,
            source=params.get("source") or None,
            tag=params.get("tag") or None,
            author=params.get("author") or None,
            status=params.get("status") or "active",
        )
        paginator = self.pagination_class()
        page = paginator.paginate_queryset(memory_list(principal, filters), request, view=self)
        return paginator.get_paginated_response(present_memories(principal, page or []))

    @extend_schema(summary="Remember: store a memory", request=MemoryCreateInput, responses={201: WriteOutput, 200: WriteOutput})
    def post(self, request: Request) -> Response:
        principal = request_principal(request)
        serializer = MemoryCreateInput(data=request.data)
        serializer.is_valid(raise_exception=True)
        fields = _draft_fields(serializer.validated_data)
        fields.setdefault("source", "API")
        result = services.memory_create(principal=principal, draft=services.MemoryDraft(**fields))
        return _write_response(principal, result)


class MemoryDetailView(APIView):
    @extend_schema(summary="One memory, with its supersession history and chunk count", responses=MemoryOutput)
    def get(self, request: Request, memory_id: str) -> Response:
        principal = request_principal(request)
        memory = memory_for_history(principal, memory_id)
        body = present_memory(principal, memory)
        body["chunk_count"] = memory.chunks.count()
        body["history"] = [
            {"id": str(m.pk), "title": m.title, "status": m.status, "valid_from": iso(m.valid_from)}
            for m in supersession_chain(principal, memory)
        ]
        body["citation"] = citation(memory)
        body["redaction"] = redaction(memory)
        body["conflicts"] = [conflict_summary(c, memory) for c in memory_conflicts(principal, memory)]
        body["entities"] = [entity_summary(e) for e in memory_entities(principal, memory)]
        return Response(body)

    @extend_schema(
        summary="Change metadata (tags, category, valid_until, clearance_min)", request=PatchInput, responses=MemoryOutput
    )
    def patch(self, request: Request, memory_id: str) -> Response:
        principal = request_principal(request)
        serializer = PatchInput(data=request.data)
        serializer.is_valid(raise_exception=True)
        memory = services.memory_patch(principal=principal, memory_id=memory_id, changes=dict(serializer.validated_data))
        return Response(present_memory(principal, memory))

    @extend_schema(summary="Erase a memory for good (admins)", responses={204: None})
    def delete(self, request: Request, memory_id: str) -> Response:
        services.memory_delete(principal=request_principal(request), memory_id=memory_id)
        return Response(status=status.HTTP_204_NO_CONTENT)


class MemorySupersedeView(APIView):
    @extend_schema(summary="Replace a memory with a new version", request=SupersedeInput, responses={201: WriteOutput})
    def post(self, request: Request, memory_id: str) -> Response:
        principal = request_principal(request)
        serializer = SupersedeInput(data=request.data)
        serializer.is_valid(raise_exception=True)
        result = services.memory_supersede(
            principal=principal, memory_id=memory_id, changes=_draft_fields(serializer.validated_data)
        )
        return _write_response(principal, result)


class MemoryRedactView(APIView):
    @extend_schema(summary="Redact a memory (content removed, provenance kept)", request=RedactInput, responses=MemoryOutput)
    def post(self, request: Request, memory_id: str) -> Response:
        principal = request_principal(request)
        serializer = RedactInput(data=request.data)
        serializer.is_valid(raise_exception=True)
        memory = services.memory_redact(principal=principal, memory_id=memory_id, reason=serializer.validated_data["reason"])
        body = present_memory(principal, memory)
        body["redaction"] = redaction(memory)
        return Response(body)


class RecallView(APIView):
    def _answer(self, request: Request, data: dict[str, Any]) -> Response:
        principal = request_principal(request)
        serializer = RecallInput(data=data)
        serializer.is_valid(raise_exception=True)
        query = recall_query(serializer.validated_data)
        return Response(recall_response(principal, recall(principal, query)))

    @extend_schema(summary="Recall: ranked memories for a query", request=RecallInput, responses=RecallOutput)
    def post(self, request: Request) -> Response:
        return self._answer(request, cast(dict[str, Any], request.data))  # a non-object body fails validation (400)

    @extend_schema(
        summary="Recall (GET form)",
        parameters=[
            OpenApiParameter("q", str, required=True),
            OpenApiParameter("limit", int, required=False),
            OpenApiParameter("scopes", str, required=False, description="comma-separated"),
            OpenApiParameter("category", str, required=False),
            OpenApiParameter("tags", str, required=False, description="comma-separated; a memory must carry all of them"),
            OpenApiParameter("source", str, required=False),
            OpenApiParameter("as_of", str, required=False),
        ],
        responses=RecallOutput,
    )
    def get(self, request: Request) -> Response:
        params = request.query_params
        data: dict[str, Any] = {"query": params.get("q", "")}
        if "limit" in params:
            data["limit"] = params["limit"]
        for name in ("scopes", "tags"):
            if params.get(name):
                data[name] = [v.strip() for v in params[name].split(",") if v.strip()]
        for name in ("category", "source", "as_of"):
            if params.get(name):
                data[name] = params[name]
        return self._answer(request, data)

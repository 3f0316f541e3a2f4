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

from cortex_site.api import CortexCursorPagination, query_choice, query_int
from cortex_site.api_schema import NOT_BLANK
from memories.access import Principal
from memories.api.principal import request_principal
from memories.interchange.inputs import (
    MemoryCreateInput,
    PatchInput,
    RecallInput,
    RedactInput,
    SupersedeInput,
    draft_fields,
    recall_query,
)
from memories.interchange.representation import citation, cite_text, iso, present_memories, present_memory, redaction
from memories.interchange.shapes import conflict_summary, entity_summary, present_conflicts
from memories.models import Conflict, Entity, Memory
from memories.retrieval.packing import MIN_MAX_TOKENS, estimate_tokens, pack
from memories.selectors.conflicts import conflict_for, memory_conflicts
from memories.selectors.entities import memory_entities
from memories.selectors.memories import STATUS_FILTERS, MemoryFilters, memory_for_history, memory_list, supersession_chain
from memories.selectors.recall import MAX_LIMIT, RecallResult, recall
from memories.services import memories as services
from memories.services.read_events import memory_list_audit, memory_read_audit


class RestRecallInput(RecallInput):
    max_tokens = serializers.IntegerField(
        required=False,
        min_value=MIN_MAX_TOKENS,
        help_text="Also answer `packed`: the results as text packed into this many tokens (full, then snippets, then ids).",
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


class HistoryEntryOutput(serializers.Serializer):
    id = serializers.UUIDField()
    title = serializers.CharField()
    status = serializers.ChoiceField(choices=Memory.Status.values)
    valid_from = serializers.DateTimeField()


class CitationOutput(serializers.Serializer):
    title = serializers.CharField()
    source = serializers.CharField()  # type: ignore[assignment]  # a field named like Field.source
    source_url = serializers.CharField(allow_null=True)
    author = serializers.CharField(allow_null=True)
    valid_from = serializers.DateTimeField()
    scope = serializers.CharField()


class RedactionOutput(serializers.Serializer):
    redacted_at = serializers.DateTimeField(allow_null=True)
    redacted_by = serializers.CharField(allow_null=True)
    reason = serializers.CharField()
    held_until = serializers.DateTimeField(
        allow_null=True, help_text="Until when an admin can restore it; null once final (urgent, or the hold expired)."
    )


class MemoryConflictOutput(serializers.Serializer):
    """A conflict as memory detail lists it: from that memory's point of view."""

    id = serializers.UUIDField()
    kind = serializers.ChoiceField(choices=Conflict.Kind.values)
    status = serializers.ChoiceField(choices=Conflict.Status.values)
    resolution = serializers.ChoiceField(choices=Conflict.Resolution.values, allow_null=True)
    role = serializers.ChoiceField(choices=["new", "existing"])
    similarity = serializers.FloatField()
    classifier = serializers.CharField()
    explanation = serializers.CharField()
    other = serializers.DictField(help_text="{id, title, status} of the other memory")
    resolved_by = serializers.DictField(allow_null=True)


class MemoryEntityOutput(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    kind = serializers.ChoiceField(choices=Entity.Kind.values)


class MemoryDetailOutput(MemoryOutput):
    chunk_count = serializers.IntegerField()
    history = HistoryEntryOutput(many=True, help_text="The supersession chain you may see, oldest first")
    citation = CitationOutput()
    redaction = RedactionOutput(allow_null=True, help_text="Who redacted it, when and why; null unless redacted")
    conflicts = MemoryConflictOutput(many=True)
    entities = MemoryEntityOutput(many=True)


class RedactedMemoryOutput(MemoryOutput):
    redaction = RedactionOutput()


class WriteOutput(MemoryOutput):
    scope_resolution = serializers.ChoiceField(choices=["explicit", "token_default", "source_rule", "default"])
    deduplicated = serializers.BooleanField()


class EarlierVersionOutput(serializers.Serializer):
    id = serializers.UUIDField()
    title = serializers.CharField()


class RecallHitOutput(serializers.Serializer):
    memory = MemoryOutput()
    score = serializers.FloatField()
    relevance = serializers.FloatField(help_text="Relative to this recall's best candidate (1 = the best); used by score.")
    recency = serializers.FloatField()
    match = serializers.FloatField(
        help_text="Absolute match strength in [0, 1], comparable across queries (meaning and keywords, calibrated)."
    )
    confidence = serializers.ChoiceField(
        choices=["strong", "partial", "weak"],
        help_text="match ≥ 0.75 strong, ≥ 0.38 partial, else weak (thresholds in docs/quality.md).",
    )
    snippet = serializers.CharField()
    chunk_index = serializers.IntegerField()
    citation = serializers.DictField()
    earlier_version = EarlierVersionOutput(
        allow_null=True, help_text="The superseded memory whose match led to this one (its current version), else null."
    )


class PackingOutput(serializers.Serializer):
    max_tokens = serializers.IntegerField()
    used_tokens = serializers.IntegerField(
        help_text="Estimated tokens of `packed` (4 characters a token), never above max_tokens."
    )
    full = serializers.ListField(child=serializers.UUIDField())
    preview = serializers.ListField(child=serializers.UUIDField())
    dropped = serializers.ListField(child=serializers.UUIDField())


class RecallOutput(serializers.Serializer):
    results = RecallHitOutput(many=True)
    confident = serializers.BooleanField(
        help_text="False when no result is at least a partial match: the results are only the closest memories."
    )
    took_ms = serializers.FloatField()
    packed = serializers.CharField(required=False, help_text="With max_tokens: the results as text for an agent's context.")
    packing = PackingOutput(required=False)


class ProposalOutput(serializers.Serializer):
    proposal = serializers.DictField(help_text="The revision conflict waiting in the queue, as GET /api/conflicts/{id}")
    memory = MemoryOutput(help_text="The proposed version (status proposed): out of lists and recall until accepted")


def write_response(principal: Principal, result: services.WriteResult) -> Response:
    if result.proposal is not None:
        proposal = conflict_for(principal, result.proposal.pk)
        return Response(
            {"proposal": present_conflicts(principal, [proposal])[0], "memory": present_memory(principal, result.memory)},
            status=status.HTTP_202_ACCEPTED,
        )
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
                "match": hit.match,
                "confidence": hit.confidence.value,
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
        "confident": result.confident,
        "took_ms": result.took_ms,
    }


class MemoryListCreateView(APIView):
    pagination_class = CortexCursorPagination

    @extend_schema(
        summary="Memories I can see, newest first",
        parameters=[
            *(OpenApiParameter(name, str, required=False) for name in ("scope", "category", "source", "tag", "author")),
            OpenApiParameter("status", str, required=False, enum=sorted(STATUS_FILTERS), description="default: active"),
            *CortexCursorPagination.parameters(),
        ],
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
            status=query_choice(request, "status", STATUS_FILTERS, default="active") or "active",
        )
        paginator = self.pagination_class()
        page = paginator.paginate_queryset(memory_list(principal, filters), request, view=self) or []
        memory_list_audit(principal=principal, filters=filters, memories=page, via="api")
        return paginator.get_paginated_response(present_memories(principal, page))

    @extend_schema(summary="Remember: store a memory", request=MemoryCreateInput, responses={201: WriteOutput, 200: WriteOutput})
    def post(self, request: Request) -> Response:
        principal = request_principal(request)
        serializer = MemoryCreateInput(data=request.data)
        serializer.is_valid(raise_exception=True)
        fields = draft_fields(serializer.validated_data)
        fields.setdefault("source", "API")
        result = services.memory_create(principal=principal, draft=services.MemoryDraft(**fields))
        return write_response(principal, result)


class MemoryDetailView(APIView):
    @extend_schema(summary="One memory, with its supersession history and chunk count", responses=MemoryDetailOutput)
    def get(self, request: Request, memory_id: str) -> Response:
        principal = request_principal(request)
        memory = memory_for_history(principal, memory_id)
        memory_read_audit(principal=principal, memory=memory, via="api")
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
    @extend_schema(
        summary="Replace a memory with a new version",
        description="201 when your authority (clearance; admins the top rung) is at least the author's. Otherwise 202: "
        "the new version is a proposed revision in the conflict queue until someone with that authority accepts it. "
        "403 MEMORY_NOT_WRITABLE when you cannot write its scope; 409 MEMORY_NOT_ACTIVE. 200 when the new content is "
        "already stored in that scope as a memory you can read: that memory is answered (`deduplicated: true`).",
        request=SupersedeInput,
        responses={201: WriteOutput, 200: WriteOutput, 202: ProposalOutput},
    )
    def post(self, request: Request, memory_id: str) -> Response:
        principal = request_principal(request)
        serializer = SupersedeInput(data=request.data)
        serializer.is_valid(raise_exception=True)
        result = services.memory_supersede(
            principal=principal, memory_id=memory_id, changes=draft_fields(serializer.validated_data)
        )
        return write_response(principal, result)


class MemoryRedactView(APIView):
    @extend_schema(
        summary="Redact a memory (content removed, provenance kept)",
        description="The author, an admin or the connector that wrote it (else 403 REDACTION_NOT_ALLOWED: request it "
        "instead). Held CORTEX_REDACTION_HOLD_DAYS for an admin's restore unless urgent (403 URGENT_REDACTION_NOT_ALLOWED "
        "for a connector).",
        request=RedactInput,
        responses=RedactedMemoryOutput,
    )
    def post(self, request: Request, memory_id: str) -> Response:
        principal = request_principal(request)
        serializer = RedactInput(data=request.data)
        serializer.is_valid(raise_exception=True)
        values = serializer.validated_data
        memory = services.memory_redact(
            principal=principal, memory_id=memory_id, reason=values["reason"], urgent=values.get("urgent", False)
        )
        body = present_memory(principal, memory)
        body["redaction"] = redaction(memory)
        return Response(body)


class MemoryRestoreView(APIView):
    @extend_schema(
        summary="Restore a redacted memory while its redaction is held (admins)",
        request=None,
        responses=MemoryOutput,
        description="403 ADMIN_REQUIRED; 409 REDACTION_FINAL when the redaction was urgent or its hold expired.",
    )
    def post(self, request: Request, memory_id: str) -> Response:
        principal = request_principal(request)
        memory = services.memory_restore(principal=principal, memory_id=memory_id)
        return Response(present_memory(principal, memory))


class RecallView(APIView):
    def _answer(self, request: Request, data: dict[str, Any]) -> Response:
        principal = request_principal(request)
        serializer = RestRecallInput(data=data)
        serializer.is_valid(raise_exception=True)
        query = recall_query(serializer.validated_data)
        result = recall(principal, query)
        body = recall_response(principal, result)
        max_tokens = serializer.validated_data.get("max_tokens")
        if max_tokens is not None:
            header = f'{len(result.hits)} Cortex memories for "{query.query}", best first:'
            lines, tiers, dropped = pack(header, list(result.hits), max_tokens, cite=cite_text)
            body["packed"] = "\n".join(lines)
            body["packing"] = {
                "max_tokens": max_tokens,
                "used_tokens": estimate_tokens(body["packed"]),
                "full": [i for i, t in tiers.items() if t == "full"],
                "preview": [i for i, t in tiers.items() if t == "preview"],
                "dropped": dropped,
            }
        return Response(body)

    @extend_schema(summary="Recall: ranked memories for a query", request=RestRecallInput, responses=RecallOutput)
    def post(self, request: Request) -> Response:
        return self._answer(request, cast(dict[str, Any], request.data))  # a non-object body fails validation (400)

    @extend_schema(
        summary="Recall (GET form)",
        parameters=[
            OpenApiParameter("q", {"type": "string", "pattern": NOT_BLANK}, required=True, description="what to recall"),
            OpenApiParameter("limit", {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT, "default": 10}, required=False),
            OpenApiParameter("scopes", str, required=False, description="comma-separated"),
            OpenApiParameter("category", str, required=False),
            OpenApiParameter("tags", str, required=False, description="comma-separated; a memory must carry all of them"),
            OpenApiParameter("source", str, required=False),
            OpenApiParameter("as_of", {"type": "string", "format": "date-time"}, required=False),
            OpenApiParameter("max_tokens", {"type": "integer", "minimum": MIN_MAX_TOKENS, "maximum": 10**9}, required=False),
        ],
        responses=RecallOutput,
    )
    def get(self, request: Request) -> Response:
        params = request.query_params
        data: dict[str, Any] = {"query": params.get("q", "")}
        # Query values are text; the whole numbers are read here as the schema documents them.
        limit = query_int(request, "limit", minimum=1, maximum=MAX_LIMIT)
        if limit is not None:
            data["limit"] = limit
        max_tokens = query_int(request, "max_tokens", minimum=MIN_MAX_TOKENS, maximum=10**9)
        for name in ("scopes", "tags"):
            if params.get(name):
                data[name] = [v.strip() for v in params[name].split(",") if v.strip()]
        if max_tokens is not None:
            data["max_tokens"] = max_tokens
        for name in ("category", "source"):
            if params.get(name):
                data[name] = params[name]
        if "as_of" in params:  # given blank it is not a date-time: refused, as the schema says
            data["as_of"] = params["as_of"]
        return self._answer(request, data)

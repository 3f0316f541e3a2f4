"""REST: the entity graph, as far as the caller's readable memories reach."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from memories.api.principal import request_principal
from memories.interchange.representation import present_memories
from memories.interchange.shapes import entity_summary, relation_summary
from memories.selectors.entities import entity_for, entity_memories, entity_relations, visible_entities

MAX_ENTITY_MEMORIES = 100


class EntityListView(APIView):
    @extend_schema(
        summary="Entities mentioned in memories I can read",
        parameters=[
            OpenApiParameter("q", str, required=False),
            OpenApiParameter("kind", str, required=False),
            OpenApiParameter("limit", int, required=False),
        ],
    )
    def get(self, request: Request) -> Response:
        principal = request_principal(request)
        entities = visible_entities(principal, q=request.query_params.get("q", ""), kind=request.query_params.get("kind") or None)
        try:
            limit = max(1, min(200, int(request.query_params.get("limit", 50))))
        except ValueError:
            limit = 50
        return Response({"results": [entity_summary(e) for e in entities[:limit]], "next": None})


class EntityDetailView(APIView):
    @extend_schema(summary="One entity, the memories I can read that mention it, and its relations")
    def get(self, request: Request, entity_id: str) -> Response:
        principal = request_principal(request)
        entity = entity_for(principal, entity_id)
        memories = list(entity_memories(principal, entity)[:MAX_ENTITY_MEMORIES])
        return Response(
            {
                **entity_summary(entity),
                "memories": present_memories(principal, [m for m in memories if principal.can_read_memory(m)]),
                "relations": [relation_summary(r) for r in entity_relations(principal, entity)],
            }
        )

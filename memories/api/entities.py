"""REST: the entity graph, as far as the caller's readable memories reach."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from cortex_site.api import query_choice, query_limit
from cortex_site.api_schema import limit_parameter, list_of
from memories.api.memories import MemoryOutput
from memories.api.principal import request_principal
from memories.interchange.representation import present_memories
from memories.interchange.shapes import entity_summary, relation_summary
from memories.models import Entity
from memories.selectors.entities import entity_for, entity_memories, entity_relations, visible_entities

MAX_ENTITY_MEMORIES = 100
MAX_ENTITIES = 200


class EntityOutput(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    kind = serializers.ChoiceField(choices=Entity.Kind.values)
    memory_count = serializers.IntegerField(help_text="memories I can read that mention it")


class EntityRefOutput(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    kind = serializers.ChoiceField(choices=Entity.Kind.values)


class RelationOutput(serializers.Serializer):
    kind = serializers.CharField()
    source = EntityRefOutput()  # type: ignore[assignment]  # a field named like Field.source
    target = EntityRefOutput()


class EntityDetailOutput(EntityOutput):
    memories = MemoryOutput(many=True)
    relations = RelationOutput(many=True)


class EntityListView(APIView):
    @extend_schema(
        summary="Entities mentioned in memories I can read",
        parameters=[
            OpenApiParameter("q", str, required=False, description="part of the name"),
            OpenApiParameter("kind", str, required=False, enum=Entity.Kind.values),
            limit_parameter(default=50, maximum=MAX_ENTITIES),
        ],
        responses=list_of(EntityOutput, "EntityList"),
    )
    def get(self, request: Request) -> Response:
        principal = request_principal(request)
        kind = query_choice(request, "kind", Entity.Kind.values, default=None)
        entities = visible_entities(principal, q=request.query_params.get("q", ""), kind=kind)
        limit = query_limit(request, default=50, maximum=MAX_ENTITIES)
        return Response({"results": [entity_summary(e) for e in entities[:limit]], "next": None})


class EntityDetailView(APIView):
    @extend_schema(summary="One entity, the memories I can read that mention it, and its relations", responses=EntityDetailOutput)
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

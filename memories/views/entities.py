"""Browser: the entity graph — entities I can see through memories I can read, and one entity's memories."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from memories.access import Principal
from memories.selectors.entities import KINDS, entity_for, entity_member, entity_memories, entity_relations, visible_entities
from memories.views.common import memory_rows, principal_view

LIST_SIZE = 100
MEMORIES_SIZE = 50


@principal_view
@require_GET
def entity_list(request: HttpRequest, principal: Principal) -> HttpResponse:
    q = request.GET.get("q", "")[:100]
    kind = request.GET.get("kind") if request.GET.get("kind") in KINDS else ""
    entities = list(visible_entities(principal, q=q, kind=kind or None)[:LIST_SIZE])
    return render(request, "entities/list.html", {"entities": entities, "q": q, "kind": kind, "kinds": sorted(KINDS)})


@principal_view
@require_GET
def entity_detail(request: HttpRequest, principal: Principal, entity_id: int) -> HttpResponse:
    entity = entity_for(principal, entity_id)
    memories = [m for m in entity_memories(principal, entity)[:MEMORIES_SIZE] if principal.can_read_memory(m)]
    context = {
        "entity": entity,
        "rows": memory_rows(principal, memories),
        "relations": entity_relations(principal, entity),
        "member": entity_member(principal, entity),
    }
    return render(request, "entities/detail.html", context)

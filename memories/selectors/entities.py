"""Reading the entity graph on behalf of a principal.

An entity has no access rule of its own: it is visible only through a memory the principal
may read (active, readable scope, clearance) that mentions it. Entities that only invisible
memories mention do not exist for that principal (NotFound), and relations show only when
their evidence memory is readable.
"""

from __future__ import annotations

from typing import Any

from django.db.models import Count, Q, QuerySet
from django.db.models.functions import Lower

from cortex_site.errors import NotFound, ValidationFailed
from memories.access import Principal, hidden, parse_int_id
from memories.models import Entity, Membership, Memory, Relation
from memories.selectors.memories import visible_memories

KINDS = {k.value for k in Entity.Kind}


def _visible_memory_ids(principal: Principal) -> QuerySet[Memory, Any]:
    return visible_memories(principal).values("pk")


def visible_entities(principal: Principal, *, q: str = "", kind: str | None = None) -> QuerySet[Entity]:
    """Entities mentioned by at least one memory the principal may read, most mentioned first."""
    if kind and kind not in KINDS:
        raise ValidationFailed(f"kind must be one of {', '.join(sorted(KINDS))}.", error_code="INVALID_KIND")
    mentioned = Q(mentions__memory__in=_visible_memory_ids(principal))
    entities = Entity.objects.filter(organization_id=principal.organization_id).filter(mentioned)
    if kind:
        entities = entities.filter(kind=kind)
    if q.strip():
        entities = entities.filter(name__icontains=q.strip()[:100])
    return entities.annotate(memory_count=Count("mentions", filter=mentioned, distinct=True)).order_by("-memory_count", "name")


def entity_for(principal: Principal, entity_id: object) -> Entity:
    parsed = parse_int_id(entity_id)
    if parsed is None:
        raise NotFound("Entity not found.")
    entity = visible_entities(principal).filter(pk=parsed).first()
    if entity is None:
        # Only another organization's entity is a denial: in the principal's own, an entity no readable
        # memory mentions does not exist for it (there is nothing of its own to hide).
        foreign = Entity.objects.filter(pk=parsed).only("id", "organization_id").first()
        raise NotFound("Entity not found.", denial=hidden(principal, "entity", foreign, None))
    return entity


def entity_memories(principal: Principal, entity: Entity) -> QuerySet[Memory]:
    """Memories the principal may read that mention the entity, newest first."""
    return visible_memories(principal).filter(entity_mentions__entity=entity).distinct().order_by("-created_at", "-id")


def memory_entities(principal: Principal, memory: Memory) -> list[Entity]:
    """Entities a memory mentions (empty when the principal may not read the memory)."""
    if not principal.can_read_memory(memory, history=True):
        return []
    return list(
        Entity.objects.filter(organization_id=principal.organization_id, mentions__memory=memory).order_by("kind", "name")
    )


def entity_relations(principal: Principal, entity: Entity) -> list[Relation]:
    """Relations of an entity stated in memories the principal may read (one per kind and partner)."""
    relations = (
        Relation.objects.filter(organization_id=principal.organization_id, memory__in=_visible_memory_ids(principal))
        .filter(Q(source=entity) | Q(target=entity))
        .select_related("source", "target")
        .order_by("kind", "source__name", "target__name")
    )
    unique: dict[tuple[int, int, str], Relation] = {}
    for relation in relations[:500]:
        unique.setdefault((relation.source_id, relation.target_id, relation.kind), relation)
    return list(unique.values())


def entity_named(principal: Principal, name: str) -> Entity:
    """The visible entity a name means: an exact (case-insensitive) name first, else the most
    mentioned one whose name contains it. NotFound when no visible memory mentions such an entity."""
    name = name.strip()[:100]
    if not name:
        raise ValidationFailed("Name the entity (a person, system, team, ...).", error_code="EMPTY_ENTITY")
    entities = visible_entities(principal, q=name)
    entity = entities.filter(name__iexact=name).first() or entities.first()
    if entity is None:
        raise NotFound(f"No memory you can see mentions {name!r}.")
    return entity


def entity_member(principal: Principal, entity: Entity) -> Membership | None:
    """The member of the principal's organization an entity names: their full name ("Ada Okafor")
    or their @handle (the part of their e-mail address before the @). None for anything else."""
    if entity.organization_id != principal.organization_id:
        return None
    members = Membership.objects.filter(organization_id=principal.organization_id, deactivated_at__isnull=True).select_related(
        "user"
    )
    if entity.key.startswith("@") or entity.name.startswith("@"):
        handle = entity.key.lstrip("@")
        return members.filter(user__email__istartswith=f"{handle}@").first()
    return members.annotate(name_key=Lower("user__name")).filter(name_key=" ".join(entity.key.split())).first()

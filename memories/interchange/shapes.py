"""Shapes of conflicts and entities shared by the conflicts API, memory detail and the UI."""

from __future__ import annotations

from typing import Any

from memories.access import Principal
from memories.interchange.representation import iso, present_memories
from memories.models import Conflict, Entity, Memory, Relation


def resolved_by(conflict: Conflict) -> dict[str, Any] | None:
    if conflict.status == Conflict.Status.OPEN:
        return None
    if conflict.resolved_by_user_id:
        user = conflict.resolved_by_user
        return {"type": "person", "id": str(conflict.resolved_by_user_id), "name": user.display_name if user else None}
    if conflict.resolved_by_policy:
        return {"type": "policy", "policy": conflict.resolved_by_policy}
    return None


def present_conflicts(principal: Principal, conflicts: list[Conflict]) -> list[dict[str, Any]]:
    memories: dict[Any, Memory] = {}
    for conflict in conflicts:
        memories[conflict.new_memory_id] = conflict.new_memory
        memories[conflict.existing_memory_id] = conflict.existing_memory
    rendered = dict(zip(memories, present_memories(principal, list(memories.values())), strict=True))
    return [
        {
            "id": str(c.pk),
            "kind": c.kind,
            "similarity": round(c.similarity, 4),
            "memories": [{**rendered[c.new_memory_id], "role": "new"}, {**rendered[c.existing_memory_id], "role": "existing"}],
            "explanation": c.explanation,
            "classifier": c.classifier,
            "confidence": c.confidence,
            "status": c.status,
            "resolution": c.resolution or None,
            "resolved_by": resolved_by(c),
            "resolution_note": c.resolution_note or None,
            "dissent": c.dissent,
            "created_at": iso(c.created_at),
            "updated_at": iso(c.updated_at),
            "resolved_at": iso(c.resolved_at),
        }
        for c in conflicts
    ]


def conflict_summary(conflict: Conflict, memory: Memory) -> dict[str, Any]:
    """A conflict as memory detail lists it: from that memory's point of view."""
    other = conflict.existing_memory if conflict.new_memory_id == memory.pk else conflict.new_memory
    return {
        "id": str(conflict.pk),
        "kind": conflict.kind,
        "status": conflict.status,
        "resolution": conflict.resolution or None,
        "role": "new" if conflict.new_memory_id == memory.pk else "existing",
        "similarity": round(conflict.similarity, 4),
        "classifier": conflict.classifier,
        "explanation": conflict.explanation,
        "other": {"id": str(other.pk), "title": other.title, "status": other.status},
        "resolved_by": resolved_by(conflict),
    }


def entity_summary(entity: Entity) -> dict[str, Any]:
    summary: dict[str, Any] = {"id": entity.pk, "name": entity.name, "kind": entity.kind}
    if hasattr(entity, "memory_count"):
        summary["memory_count"] = entity.memory_count
    return summary


def relation_summary(relation: Relation) -> dict[str, Any]:
    return {
        "kind": relation.kind,
        "source": {"id": relation.source_id, "name": relation.source.name, "kind": relation.source.kind},
        "target": {"id": relation.target_id, "name": relation.target.name, "kind": relation.target.kind},
    }

"""The memory shape (DESIGN.md §4) shared by REST, MCP and exports."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from memories.models import Memory


def iso(moment: datetime | None) -> str | None:
    """ISO 8601 in UTC with a Z, the form every Cortex API answers with."""
    if moment is None:
        return None
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


def author_of(memory: Memory) -> dict[str, Any]:
    return {"id": str(memory.author_id) if memory.author_id else None, "name": memory.author_display}


def memory_representation(memory: Memory, clearance_names: dict[int, str]) -> dict[str, Any]:
    return {
        "id": str(memory.pk),
        "title": memory.title,
        "content": memory.content,
        "scope": memory.scope.slug,
        "category": memory.category,
        "source": memory.source,
        "source_url": memory.source_url or None,
        "author": author_of(memory),
        "tags": list(memory.tags),
        "clearance_min": clearance_names.get(memory.clearance_rank, str(memory.clearance_rank)),
        "status": memory.status,
        "valid_from": iso(memory.valid_from),
        "valid_until": iso(memory.valid_until),
        "created_at": iso(memory.created_at),
        "updated_at": iso(memory.updated_at),
        "supersedes": str(memory.supersedes_id) if memory.supersedes_id else None,
        "superseded_by": str(memory.superseded_by_id) if memory.superseded_by_id else None,
    }


def citation(memory: Memory) -> dict[str, Any]:
    return {
        "title": memory.title,
        "source": memory.source,
        "source_url": memory.source_url or None,
        "author": memory.author_display or None,
        "valid_from": iso(memory.valid_from),
        "scope": memory.scope.slug,
    }


def redaction(memory: Memory) -> dict[str, Any] | None:
    if memory.status != Memory.Status.REDACTED:
        return None
    return {
        "redacted_at": iso(memory.redacted_at),
        "redacted_by": memory.redacted_by.email if memory.redacted_by else None,
        "reason": memory.redaction_reason,
    }

"""The memory shape (DESIGN.md §4) shared by REST, MCP and exports."""

from __future__ import annotations

from collections.abc import Collection, Iterable
from datetime import UTC, datetime
from typing import Any

from memories.access import Principal, clearance_names
from memories.models import Memory
from memories.selectors.memories import readable_base, redaction_held_until


def iso(moment: datetime | None) -> str | None:
    """ISO 8601 in UTC with a Z, the form every Cortex API answers with."""
    if moment is None:
        return None
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


def author_of(memory: Memory) -> dict[str, Any]:
    return {
        "id": str(memory.author_id) if memory.author_id else None,
        "name": memory.author_display,
        # "import" or "connector" when the name was stated by a source rather than being the writer.
        "given_by": memory.author_given_by or None,
    }


def memory_representation(
    memory: Memory, clearance_names: dict[int, str], visible_links: Collection[Any] | None = None
) -> dict[str, Any]:
    """The memory as clients see it. `visible_links` holds the ids of linked versions the reader may see;
    links to others are shown as null, so an invisible version does not leak even its id. None shows all
    (operator exports only) — interfaces acting for a principal use `present_memories`."""

    def link(memory_id: Any) -> str | None:
        if memory_id is None or (visible_links is not None and memory_id not in visible_links):
            return None
        return str(memory_id)

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
        "supersedes": link(memory.supersedes_id),
        "superseded_by": link(memory.superseded_by_id),
    }


def present_memories(principal: Principal, memories: Iterable[Memory]) -> list[dict[str, Any]]:
    """Memories rendered for a principal: clearance names and version links resolved in two queries."""
    memories = list(memories)
    links = {link for m in memories for link in (m.supersedes_id, m.superseded_by_id) if link is not None}
    visible = set(readable_base(principal).filter(pk__in=links).values_list("pk", flat=True)) if links else set()
    names = clearance_names(principal.organization_id)
    return [memory_representation(m, names, visible) for m in memories]


def present_memory(principal: Principal, memory: Memory) -> dict[str, Any]:
    return present_memories(principal, [memory])[0]


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
        # Until when an admin can restore it; null once final (urgent, or the hold expired).
        "held_until": iso(redaction_held_until(memory)),
    }


def cite_text(memory: Memory) -> str:
    """The citation as one line an agent can quote: source (link), author, date, scope, id."""
    c = citation(memory)
    parts = [c["source"] + (f" ({c['source_url']})" if c["source_url"] else "")]
    if c["author"]:
        parts.append(c["author"])
    if c["valid_from"]:
        parts.append(c["valid_from"][:10])
    parts.append(f"scope {c['scope']}")
    return f"{', '.join(parts)} — Cortex memory {memory.pk}"

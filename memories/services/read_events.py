"""Read events: the one rule every interface (UI, REST, MCP) follows when it returns memory content.

A list records `memory.list` with its filters and the ids it returned; a single memory
`memory.read` with its id; a recall `memory.recall` with its query (recorded by recall itself,
whoever calls it). Each event says which interface answered (`via`: ui, api or mcp). Pages of
a list are each their own event: each returned different memories.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict
from typing import Literal

from audit.actions import Action
from audit.services import record
from memories.access import Principal
from memories.models import Memory
from memories.selectors.memories import MemoryFilters

Via = Literal["ui", "api", "mcp"]


def memory_read_audit(*, principal: Principal, memory: Memory, via: Via) -> None:
    """One memory was shown to the principal."""
    record(
        Action.MEMORY_READ,
        organization=principal.organization_id,
        actor=principal.actor,
        target_type="memory",
        target_id=memory.pk,
        details={"via": via},
    )


def memory_list_audit(*, principal: Principal, filters: MemoryFilters, memories: Sequence[Memory], via: Via) -> None:
    """A page of a memory list was shown to the principal: the filters asked and the ids returned."""
    record(
        Action.MEMORY_LIST,
        organization=principal.organization_id,
        actor=principal.actor,
        details={
            "via": via,
            # Only what narrowed the list: defaults (none, blank, off) say nothing about what was read.
            "filters": {name: value for name, value in asdict(filters).items() if value not in (None, "", False)},
            "results": [str(memory.pk) for memory in memories],
        },
    )

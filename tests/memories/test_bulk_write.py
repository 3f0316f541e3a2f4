"""memory_create_many: the write pipeline for a batch — one outcome per draft, one embedding call, one commit."""

from __future__ import annotations

from typing import Any

import pytest

from audit.models import AuditEvent
from cortex_site.errors import CortexError
from memories.models import Memory, MemoryChunk
from memories.services.memories import MemoryDraft, WriteResult, memory_create_many

pytestmark = pytest.mark.django_db


def _codes(outcomes: list[WriteResult | CortexError]) -> list[str]:
    return [o.error_code if isinstance(o, CortexError) else ("deduplicated" if o.deduplicated else "created") for o in outcomes]


def test_each_draft_gets_its_own_outcome_in_order_and_the_good_ones_are_stored(
    acme: dict[str, Any], principal_of: Any, outsider: Any, api: Any, django_capture_on_commit_callbacks: Any
) -> None:
    drafts = [
        MemoryDraft(content="Dock firmware 5.1 is the long-term support release.", scope="engineering"),
        MemoryDraft(content="   "),
        MemoryDraft(content="Quarterly targets are set by sales leadership.", scope="sales"),  # not granted to this employee
        MemoryDraft(content="Dock firmware 5.1 is the long-term support release.", scope="engineering"),  # the first, again
        MemoryDraft(
            content="\n\n".join(f"Runbook step {i}: drain the dock, then restart the controller." * 8 for i in range(10))
        ),
    ]
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        outcomes = memory_create_many(principal=principal_of(acme["employee"]), drafts=drafts)

    assert _codes(outcomes) == ["created", "EMPTY_CONTENT", "UNKNOWN_SCOPE", "deduplicated", "created"]
    first, runbook = outcomes[0], outcomes[4]
    assert isinstance(first, WriteResult) and isinstance(runbook, WriteResult)
    assert isinstance(outcomes[3], WriteResult) and outcomes[3].memory.pk == first.memory.pk
    assert Memory.objects.count() == 2
    assert MemoryChunk.objects.filter(memory=runbook.memory).count() > 1
    assert all(c.embedding is not None for c in MemoryChunk.objects.all())
    assert AuditEvent.objects.filter(action="memory.create").count() == 2
    assert len(callbacks) == 2  # post-write work for each stored memory, once the batch commits
    # Read like any other memory: the writer sees them, another organization does not.
    assert api(acme["employee"]).get(f"/api/memories/{first.memory.pk}").status_code == 200
    assert api(outsider).get(f"/api/memories/{first.memory.pk}").status_code == 404


def test_the_same_source_item_twice_in_a_batch_stores_the_first_and_goes_on(acme: dict[str, Any], principal_of: Any) -> None:
    drafts = [
        MemoryDraft(content="PLAT-1 first text.", source="GitHub", external_id="acme/dock#1", scope="engineering"),
        MemoryDraft(content="PLAT-1 edited text.", source="GitHub", external_id="acme/dock#1", scope="engineering"),
        MemoryDraft(content="PLAT-2 text.", source="GitHub", external_id="acme/dock#2", scope="engineering"),
    ]
    outcomes = memory_create_many(principal=principal_of(acme["employee"]), drafts=drafts)

    assert _codes(outcomes) == ["created", "DUPLICATE_ITEM", "created"]
    assert sorted(Memory.objects.values_list("external_id", flat=True)) == ["acme/dock#1", "acme/dock#2"]


def test_an_embedding_failure_fails_every_draft_that_needed_it_and_stores_nothing(
    acme: dict[str, Any], principal_of: Any, use_embedder: Any
) -> None:
    from cortex_site.embedded import free_port

    use_embedder("openai", OPENAI_API_KEY="sk-test", OPENAI_BASE_URL=f"http://127.0.0.1:{free_port()}/v1")
    drafts = [MemoryDraft(content="One."), MemoryDraft(content=""), MemoryDraft(content="Two.")]

    outcomes = memory_create_many(principal=principal_of(acme["employee"]), drafts=drafts)

    assert _codes(outcomes) == ["EMBEDDING_UNAVAILABLE", "EMPTY_CONTENT", "EMBEDDING_UNAVAILABLE"]
    assert not Memory.objects.exists() and not MemoryChunk.objects.exists()

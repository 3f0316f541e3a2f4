"""memory_create_many: the write pipeline for a batch — one outcome per draft, one embedding call, one commit."""

from __future__ import annotations

import itertools
import threading
from datetime import timedelta
from typing import Any

import numpy as np
import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from audit.models import AuditEvent
from audit.services import verify_chain
from cortex_site.celery import app
from cortex_site.errors import CortexError
from memories.models import Memory, MemoryChunk
from memories.services.memories import MemoryDraft, WriteResult, memory_create, memory_create_many, memory_redact

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
    assert len(callbacks) == 1  # the batch's post-write work goes to the worker once it commits
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


def test_the_same_content_twice_in_one_batch_is_stored_once_and_the_copy_answers_with_the_first(
    acme: dict[str, Any], principal_of: Any
) -> None:
    text = "The dock controller restarts itself after three missed heartbeats."
    drafts = [
        MemoryDraft(title="Heartbeats", content=text, scope="engineering"),
        MemoryDraft(content="An unrelated note about the office coffee machine.", scope="engineering"),
        MemoryDraft(title="Same text, another title", content=text + "\r\n", scope="engineering"),
        MemoryDraft(content=text, scope="engineering"),
    ]
    outcomes = memory_create_many(principal=principal_of(acme["employee"]), drafts=drafts)

    assert _codes(outcomes) == ["created", "created", "deduplicated", "deduplicated"]
    first = outcomes[0]
    assert isinstance(first, WriteResult)
    assert all(isinstance(o, WriteResult) and o.memory.pk == first.memory.pk for o in (outcomes[2], outcomes[3]))
    assert Memory.objects.filter(content_hash=first.memory.content_hash).count() == 1
    assert AuditEvent.objects.filter(action="memory.create").count() == 2


def test_a_copy_in_the_batch_of_a_memory_the_writer_cannot_read_is_stored_again(acme: dict[str, Any], principal_of: Any) -> None:
    # Within one batch the rule is the one a second, separate write would meet: the first copy is
    # already past its validity window, so it is no duplicate of anything the writer reads.
    text = "Badge readers in hall B are replaced during the spring shutdown."
    now = timezone.now()
    drafts = [
        MemoryDraft(content=text, scope="engineering", valid_from=now - timedelta(days=9), valid_until=now - timedelta(days=2)),
        MemoryDraft(content=text, scope="engineering"),
        MemoryDraft(content=text, scope="engineering"),
    ]
    outcomes = memory_create_many(principal=principal_of(acme["employee"]), drafts=drafts)

    assert _codes(outcomes) == ["created", "created", "deduplicated"]
    expired, current, copy = (o.memory for o in outcomes if isinstance(o, WriteResult))
    assert expired.pk != current.pk and copy.pk == current.pk


def test_a_stored_duplicate_the_writer_cannot_read_is_not_revealed(acme: dict[str, Any], principal_of: Any) -> None:
    text = "Salary bands are reviewed every March."
    hidden = memory_create(
        principal=principal_of(acme["exec"]), draft=MemoryDraft(content=text, scope="engineering", clearance_min="Executive")
    )
    visible = memory_create(principal=principal_of(acme["exec"]), draft=MemoryDraft(content="Dock firmware ships on Tuesdays."))

    outcomes = memory_create_many(
        principal=principal_of(acme["employee"]),
        drafts=[
            MemoryDraft(content=text, scope="engineering"),
            MemoryDraft(content="Dock firmware ships on Tuesdays."),
        ],
    )

    assert _codes(outcomes) == ["created", "deduplicated"]
    mine, seen = (o.memory for o in outcomes if isinstance(o, WriteResult))
    assert mine.pk != hidden.memory.pk and mine.clearance_rank < hidden.memory.clearance_rank
    assert seen.pk == visible.memory.pk


def test_an_item_refused_while_storing_fails_alone_with_its_reason(acme: dict[str, Any], principal_of: Any) -> None:
    employee = principal_of(acme["employee"])
    original = memory_create(
        principal=employee,
        draft=MemoryDraft(content="PLAT-7 first text.", source="GitHub", external_id="acme/dock#7", scope="engineering"),
    ).memory
    closed = memory_create(
        principal=employee,
        draft=MemoryDraft(content="PLAT-8 text.", source="GitHub", external_id="acme/dock#8", scope="engineering"),
    ).memory
    memory_redact(principal=employee, memory_id=closed.pk, reason="posted by mistake", urgent=True)
    drafts = [
        MemoryDraft(content="Fresh note one.", scope="engineering", idempotency_key="k-1"),
        MemoryDraft(content="PLAT-7 edited once.", source="GitHub", external_id="acme/dock#7", scope="engineering"),
        MemoryDraft(content="PLAT-7 edited twice.", source="GitHub", external_id="acme/dock#7", scope="engineering"),
        MemoryDraft(content="PLAT-8 edited.", source="GitHub", external_id="acme/dock#8", scope="engineering"),
        MemoryDraft(content="Fresh note one, retried with the same key.", scope="engineering", idempotency_key="k-1"),
        MemoryDraft(content="Fresh note two.", scope="engineering"),
    ]
    outcomes = memory_create_many(principal=employee, drafts=drafts)

    # Both edits found the same current version; the first supersedes it, the second finds it gone.
    assert _codes(outcomes) == ["created", "created", "MEMORY_NOT_ACTIVE", "EXTERNAL_ITEM_CLOSED", "deduplicated", "created"]
    key_first, edit, _, _, key_again, _ = outcomes
    assert isinstance(key_first, WriteResult) and isinstance(key_again, WriteResult) and isinstance(edit, WriteResult)
    assert key_again.memory.pk == key_first.memory.pk  # the key replays its memory
    original.refresh_from_db()
    assert original.status == Memory.Status.SUPERSEDED and original.superseded_by_id == edit.memory.pk
    assert edit.memory.supersedes_id == original.pk and edit.memory.external_id == "acme/dock#7"
    assert not Memory.objects.filter(content__startswith="PLAT-7 edited twice").exists()
    assert AuditEvent.objects.filter(action="memory.supersede", target_id=str(edit.memory.pk)).count() == 1


def test_the_chain_verifies_after_a_batch_with_one_event_per_stored_memory_in_order(
    acme: dict[str, Any], principal_of: Any
) -> None:
    org = acme["org"]
    drafts = [MemoryDraft(content=f"Batch note {i}: the {i}th controller is calibrated weekly.") for i in range(6)]
    drafts.insert(2, MemoryDraft(content=""))
    head = AuditEvent.objects.filter(organization=org).order_by("-id").first()
    assert head is not None

    outcomes = memory_create_many(principal=principal_of(acme["employee"]), drafts=drafts)

    created = [o.memory for o in outcomes if isinstance(o, WriteResult)]
    assert len(created) == 6
    events = list(AuditEvent.objects.filter(organization=org, id__gt=head.pk).order_by("id"))
    assert [(e.action, e.target_id) for e in events] == [("memory.create", str(m.pk)) for m in created]
    assert events[0].prev_hash == head.hash
    for previous, event in itertools.pairwise(events):
        assert event.prev_hash == previous.hash
    assert all(e.details["chunks"] == 1 and e.details["scope"] == "public-docs" for e in events)
    assert verify_chain(org).ok


def test_a_batch_makes_the_same_number_of_queries_whatever_its_size(acme: dict[str, Any], principal_of: Any) -> None:
    writer = principal_of(acme["employee"])
    counter = itertools.count()

    def batch(n: int) -> int:
        drafts = [
            MemoryDraft(content=f"Sizing note {next(counter)} for the dock fleet.", scope=scope, tags=["fleet"])
            for scope in ("engineering", "public-docs")
            for _ in range(n)
        ]
        with CaptureQueriesContext(connection) as queries:
            outcomes = memory_create_many(principal=writer, drafts=drafts)
        assert _codes(outcomes) == ["created"] * (2 * n)
        return len(queries)

    batch(1)  # the first write records the store's embedding signature and fills the principal's caches
    assert batch(2) == batch(12)
    assert MemoryChunk.objects.filter(embedding__isnull=True).count() == 0


def test_every_memory_of_a_batch_gets_its_post_write_work_once_the_batch_commits(
    acme: dict[str, Any], principal_of: Any, django_capture_on_commit_callbacks: Any
) -> None:
    drafts = [
        MemoryDraft(content=f"Post-write note {i}: the bay {i} charger was replaced.", scope="engineering") for i in range(3)
    ]
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        outcomes = memory_create_many(principal=principal_of(acme["employee"]), drafts=[*drafts, drafts[0]])
    ids = [o.memory.pk for o in outcomes[:3] if isinstance(o, WriteResult)]
    assert len(ids) == 3 and Memory.objects.filter(pk__in=ids, post_write_pending=True).count() == 3
    assert len(callbacks) == 1  # one message for the batch (nothing runs before the commit)

    callbacks[0]()  # the commit: the worker fans it out into each memory's post-write task (run inline in tests)

    assert not Memory.objects.filter(pk__in=ids, post_write_pending=True).exists()
    # On the same queue as each memory's own post-write task, so post-write workers take both.
    assert app.amqp.router.route({}, "memories.after_memory_writes")["queue"].name == "conflicts"


@pytest.mark.django_db(transaction=True)
def test_two_batches_writing_the_same_contents_at_once_store_each_once(acme: dict[str, Any], principal_of: Any) -> None:
    # In opposite orders: each batch takes its content locks in one sorted order, so they never wait
    # on each other in a cycle; whichever commits second finds the other's memories as duplicates.
    texts = [f"Shared note {i}: the charger in bay {i} is on the new firmware." for i in range(8)]
    barrier = threading.Barrier(2)
    results: dict[str, list[WriteResult | CortexError]] = {}

    def write(name: str, membership: Any, order: list[str]) -> None:
        try:
            writer = principal_of(membership)
            barrier.wait(timeout=10)
            results[name] = memory_create_many(
                principal=writer, drafts=[MemoryDraft(content=t, scope="engineering") for t in order]
            )
        finally:
            connection.close()

    threads = [
        threading.Thread(target=write, args=("a", acme["employee"], texts)),
        threading.Thread(target=write, args=("b", acme["manager"], texts[::-1])),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)

    assert set(results) == {"a", "b"}
    outcomes = results["a"] + results["b"]
    assert all(isinstance(o, WriteResult) for o in outcomes), outcomes
    assert Memory.objects.count() == len(texts)
    assert sum(1 for o in outcomes if isinstance(o, WriteResult) and o.deduplicated) == len(texts)
    assert verify_chain(acme["org"]).ok


def test_a_batch_stores_each_chunk_with_its_own_vector_text_and_its_memory_filter_columns(
    acme: dict[str, Any], principal_of: Any
) -> None:
    from memories.chunking import chunk_text
    from memories.embeddings.factory import get_embedder
    from memories.services.memories import embedding_text

    long = "\n\n".join(f"Section {i}: the dock {i} controller drains before a restart. " * 9 for i in range(8))
    drafts = [
        MemoryDraft(content=long, title="Dock runbook", scope="engineering", tags=["runbook", "Dock"], category="howto"),
        MemoryDraft(
            content="Office plants are watered on Mondays.",
            scope="public-docs",
            source="Slack",
            valid_until=timezone.now() + timedelta(days=30),
        ),
    ]
    outcomes = memory_create_many(principal=principal_of(acme["manager"]), drafts=drafts)

    assert _codes(outcomes) == ["created", "created"]
    for outcome in outcomes:
        assert isinstance(outcome, WriteResult)
        memory = Memory.objects.get(pk=outcome.memory.pk)
        chunks = list(MemoryChunk.objects.filter(memory=memory).order_by("index"))
        expected = chunk_text(memory.content)
        assert [(c.index, c.char_start, c.char_end, c.text) for c in chunks] == [
            (e.index, e.start, e.end, e.text) for e in expected
        ]
        # Each chunk's own vector, bit for bit what the model gave (float32 through the text form).
        vectors = get_embedder().embed([embedding_text(memory.title, c.text) for c in chunks])
        # (read back through pgvector's text form: the shortest decimal of each float32)
        stored = np.vstack([np.asarray(c.embedding, dtype=np.float32) for c in chunks])
        assert stored.tobytes() == vectors.tobytes()
        assert [c.id for c in chunks] == sorted(c.id for c in chunks)  # written in order
        for c in chunks:
            assert (
                c.organization_id,
                c.scope_id,
                c.clearance_rank,
                c.status,
                c.valid_from,
                c.valid_until,
                c.category,
                c.source,
                c.tags,
            ) == (
                memory.organization_id,
                memory.scope_id,
                memory.clearance_rank,
                memory.status,
                memory.valid_from,
                memory.valid_until,
                memory.category,
                memory.source,
                memory.tags,
            )
    with connection.cursor() as cursor:  # the full-text vector index_chunks would compute
        cursor.execute(
            """
            SELECT count(*) FILTER (WHERE c.search_vector::text = (setweight(to_tsvector('english', m.title), 'A')
                   || setweight(to_tsvector('english', array_to_string(m.tags, ' ')), 'A')
                   || setweight(to_tsvector('english', c.text), 'B'))::text), count(*)
              FROM memories_memorychunk AS c JOIN memories_memory AS m ON m.id = c.memory_id
            """
        )
        same, total = cursor.fetchone()
    assert total > 2 and same == total

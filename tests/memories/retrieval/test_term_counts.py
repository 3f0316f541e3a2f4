"""Recall's term statistics, kept at write time (memories_termcount), against the chunks they count:
after every kind of chunk write, each reader's statistics equal a count of the chunks that reader may
see; an update that changes nothing counted appends nothing; compaction folds the appended rows and
changes no reader's figures."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from support import principal, remember

from memories.access import Principal
from memories.models import Memory, MemoryChunk, TermCount
from memories.retrieval import sql
from memories.retrieval.sql import vector_literal
from memories.selectors.recall import statistics_rule
from memories.services.memories import memory_delete, memory_patch, memory_redact, memory_supersede
from memories.services.term_counts import term_counts_compact

# Plain words, a stemmed one, a stop word, a word no chunk holds, ticket ids (several lexemes) and
# hyphenated words (a whole-word lexeme and its parts).
WORDS = ["discount", "partners", "parking", "garage", "retention", "quokka", "the", "INC-2041", "DA-3661"]
WORDS += ["on-call", "follow-up", "e-bike", "v2-beta", "call"]
UNCAPPED = 10**6


def _counted_from_chunks(reader: Principal) -> tuple[int, dict[str, int]]:
    """The reader's statistics counted from the chunks themselves, as recall counted them before."""
    rule = statistics_rule(reader)
    visible = "organization_id = %s AND scope_id = ANY(%s) AND clearance_rank <= %s AND status = 'active'"
    cell: list[Any] = [rule.organization_id, list(rule.scope_ids), rule.clearance_rank]
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT count(*) FROM memories_memorychunk WHERE {visible}", cell)  # noqa: S608 - fixed fragment
        total = cursor.fetchone()[0]
        frequencies = {}
        for word in WORDS:
            cursor.execute(
                f"""SELECT CASE WHEN numnode(plainto_tsquery('english', %s)) = 0 THEN -1 ELSE (
                        SELECT count(*) FROM memories_memorychunk
                         WHERE {visible} AND search_vector @@ plainto_tsquery('english', %s)) END""",  # noqa: S608
                [word, *cell, word],
            )
            frequencies[word] = cursor.fetchone()[0]
    return total, frequencies


def _assert_counts_match(readers: list[Any]) -> None:
    for member in readers:
        reader = principal(member)
        assert sql.term_document_frequencies(statistics_rule(reader), WORDS, UNCAPPED) == _counted_from_chunks(reader)


def _sums() -> dict[tuple[int, int, int, str], int]:
    sums: dict[tuple[int, int, int, str], int] = {}
    for row in TermCount.objects.values_list("organization_id", "scope_id", "clearance_rank", "lexeme", "chunks"):
        sums[row[:4]] = sums.get(row[:4], 0) + row[4]
    return {key: value for key, value in sums.items() if value}


@pytest.mark.django_db
def test_every_chunk_write_keeps_each_readers_counts_exact(acme: dict[str, Any], outsider: Any) -> None:
    readers = [acme["exec"], acme["manager"], acme["employee"], acme["contractor"], outsider]
    discount = remember(acme["exec"], "Partners get 15% off annual plans; the discount renews.", title="Discount", scope="sales")
    parking = remember(acme["exec"], "Visitor parking is in the north garage.", title="Parking", scope="engineering")
    incident = remember(
        acme["exec"],
        "INC-2041: the garage gate failed; retention of logs is 30 days.",
        scope="engineering",
        clearance_min="Manager",
    )
    remember(acme["exec"], "Parking permits are renewed each January.", scope="handbook")
    remember(acme["exec"], "On-calls rotate weekly; ring the e-bike desk for a follow-up (DA-3661).", scope="engineering")
    remember(acme["exec"], "Call DA about the v2-beta bike and its follow-ups.", scope="engineering")
    remember(acme["exec"], "The e-bikes are parked where on-call staff wait.", scope="handbook")
    remember(outsider, "Globex parking and a quokka.", title="Parking")
    _assert_counts_match(readers)

    exec_ = principal(acme["exec"])
    memory_supersede(principal=exec_, memory_id=parking.pk, changes={"content": "Visitor parking moved to the south lot."})
    _assert_counts_match(readers)
    memory_patch(principal=exec_, memory_id=discount.pk, changes={"clearance_min": "Executive", "tags": ["quokka"]})
    _assert_counts_match(readers)
    memory_redact(principal=exec_, memory_id=incident.pk, reason="Named a customer", urgent=True)
    _assert_counts_match(readers)
    memory_delete(principal=exec_, memory_id=discount.pk)
    _assert_counts_match(readers)


@pytest.mark.django_db
def test_term_parses_are_kept_per_process_and_count_alike(acme: dict[str, Any]) -> None:
    remember(acme["exec"], "On-calls rotate weekly; ring the e-bike desk for a follow-up (DA-3661).", scope="engineering")
    rule = statistics_rule(principal(acme["exec"]))
    sql._PARSES.clear()
    with CaptureQueriesContext(connection) as first:
        counted = sql.term_document_frequencies(rule, WORDS, UNCAPPED)
    with CaptureQueriesContext(connection) as again:
        assert sql.term_document_frequencies(rule, WORDS, UNCAPPED) == counted
    assert (len(first), len(again)) == (2, 1)  # the parse once, then the counts alone
    assert counted == _counted_from_chunks(principal(acme["exec"]))
    parsed = sql.parse_terms(["on-call", "the", "DA-3661", "partners"])
    assert parsed["on-call"] == sql.ParsedTerm(("call", "on-cal"), "on-cal")  # "on" is a stop word
    assert parsed["the"] == sql.ParsedTerm((), None)
    assert parsed["DA-3661"].whole_word is None and len(parsed["DA-3661"].lexemes) == 2
    assert parsed["partners"] == sql.ParsedTerm(("partner",), None)


@pytest.mark.django_db
def test_an_update_that_changes_nothing_counted_appends_nothing(acme: dict[str, Any]) -> None:
    memory = remember(acme["exec"], "Visitor parking is in the north garage.", scope="engineering")
    before = TermCount.objects.count()
    vector = vector_literal(np.full(384, 0.05))
    with connection.cursor() as cursor:  # what a re-embedding writes: the vector only
        cursor.execute("UPDATE memories_memorychunk SET embedding = %s::vector WHERE memory_id = %s", [vector, memory.pk])
    MemoryChunk.objects.filter(memory_id=memory.pk).update(category="ops")
    assert TermCount.objects.count() == before


@pytest.mark.django_db
def test_compaction_folds_each_key_into_one_row_and_changes_no_figure(acme: dict[str, Any]) -> None:
    readers = [acme["exec"], acme["employee"], acme["contractor"]]
    for n in range(3):
        remember(acme["exec"], f"Parking note {n}: the garage opens at {n + 6}.", scope="engineering")
    gone = remember(acme["exec"], "A quokka visited the garage.", scope="engineering")
    memory_delete(principal=principal(acme["exec"]), memory_id=gone.pk)
    sums = _sums()
    appended = TermCount.objects.filter(compacted=False).count()
    assert TermCount.objects.filter(lexeme="garag").count() > 1

    compaction = term_counts_compact(batch_size=appended)

    assert compaction.folded == appended and compaction.more
    assert _sums() == sums
    assert not TermCount.objects.filter(compacted=False).exists()
    keys = TermCount.objects.values_list("organization_id", "scope_id", "clearance_rank", "lexeme")
    assert len(keys) == len(set(keys)) == len(sums)
    assert not TermCount.objects.filter(lexeme="quokka").exists()  # its rows summed to 0
    _assert_counts_match(readers)
    assert term_counts_compact(batch_size=appended) == type(compaction)(folded=0, more=False)


@pytest.mark.django_db
def test_compaction_in_batches_leaves_the_rest_for_the_next(acme: dict[str, Any]) -> None:
    for n in range(2):
        remember(acme["exec"], f"Parking note {n}: the garage opens early.", scope="engineering")
    sums = _sums()
    appended = TermCount.objects.filter(compacted=False).count()
    compaction = term_counts_compact(batch_size=3)
    assert compaction.folded == 3 and compaction.more
    assert _sums() == sums
    runs = [term_counts_compact(batch_size=3) for _ in range(appended)]  # at most one per appended row
    assert all(run.folded <= 3 for run in runs) and not runs[-1].more
    assert _sums() == sums and not TermCount.objects.filter(compacted=False).exists()
    assert Memory.objects.filter(organization=acme["org"]).count() == 2


@pytest.mark.django_db
def test_beat_compacts_every_minute_and_a_full_batch_enqueues_the_next(
    acme: dict[str, Any], django_capture_on_commit_callbacks: Any
) -> None:
    from cortex_site.celery import app
    from memories.tasks import compact_term_counts

    schedule = {entry["task"]: entry["schedule"] for entry in app.conf.beat_schedule.values()}
    assert schedule["memories.compact_term_counts"] == 60.0
    remember(acme["exec"], "Visitor parking is in the north garage.", scope="engineering")
    appended = TermCount.objects.filter(compacted=False).count()

    with django_capture_on_commit_callbacks(execute=False) as next_batches:
        assert compact_term_counts.apply(args=(appended - 1,)).get(disable_sync_subtasks=False) == appended - 1
    assert len(next_batches) == 1
    with django_capture_on_commit_callbacks(execute=False) as next_batches:
        assert compact_term_counts.apply(args=(appended,)).get(disable_sync_subtasks=False) <= 1
    assert next_batches == []
    assert not TermCount.objects.filter(compacted=False).exists()

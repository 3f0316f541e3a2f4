"""Hidden memories must not move what a reader sees: results, scores and their parts stay byte-identical
when someone writes what the reader may not read (issue 14, the term-statistics side channel)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone
from support import principal, remember

from memories.selectors.recall import RecallQuery, recall


def _answer(member: Any, query: str) -> list[tuple[Any, ...]]:
    hits = recall(principal(member), RecallQuery(query, limit=10), audit=False).hits
    return [
        (str(h.memory.pk), h.score, h.relevance, h.recency, h.dense, h.lexical, h.match, h.confidence, h.snippet, h.chunk_index)
        for h in hits
    ]


@pytest.mark.django_db
@pytest.mark.parametrize("reader", ["contractor", "employee"])
def test_hidden_writes_leave_a_readers_results_and_scores_byte_identical(acme: dict[str, Any], reader: str) -> None:
    exec_ = acme["exec"]
    # Old enough that recency stays the same to six decimals while the hidden writes take their time.
    old = timezone.now() - timedelta(days=500)
    remember(exec_, "The aardvark exhibit opens in March; quokka feeding is at noon.", scope="engineering", valid_from=old)
    remember(exec_, "Quokka photos go in the shared drive, not in Slack.", scope="engineering", valid_from=old)
    remember(exec_, "Aardvark is the codename of the new dock firmware.", scope="engineering", valid_from=old)
    remember(exec_, "Lunch rota: Tuesday is pizza.", scope="engineering", valid_from=old)
    queries = ["aardvark quokka", "quokka", "aardvark firmware", "quokka photos slack"]
    before = {q: _answer(acme[reader], q) for q in queries}
    assert all(before.values())

    # What the reader may not see: another scope, a higher clearance, another organization's writes
    # do not exist for them — not even as a shift in how rare a word is.
    for n in range(3):
        remember(exec_, f"Leadership offsite {n}: quokka quokka aardvark budget.", scope="sales")
        remember(exec_, f"Board note {n}: the quokka deal.", scope="engineering", clearance_min="Executive")
    after = {q: _answer(acme[reader], q) for q in queries}

    assert after == before


@pytest.mark.django_db
def test_a_token_only_in_a_hidden_memory_changes_nothing_for_the_reader(acme: dict[str, Any]) -> None:
    exec_ = acme["exec"]
    old = timezone.now() - timedelta(days=500)
    remember(exec_, "Ticket PLAT-1200 tracks the dock timeout.", scope="engineering", valid_from=old)
    remember(exec_, "Ticket PLAT-1300 tracks the login bug.", scope="engineering", valid_from=old)
    before = _answer(acme["contractor"], "PLAT-7777 dock timeout")

    remember(exec_, "Ticket PLAT-7777: the secret acquisition dock timeout.", scope="engineering", clearance_min="Executive")
    after = _answer(acme["contractor"], "PLAT-7777 dock timeout")

    assert after == before
    # The Executive, who may see it, gets it first.
    assert "PLAT-7777" in recall(principal(exec_), RecallQuery("PLAT-7777 dock timeout"), audit=False).hits[0].memory.content

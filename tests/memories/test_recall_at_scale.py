"""Recall's large-organization paths: common terms, the bounded tie-break, the pool-only load.

At test scale no term is common (in COMMON_SHARE of the chunks, at least COMMON_FLOOR, at most
DF_CAP), so these tests lower the thresholds; a common term does not select lexical candidates
on its own.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from memories.access import Principal
from memories.models import Membership, Memory, Organization
from memories.retrieval import sql
from memories.selectors import recall as recall_module
from memories.selectors.recall import RecallQuery, recall
from memories.services.memories import MemoryDraft, memory_create

pytestmark = pytest.mark.django_db


@pytest.fixture
def reader(make_org: Callable[..., Organization], make_member: Callable[..., Membership]) -> Principal:
    membership = make_member(make_org(), "Employee")
    return Principal(Membership.objects.select_related("organization", "user").get(pk=membership.pk))


def store(principal: Principal, content: str, title: str = "") -> Memory:
    return memory_create(principal=principal, draft=MemoryDraft(content=content, title=title)).memory


def where(principal: Principal) -> sql.ChunkFilter:
    return sql.ChunkFilter(
        organization_id=principal.organization_id,
        scope_ids=sorted(principal.readable_scope_ids),
        clearance_rank=principal.clearance_rank,
        moment=timezone.now(),
    )


def lexical_memories(principal: Principal, terms: list[str], common: list[bool]) -> set[Any]:
    ids = sql.lexical_hits(terms, [1.0] * len(terms), where(principal), 40, common=common)
    return set(Memory.objects.filter(chunks__id__in=ids).values_list("content", flat=True))


def test_a_common_term_alone_does_not_select_lexical_candidates_but_a_selective_one_does(reader: Principal) -> None:
    store(reader, "Weekly status update for the fleet.")
    store(reader, "Update the VPN client before Friday.")
    store(reader, "The VPN moved to Tailscale.")

    found = lexical_memories(reader, ["update", "vpn"], [True, False])

    assert found == {"Update the VPN client before Friday.", "The VPN moved to Tailscale."}


def test_common_terms_alone_select_no_lexical_candidates(reader: Principal, monkeypatch: pytest.MonkeyPatch) -> None:
    store(reader, "Weekly status update for the fleet.")
    store(reader, "Status of the release: on track.")
    answer = store(reader, "Release update: the train leaves Tuesday.")
    store(reader, "The VPN moved to Tailscale.")

    assert lexical_memories(reader, ["release", "update"], [True, True]) == set()
    assert lexical_memories(reader, ["release", "update", "vpn"], [True, True, False]) == {"The VPN moved to Tailscale."}

    # Recall still finds the chunk with every common term: dense retrieval brings it and it is
    # scored lexically like any candidate.
    monkeypatch.setattr(recall_module, "DF_CAP", 1)
    monkeypatch.setattr(recall_module, "COMMON_FLOOR", 1)
    hits = recall(reader, RecallQuery("release update", limit=3), audit=False).hits
    assert hits[0].memory.pk == answer.pk
    assert hits[0].lexical > 0


def test_without_common_terms_any_term_selects_as_before(reader: Principal) -> None:
    store(reader, "Weekly status update for the fleet.")
    store(reader, "Release train leaves Tuesday.")

    assert lexical_memories(reader, ["release", "update"], [False, False]) == {
        "Weekly status update for the fleet.",
        "Release train leaves Tuesday.",
    }


def test_recall_marks_frequent_terms_common_and_still_finds_the_answer(
    reader: Principal, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(recall_module, "DF_CAP", 3)
    monkeypatch.setattr(recall_module, "COMMON_FLOOR", 3)
    for n in range(4):
        store(reader, f"Routine update number {n} about the office plants.")
    answer = store(reader, "Update: the VPN moved to Tailscale; install the new client.", title="VPN update")

    statistics = recall_module._term_statistics(recall_module.statistics_rule(reader), ["update", "vpn"])
    terms, _weights, common, _frequencies = recall_module._term_weights(["update", "vpn"], *statistics)
    hits = recall(reader, RecallQuery("vpn update", limit=3), audit=False).hits

    assert dict(zip(terms, common, strict=True)) == {"update": True, "vpn": False}
    assert hits[0].memory.pk == answer.pk


def test_recall_loads_only_the_memories_that_can_reach_the_pool(reader: Principal, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(recall_module.scoring, "PARAMS", recall_module.scoring.PARAMS.__class__(pool_size=3))
    for n in range(12):
        store(reader, f"Dock API rate limit note {n}: bursts of {n + 10} requests are allowed.")

    stored = list(Memory.objects.filter(organization_id=reader.organization_id).values_list("pk", flat=True))
    with CaptureQueriesContext(connection) as queries:
        hits = recall(reader, RecallQuery("dock api rate limit", limit=3), audit=False).hits

    # The one statement that names memories (its message carries their ids as hex): three, not twelve.
    loads = [q["sql"] for q in queries.captured_queries if any(pk.hex in q["sql"] for pk in stored)]
    assert len(hits) == 3
    assert len(loads) == 1
    assert sorted(pk for pk in stored if pk.hex in loads[0]) == sorted(h.memory.pk for h in hits)

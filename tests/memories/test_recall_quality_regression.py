"""A fast slice of the retrieval dev set (bench/quality/) as a regression floor: a change that breaks
ranking fails CI. The full harness (bench/quality.py) stays a benchmark; see docs/quality.md."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.utils import timezone

from memories.access import CliPrincipal
from memories.models import Membership, Scope
from memories.selectors.recall import RecallQuery, recall
from memories.services import tenancy
from memories.services.memories import MemoryDraft, memory_create

DATA = Path(__file__).resolve().parents[2] / "bench" / "quality"
PER_TYPE = 4
RECALL_AT_5_FLOOR = 0.85


def _load(name: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (DATA / name).read_text().splitlines() if line.strip()]


def _slice() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    queries = _load("queries.jsonl")
    memories = _load("memories.jsonl")
    chosen: list[dict[str, Any]] = []
    for query_type in ("paraphrase", "exact_token", "buried_fact", "recency", "short_keyword"):
        chosen += [q for q in queries if q["type"] == query_type][:PER_TYPE]
    needed = {key for q in chosen for key in [*q["relevant"], *q.get("older", [])]}
    # Every third other memory stays in as a distractor, so ranking is not trivial.
    kept = [m for i, m in enumerate(memories) if m["key"] in needed or i % 3 == 0]
    return chosen, kept


@pytest.mark.django_db
def test_recall_at_5_on_the_dev_set_slice_stays_above_the_floor(use_embedder: Any) -> None:
    use_embedder("local")
    queries, memories = _slice()
    org = tenancy.organization_create(slug="quality-slice")
    member = tenancy.member_add(organization=org, email="reader@quality.test", clearance="Executive")
    for slug in sorted({m["scope"] for m in memories} - {"public-docs"}):
        tenancy.grant_set(membership=member, scope=tenancy.scope_create(organization=org, slug=slug), can_write=True)
    principal = CliPrincipal(Membership.objects.get(pk=member.pk))  # the set is imported: it states its authors
    assert Scope.objects.filter(organization=org).count() > 5
    now = timezone.now()
    ids = {}
    for item in memories:
        draft = MemoryDraft(
            content=item["content"],
            title=item["title"],
            scope=item["scope"],
            category=item["category"],
            source=item["source"],
            tags=item.get("tags") or [],
            author_name=item.get("author_name") or "",
            valid_from=now - timedelta(days=item["age_days"]),
        )
        ids[str(memory_create(principal=principal, draft=draft).memory.pk)] = item["key"]

    hits_at_5 = 0
    misses = []
    newer_first = pairs = 0
    for query in queries:
        ranked = [ids[str(h.memory.pk)] for h in recall(principal, RecallQuery(query=query["query"], limit=10), audit=False).hits]
        answers = {k for k, grade in query["relevant"].items() if grade == 2}
        if answers & set(ranked[:5]):
            hits_at_5 += 1
        else:
            misses.append((query["id"], query["query"], ranked[:5]))
        for old in query.get("older", []):
            for new in answers:
                pairs += 1
                newer_first += ranked.index(new) < (ranked.index(old) if old in ranked else 99) if new in ranked else 0
    recall_at_5 = hits_at_5 / len(queries)
    assert len(queries) == 20
    assert recall_at_5 >= RECALL_AT_5_FLOOR, f"recall@5 {recall_at_5:.2f} < {RECALL_AT_5_FLOOR}; misses: {misses}"
    assert newer_first >= pairs - 1, f"newer version first in only {newer_first}/{pairs} recency pairs"

"""Templated memories: a query naming a token that one visible memory holds returns that memory first,
however many near-twins written from the same template exist (issue 14). Small corpora, exact expectations."""

from __future__ import annotations

import random
import string
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone
from support import principal, remember

from memories.analysis.conflicts import Memo, classify
from memories.models import Memory
from memories.selectors.recall import RecallQuery, recall
from memories.services.memories import memory_supersede

SCOPES = ("engineering", "sales")


def _codeword(rng: random.Random) -> str:
    # Made-up lowercase words (no digits): a codeword is not always shaped like an identifier.
    return "".join(rng.choice("bcdfghklmnprstvz") + rng.choice("aeiou") for _ in range(4))


def _first(member: Any, query: str) -> Memory | None:
    hits = recall(principal(member), RecallQuery(query, limit=5), audit=False).hits
    return hits[0].memory if hits else None


def _ago(days: float) -> Any:
    return timezone.now() - timedelta(days=days)


@pytest.mark.django_db
def test_codeword_notes_from_one_template_each_answer_their_own_codeword(acme: dict[str, Any]) -> None:
    rng = random.Random(14)
    notes: dict[str, Memory] = {}
    for n in range(24):
        word = _codeword(rng)
        scope = SCOPES[n % 2]
        # Later notes are newer: recency alone would pick the newest twin.
        notes[word] = remember(
            acme["exec"],
            f"Internal note for {scope}. Codeword {word}. Retention is 30 days.",
            scope=scope,
            valid_from=_ago(60 - 2 * n),
        )
    for word, memory in notes.items():
        assert _first(acme["exec"], f"codeword {word}") == memory, word
        assert _first(acme["exec"], word) == memory, word
        # The contractor reads engineering only: their own notes come first, the sales ones never appear.
        contractor_hits = recall(principal(acme["contractor"]), RecallQuery(f"codeword {word}", limit=10), audit=False).hits
        if memory.scope.slug == "engineering":
            assert contractor_hits[0].memory == memory, word
        else:
            assert memory not in [h.memory for h in contractor_hits]


@pytest.mark.django_db
def test_incident_reports_among_standups_answer_their_ticket_id(acme: dict[str, Any]) -> None:
    rng = random.Random(7)
    reports: dict[str, Memory] = {}
    services = ["dock-api", "fleet-console", "billing", "telemetry", "nav-stack"]
    for n in range(60):
        ticket = f"INC-{4000 + rng.randrange(1000):04d}-{n}"
        service = services[n % len(services)]
        reports[ticket] = remember(
            acme["employee"],
            f"Incident report {ticket}. Service: {service}. Impact: elevated error rates for 40 minutes. "
            f"Root cause: a bad config push. Follow-up: add a canary stage before config pushes.",
            title=f"Incident {ticket}",
            scope="engineering",
            category="incident",
            valid_from=_ago(90 - n),
        )
    for n in range(30):
        remember(
            acme["employee"],
            f"Standup {n}: yesterday reviewed incident follow-ups and config pushes; today canary stage work; no blockers.",
            scope="engineering",
            valid_from=_ago(30 - n),
        )
    for ticket, memory in reports.items():
        assert _first(acme["employee"], ticket) == memory, ticket
        assert _first(acme["employee"], f"what was the root cause of {ticket}?") == memory, ticket


@pytest.mark.slow
@pytest.mark.django_db
def test_two_hundred_near_twins_never_bury_the_exact_match(acme: dict[str, Any]) -> None:
    rng = random.Random(200)
    tokens: dict[str, Memory] = {}
    for n in range(200):
        token = "".join(rng.choice(string.ascii_uppercase) for _ in range(3)) + f"-{rng.randrange(10_000):04d}"
        if token in tokens:
            continue
        tokens[token] = remember(
            acme["employee"],
            f"Weekly update for the platform team. Ticket {token} is in review. Deploys are frozen on Friday.",
            scope="engineering",
            valid_from=_ago(200 - n),
        )
    assert len(tokens) >= 195
    for token, memory in tokens.items():
        assert _first(acme["employee"], f"ticket {token}") == memory, token


@pytest.mark.django_db
def test_the_newer_of_two_real_versions_still_wins(acme: dict[str, Any]) -> None:
    older = remember(
        acme["employee"],
        "The SRE on-call rotation is weekly, handing over on Mondays at 10:00.",
        scope="engineering",
        valid_from=_ago(200),
    )
    newer = remember(
        acme["employee"],
        "The SRE on-call rotation is weekly, handing over on Mondays at 10:00 UTC.",
        scope="engineering",
        valid_from=_ago(5),
    )
    hits = recall(principal(acme["employee"]), RecallQuery("SRE on-call rotation handover"), audit=False).hits
    assert [h.memory for h in hits[:2]] == [newer, older]


@pytest.mark.django_db
def test_a_look_alike_does_not_inherit_from_the_memory_holding_the_query_term(acme: dict[str, Any]) -> None:
    # Near-identical wording, but only the older one names the ticket asked about.
    holder = remember(
        acme["employee"],
        "Release 5.1 is blocked by FW-882 until the thermal fix lands.",
        scope="engineering",
        valid_from=_ago(120),
    )
    remember(
        acme["employee"], "Release 5.1 is blocked by FW-913 until the thermal fix lands.", scope="engineering", valid_from=_ago(1)
    )
    assert _first(acme["employee"], "FW-882") == holder
    assert _first(acme["employee"], "is release 5.1 blocked by FW-882?") == holder


def test_conflict_detection_does_not_merge_notes_that_name_different_tickets() -> None:
    now = timezone.now()
    older = Memo(
        title="PR #1875: bump dependencies in ledger-svc",
        content="What: routine dependency bumps for ledger-svc. How to test: CI green. Ticket VEL-4875.",
        valid_from=now - timedelta(days=10),
    )
    newer = Memo(
        title="PR #1021: bump dependencies in ledger-svc",
        content="What: routine dependency bumps for ledger-svc. How to test: CI green. Ticket VEL-4021.",
        valid_from=now - timedelta(days=5),
    )
    assert classify(older, newer, similarity=0.97, now=now).kind is None
    same = Memo(title=older.title, content=older.content, valid_from=now)
    assert classify(older, same, similarity=0.99, now=now).kind == "duplicate"
    # A title naming the note's own id: two ids, two subjects — not a contradiction between values.
    handoff = "On-call handoff note {}: quiet week, nothing left open. Next primary takes over Wednesday 11:00."
    first = Memo(title="On-call handoff LS677", content=handoff.format("LS677"), valid_from=now - timedelta(days=30))
    second = Memo(title="On-call handoff VN315", content=handoff.format("VN315"), valid_from=now)
    assert classify(first, second, similarity=0.97, now=now).kind is None


@pytest.mark.django_db
def test_an_earlier_version_naming_the_ticket_does_not_answer_for_a_current_one_that_does_not(acme: dict[str, Any]) -> None:
    old = remember(acme["employee"], "Release 5.1 is blocked by FW-882 until the thermal fix lands.", scope="engineering")
    current = memory_supersede(
        principal=principal(acme["employee"]),
        memory_id=old.pk,
        changes={"content": "Release 5.1 shipped on Monday after the thermal fix."},
    ).memory
    remember(acme["employee"], "Release 5.1 is blocked by FW-913 until the thermal fix lands.", scope="engineering")
    # Asked about the superseded note's words, the current version is found through it...
    assert _first(acme["employee"], "release 5.1 thermal fix blocked") is not None
    hits = recall(principal(acme["employee"]), RecallQuery("FW-882"), audit=False).hits
    # ...but it does not say FW-882, so it does not inherit the exact match the old one had.
    assert all(h.earlier_version is None for h in hits if h.memory == current)

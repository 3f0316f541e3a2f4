"""The heuristic conflict classifier, judged on a labelled set of realistic memory pairs.

The set (labelled_pairs.json) has contradictions, duplicates, stale pairs and — the most
important part — related-but-compatible pairs that must not be flagged. Pairs marked
`held_out` were written after the heuristic was frozen. Figures are in docs/quality.md.
"""

from __future__ import annotations

import json
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from memories.analysis.conflicts import Memo, analyse_statement, classify

PAIRS = json.loads((Path(__file__).parent / "labelled_pairs.json").read_text())["pairs"]
NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)


def memo(side: dict[str, Any]) -> Memo:
    until = NOW + timedelta(days=side["valid_until_days"]) if "valid_until_days" in side else None
    return Memo(side["title"], side["content"], NOW - timedelta(days=side["age_days"]), until)


def scores(rows: list[tuple[str, str]]) -> dict[str, float]:
    """Precision and recall of "is a conflict" and of the exact kind, over (label, predicted) rows."""
    flagged = [(label, got) for label, got in rows if got != "none"]
    positives = [(label, got) for label, got in rows if label != "none"]
    return {
        "precision": sum(1 for label, _ in flagged if label != "none") / max(1, len(flagged)),
        "recall": sum(1 for _, got in positives if got != "none") / max(1, len(positives)),
        "kind_precision": sum(1 for label, got in flagged if label == got) / max(1, len(flagged)),
        "kind_recall": sum(1 for label, got in positives if label == got) / max(1, len(positives)),
        "false_positives": sum(1 for label, _ in flagged if label == "none"),
    }


def predictions(pairs: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(p["label"], classify(memo(p["existing"]), memo(p["new"]), similarity=0.85, now=NOW).kind or "none") for p in pairs]


def test_the_labelled_set_is_large_and_balanced_enough() -> None:
    counts = Counter(p["label"] for p in PAIRS)
    assert len(PAIRS) >= 40
    assert min(counts.values()) >= 9, counts
    assert counts["none"] >= 20  # compatible pairs are the common case in real teams


def test_heuristic_precision_and_recall_on_the_labelled_set(capsys: pytest.CaptureFixture[str]) -> None:
    overall = scores(predictions(PAIRS))
    held_out = scores(predictions([p for p in PAIRS if p.get("held_out")]))
    with capsys.disabled():
        print(f"\nconflict heuristic, all {len(PAIRS)} pairs: {overall}\nheld-out pairs: {held_out}")
    # False positives are what make peers untrustworthy: keep them rare.
    assert overall["precision"] >= 0.95
    assert overall["false_positives"] <= 1
    assert overall["recall"] >= 0.85
    assert overall["kind_precision"] >= 0.9


@pytest.mark.parametrize("pair", [p for p in PAIRS if p["label"] == "none"], ids=lambda p: p["id"])
def test_related_but_compatible_pairs_are_not_flagged(pair: dict[str, Any]) -> None:
    verdict = classify(memo(pair["existing"]), memo(pair["new"]), similarity=0.9, now=NOW)
    assert verdict.kind is None, verdict.explanation


def test_a_different_number_for_the_same_statement_is_a_contradiction_that_names_the_values() -> None:
    old = Memo("Log retention", "Application logs are retained for 30 days.", NOW - timedelta(days=9))
    new = Memo("Log retention", "Application logs are retained for 14 days.", NOW)
    verdict = classify(old, new, similarity=0.95, now=NOW)
    assert verdict.kind == "contradiction"
    assert "30" in verdict.explanation and "14" in verdict.explanation
    assert verdict.classifier == "heuristic"


def test_the_newer_memory_saying_it_replaces_the_old_makes_the_old_stale() -> None:
    old = Memo("CI provider", "Our CI runs on CircleCI for every repository.", NOW - timedelta(days=90))
    new = Memo("CI provider", "Our CI runs on GitHub Actions for every repository; we switched from CircleCI.", NOW)
    verdict = classify(old, new, similarity=0.9, now=NOW)
    assert (verdict.kind, verdict.outdated) == ("stale", "existing")


def test_an_expired_memory_on_the_same_subject_is_stale_even_without_a_value_difference() -> None:
    old = Memo("Support rota", "Support rota: Anna covers weekdays.", NOW - timedelta(days=30), NOW - timedelta(days=1))
    new = Memo("Support rota", "Support rota: Anna covers weekdays and Ben weekends.", NOW)
    assert classify(old, new, similarity=0.9, now=NOW).kind == "stale"


def test_very_similar_text_with_different_values_is_never_a_duplicate() -> None:
    old = Memo("Default region", "New services are deployed to eu-west-1 by default.", NOW - timedelta(days=5))
    new = Memo("Default region", "New services are deployed to eu-central-1 by default.", NOW)
    assert classify(old, new, similarity=0.99, now=NOW).kind == "contradiction"


def test_values_are_read_with_their_units() -> None:
    statement = analyse_statement("The Q3 budget is $50,000 and ships on March 3 at 10am, Python 3.12, 250 requests per minute.")
    assert statement.values["money"] == {"50000"}
    assert statement.values["date"] == {"03-03"}
    assert statement.values["time"] == {"10:00"}
    assert statement.values["version:python"] == {"3.12"}
    # A rate is read per unit of time, however it is spelled: "250 requests per minute", "250/min".
    assert statement.values["number:per-minute"] == {"250"}
    assert analyse_statement("The limit is 250/min.").values["number:per-minute"] == {"250"}
    assert statement.periods == {"q3"}


# -- explicit replacements ("moved from X to Y") ------------------------------------------------
ZENDESK = Memo(
    "Support tooling: where tickets live",
    "All customer tickets live in Zendesk. Email to support@ and the "
    "web form both create tickets; phone calls are logged by hand.",
    NOW - timedelta(days=530),
    tags=("support", "zendesk", "tickets"),
    category="note",
)
FRESHDESK = Memo(
    "Support has moved from Zendesk to Freshdesk",
    "We're live on Freshdesk as of this morning. Zendesk is read-only until end of month, then archived.",
    NOW - timedelta(days=80),
    tags=("support", "freshdesk"),
    category="decision",
)


def test_a_newer_memory_that_moved_away_from_what_the_older_is_about_makes_it_stale() -> None:
    verdict = classify(ZENDESK, FRESHDESK, similarity=0.58, now=NOW)

    assert (verdict.kind, verdict.outdated) == ("stale", "existing")
    assert "moved from Zendesk to Freshdesk" in verdict.explanation
    # Whichever was stored first, the older-dated side is the outdated one.
    assert classify(FRESHDESK, ZENDESK, similarity=0.58, now=NOW).outdated == "new"


def test_moving_something_else_away_from_a_tool_does_not_make_the_tools_page_stale() -> None:
    database = Memo(
        "Fleet Console database: current setup",
        "Fleet Console's database is the pg-fc Patroni cluster running Postgres 13.8. PgBouncer in transaction mode in front.",
        NOW - timedelta(days=200),
        tags=("postgres", "fleet-console", "database"),
        category="note",
    )
    sessions = Memo(
        "PLAT-1423: move Fleet Console sessions from Postgres to Redis",
        "Moves Django session storage for Fleet Console from the pg-fc database to the Redis 7 cluster.",
        NOW - timedelta(days=20),
        category="note",
    )

    assert classify(database, sessions, similarity=0.6, now=NOW).kind is None


def test_moving_one_meeting_off_a_tool_leaves_the_tools_guide_but_not_that_meetings_page() -> None:
    moved = Memo(
        "Weekly sync moves to Meet",
        "We moved the weekly sync meeting from Zoom to Google Meet.",
        NOW - timedelta(days=3),
        category="note",
    )
    guide = Memo(
        "Zoom setup guide",
        "Install the Zoom client, sign in with Okta SSO and test your audio before your first meeting.",
        NOW - timedelta(days=400),
        tags=("zoom", "tools"),
        category="note",
    )
    sync_page = Memo(
        "Weekly sync: Zoom link and agenda",
        "The weekly sync meeting is on Zoom every Monday; the agenda lives in the team doc.",
        NOW - timedelta(days=200),
        tags=("zoom",),
        category="note",
    )

    assert classify(guide, moved, similarity=0.5, now=NOW).kind is None
    assert classify(sync_page, moved, similarity=0.5, now=NOW).kind == "stale"


def test_records_of_events_and_the_announcement_itself_do_not_go_stale() -> None:
    incident = Memo(
        "Zendesk outage: tickets delayed",
        "Tickets were delayed for two hours because Zendesk had an outage.",
        NOW - timedelta(days=300),
        tags=("zendesk", "support"),
        category="incident",
    )
    plan = Memo(
        "Zendesk to Freshdesk migration plan",
        "Support will switch to Freshdesk in Q3; the Zendesk history is archived to Drive.",
        NOW - timedelta(days=120),
        tags=("zendesk", "support"),
        category="note",
    )

    assert classify(incident, FRESHDESK, similarity=0.6, now=NOW).kind is None
    assert classify(plan, FRESHDESK, similarity=0.6, now=NOW).kind is None


def test_a_period_named_on_one_side_only_is_not_a_different_choice() -> None:
    meeting = Memo(
        "Q3 product planning meeting",
        "Multi-site view and self-service zones are the two commitments for Fleet Console.",
        NOW - timedelta(days=130),
        category="note",
    )
    roadmap = Memo(
        "Roadmap note: dark mode deferred",
        "Q3 commitments for Fleet Console instead: multi-site view and self-service zones.",
        NOW - timedelta(days=125),
        category="decision",
    )

    assert classify(meeting, roadmap, similarity=0.8, now=NOW).kind is None


def test_a_record_of_an_event_is_never_made_stale() -> None:
    meeting = Memo("CI provider", "Our CI runs on CircleCI for every repository.", NOW - timedelta(days=90), category="meeting")
    switched = Memo(
        "CI provider", "Our CI runs on GitHub Actions for every repository; we switched from CircleCI.", NOW, category="decision"
    )

    assert classify(meeting, switched, similarity=0.9, now=NOW).kind is None
    note = Memo(meeting.title, meeting.content, meeting.valid_from, category="note")
    assert classify(note, switched, similarity=0.9, now=NOW).kind == "stale"

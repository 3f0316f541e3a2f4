"""Decision extraction: the cue heuristic on real-looking meetings, the LLM path, and grounding."""

from __future__ import annotations

from typing import Any

import pytest
from meeting_transcripts import PLATFORM_SUMMARY, PLATFORM_SYNC

from memories.analysis.decisions import Proposal, ground, heuristic_proposals
from memories.llm import LLMUnavailable
from memories.llm.fake import ScriptedLLM
from memories.services import briefs


def grounded(result: dict[str, Any], summary: str = "", transcript: str = "") -> None:
    texts = {"summary": summary, "transcript": transcript}
    for decision in result["decisions"]:
        assert texts[decision["source"]][decision["start"] : decision["end"]] == decision["quote"], decision


def test_the_heuristic_finds_the_decisions_of_a_real_looking_transcript_and_nothing_else(settings: Any) -> None:
    settings.CORTEX_LLM = "none"
    result = briefs.extract_decisions(PLATFORM_SUMMARY, PLATFORM_SYNC)
    assert result["extractor"] == "heuristic" and result["dropped"] == 0
    texts = [d["text"] for d in result["decisions"]]
    assert texts == [
        "We decided to drop support for API v1 at the end of the quarter.",
        "We're going with Stripe for the marketplace payments.",
        "Tom to resize the staging cluster by Thursday.",
        "We agreed to move on-call to weekly rotations starting next Monday.",
    ]
    assert [d["source"] for d in result["decisions"]] == ["summary", "transcript", "transcript", "transcript"]
    # Speaker labels and timestamps are not part of the quote; the quote is the input's own text.
    assert result["decisions"][1]["quote"] == "Okay, so we're going with Stripe for the marketplace payments."
    grounded(result, PLATFORM_SUMMARY, PLATFORM_SYNC)
    joined = " ".join(texts)
    for not_decided in ("beta date", "quarantine", "Agreed.", "propose"):
        assert not_decided not in joined


def test_questions_open_items_and_negated_decisions_are_not_decisions() -> None:
    text = (
        "Did we agree on the launch date? We have not decided on the region. No decision on hiring yet. "
        "It is TBD whether we approve the budget. We decided to keep the Friday demo."
    )
    assert [p.text for p in heuristic_proposals(text, "")] == ["We decided to keep the Friday demo."]


def test_grounding_drops_invented_decisions_and_counts_them() -> None:
    summary = "We decided to freeze the API until June. Sales wants more seats."
    proposals = [
        Proposal("Freeze the API until June.", "We decided to freeze the API until June.", "summary"),
        Proposal("Hire two more SREs.", "We agreed to hire two more SREs.", "summary"),  # quote not in the input
        Proposal("Migrate to Kubernetes.", "Sales wants more seats.", "summary"),  # real quote, unsupported claim
        Proposal("Freeze the API.", "freeze", "summary"),  # too short to ground anything
    ]
    result = ground(proposals, summary=summary, transcript="")
    assert [d.text for d in result.decisions] == ["Freeze the API until June."]
    assert result.dropped == 3
    (decision,) = result.decisions
    assert summary[decision.start : decision.end] == decision.quote


def test_a_quote_that_differs_only_in_whitespace_or_apostrophes_is_located_and_returned_verbatim() -> None:
    transcript = "Priya: We're going with\n  Stripe   for payments."
    result = ground(
        [Proposal("Use Stripe for payments.", "We’re going with Stripe for payments.", "transcript")],
        summary="",
        transcript=transcript,
    )
    (decision,) = result.decisions
    assert decision.quote == "We're going with\n  Stripe   for payments."
    assert transcript[decision.start : decision.end] == decision.quote


def test_a_quote_attributed_to_the_wrong_source_is_found_in_the_other() -> None:
    result = ground(
        [Proposal("Ship on Friday.", "We will ship on Friday.", "summary")],
        summary="Notes.",
        transcript="Bo: We will ship on Friday.",
    )
    assert result.decisions[0].source == "transcript"


@pytest.fixture
def scripted(monkeypatch: Any) -> Any:
    def install(*responses: Any) -> ScriptedLLM:
        llm = ScriptedLLM(list(responses), name="openai", model="gpt-test")
        monkeypatch.setattr(briefs, "get_llm", lambda: llm)
        return llm

    return install


def test_the_llm_path_keeps_grounded_decisions_names_the_model_and_counts_the_invented(scripted: Any) -> None:
    llm = scripted(
        {
            "decisions": [
                {
                    "text": "Use Stripe for marketplace payments.",
                    "quote": "we're going with Stripe for the marketplace payments",
                    "source": "transcript",
                },
                {"text": "Launch the beta on May 5.", "quote": "We will launch the beta on May 5.", "source": "transcript"},
                {
                    "text": "Drop API v1 at quarter end.",
                    "quote": "We decided to drop support for API v1 at the end of the quarter.",
                    "source": "summary",
                },
            ]
        }
    )
    result = briefs.extract_decisions(PLATFORM_SUMMARY, PLATFORM_SYNC)
    assert result["extractor"] == "openai:gpt-test"
    assert [d["text"] for d in result["decisions"]] == ["Use Stripe for marketplace payments.", "Drop API v1 at quarter end."]
    assert result["dropped"] == 1
    assert "fallback" not in result
    grounded(result, PLATFORM_SUMMARY, PLATFORM_SYNC)
    assert "<transcript>" in llm.calls[0] and "<summary>" in llm.calls[0]


@pytest.mark.parametrize(
    "failure",
    [LLMUnavailable("openai timed out", retryable=True), "Sure! Here are the decisions: 1. Stripe", '{"decisions": "Stripe"}'],
)
def test_an_llm_that_times_out_or_returns_junk_falls_back_to_the_heuristic_and_says_so(scripted: Any, failure: Any) -> None:
    scripted(failure)
    result = briefs.extract_decisions(PLATFORM_SUMMARY, PLATFORM_SYNC)
    assert result["extractor"] == "heuristic"
    assert result["fallback"]["from"] == "openai:gpt-test" and result["fallback"]["reason"]
    assert len(result["decisions"]) == 4
    grounded(result, PLATFORM_SUMMARY, PLATFORM_SYNC)


def test_a_long_transcript_is_sent_to_the_llm_in_windows_and_grounded_against_the_whole(scripted: Any, monkeypatch: Any) -> None:
    monkeypatch.setattr(briefs, "LLM_WINDOW_CHARS", 400)
    transcript = PLATFORM_SYNC * 2
    pieces = len(briefs.windows(transcript, 400))
    llm = scripted(
        *(
            [{"decisions": []}] * (pieces - 1)
            + [
                {
                    "decisions": [
                        {
                            "text": "Weekly on-call rotations.",
                            "quote": "We agreed to move on-call to weekly rotations starting next Monday.",
                            "source": "transcript",
                        }
                    ]
                }
            ]
        )
    )
    result = briefs.extract_decisions("", transcript)
    assert len(llm.calls) == pieces > 1
    assert [d["text"] for d in result["decisions"]] == ["Weekly on-call rotations."]
    grounded(result, "", transcript)

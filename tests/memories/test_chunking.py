"""Chunking: one chunk up to 1,400 characters, paragraph-aware ~1,200-character chunks with ~150 overlap beyond."""

from __future__ import annotations

import itertools
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memories.chunking import OVERLAP, SINGLE_CHUNK_MAX, TARGET, chunk_text


def _paragraphs(seed: int, count: int, words: tuple[int, int] = (20, 120)) -> str:
    rng = random.Random(seed)
    vocabulary = [
        "rollout",
        "canary",
        "latency",
        "budget",
        "incident",
        "review",
        "policy",
        "vendor",
        "laptop",
        "expense",
        "travel",
        "approve",
        "deploy",
    ]
    paragraphs = []
    for _ in range(count):
        sentence_words = [rng.choice(vocabulary) + ("." if rng.random() < 0.12 else "") for _ in range(rng.randint(*words))]
        paragraphs.append(" ".join(sentence_words).capitalize() + ".")
    return "\n\n".join(paragraphs)


def test_empty_and_blank_content_have_no_chunks() -> None:
    assert chunk_text("") == []
    assert chunk_text(" \n\t\n ") == []


def test_short_content_is_one_chunk_without_surrounding_whitespace() -> None:
    chunks = chunk_text("\n  Ship on Fridays is forbidden.  \n")
    assert len(chunks) == 1
    assert chunks[0].text == "Ship on Fridays is forbidden."
    assert (chunks[0].start, chunks[0].end) == (3, 32)


def test_exactly_the_single_chunk_limit_stays_whole_and_one_more_splits() -> None:
    text = "a" + "b " * 2000
    at_limit = text[:SINGLE_CHUNK_MAX]
    assert len(chunk_text(at_limit)) == 1
    over = text[: SINGLE_CHUNK_MAX + 2]
    assert len(over.strip()) > SINGLE_CHUNK_MAX
    assert len(chunk_text(over)) >= 2


def test_long_content_splits_on_paragraph_boundaries_with_overlap() -> None:
    text = _paragraphs(7, 25)
    chunks = chunk_text(text)
    assert len(chunks) > 3
    for chunk in chunks:
        assert text[chunk.start : chunk.end] == chunk.text
        assert len(chunk.text) <= TARGET + OVERLAP
    for before, after in itertools.pairwise(chunks):
        overlap = before.end - after.start
        assert 0 < overlap <= OVERLAP + 5
    paragraph_starts = {0} | {i + 2 for i in range(len(text)) if text.startswith("\n\n", i)}
    starts_on_paragraph = sum(1 for c in chunks if c.start in paragraph_starts)
    assert starts_on_paragraph >= 1


def test_one_huge_paragraph_without_punctuation_still_splits_at_spaces() -> None:
    text = " ".join(f"word{i}" for i in range(1500))
    chunks = chunk_text(text)
    assert len(chunks) > 5
    for chunk in chunks:
        assert not chunk.text.startswith(" ") and not chunk.text.endswith(" ")
        assert len(chunk.text) <= TARGET + OVERLAP


def test_text_without_any_spaces_is_cut_hard_and_fully_covered() -> None:
    text = "x" * 5000
    chunks = chunk_text(text)
    assert "".join(c.text for c in chunks) == text


def test_fact_buried_deep_in_a_document_is_inside_some_chunk_whole() -> None:
    text = _paragraphs(3, 12) + "\n\nThe rack in Building 7 uses breaker CB-4471 for the dock chargers.\n\n" + _paragraphs(4, 12)
    fact = "The rack in Building 7 uses breaker CB-4471 for the dock chargers."
    assert any(fact in c.text for c in chunk_text(text))


def test_unicode_content_spans_are_exact() -> None:
    text = "\n\n".join(["Überprüfung der Richtlinie — 日本語のテキスト 🚀 " * 20] * 6)
    for chunk in chunk_text(text):
        assert text[chunk.start : chunk.end] == chunk.text


@settings(max_examples=60, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("abc de.\n")), min_size=0, max_size=6000))
def test_every_non_space_character_is_covered_and_indexes_are_consecutive(text: str) -> None:
    chunks = chunk_text(text)
    covered: set[int] = set()
    for position, chunk in enumerate(chunks):
        assert chunk.index == position
        assert text[chunk.start : chunk.end] == chunk.text
        covered.update(range(chunk.start, chunk.end))
    assert {i for i, ch in enumerate(text) if not ch.isspace()} <= covered
    assert all(b.start > a.start for a, b in itertools.pairwise(chunks))


@pytest.mark.parametrize("length", [1401, 2500, 6000, 20000])
def test_chunk_sizes_stay_near_the_target(length: int) -> None:
    text = _paragraphs(length, 200)[:length]
    chunks = chunk_text(text)
    assert all(len(c.text) <= TARGET + OVERLAP for c in chunks)
    assert sum(1 for c in chunks if len(c.text) >= TARGET // 2) >= len(chunks) - 1

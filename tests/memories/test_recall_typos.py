"""Typo tolerance for short keyword queries: one edit on words of at least 5 letters, against the
words of what the reader may see (the term counts), never at the cost of exact matches."""

from __future__ import annotations

from typing import Any

import pytest
from support import principal, remember

from memories.models import TermCount
from memories.retrieval.terms import one_edit_variants
from memories.selectors.recall import RecallQuery, recall


def _titles(member: Any, query: str) -> list[str]:
    return [h.memory.title for h in recall(principal(member), RecallQuery(query, limit=5), audit=False).hits]


@pytest.mark.parametrize(
    ("typo", "word", "near"),
    [
        ("discont", "discount", True),
        ("discount", "discont", True),
        ("parkng", "parking", True),
        ("recieve", "receive", True),
        ("vaction", "vacation", True),
        ("policy", "polity", True),
        ("discont", "dismount", False),
        ("abc", "abcde", False),
    ],
)
def test_one_edit_variants(typo: str, word: str, near: bool) -> None:
    assert (word in one_edit_variants(typo)) is near
    assert typo not in one_edit_variants(typo)


@pytest.fixture
def notes(acme: dict[str, Any]) -> None:
    remember(acme["exec"], "Partners get 15% off annual plans.", title="Discount policy", scope="engineering")
    remember(
        acme["exec"],
        "The dock API returned 429s for an hour after a rate-limit change.",
        title="Incident report",
        scope="engineering",
    )
    remember(acme["exec"], "Visitor parking is on level 2 of the north garage.", title="Parking", scope="engineering")


@pytest.mark.django_db
def test_every_chunk_word_is_counted(acme: dict[str, Any], notes: None) -> None:
    words = set(TermCount.objects.filter(organization=acme["org"]).values_list("lexeme", flat=True))
    assert {"discount", "partner", "garag", "park"} <= words


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("query", "title"), [("discont", "Discount policy"), ("parkng", "Parking"), ("discont policy", "Discount policy")]
)
def test_a_one_edit_typo_finds_the_word_meant(acme: dict[str, Any], notes: None, query: str, title: str) -> None:
    assert _titles(acme["employee"], query)[0] == title
    found = recall(principal(acme["employee"]), RecallQuery(query, limit=5), audit=False)
    # Found through the corrected word (a keyword match), not only by a vague vector likeness.
    assert found.hits[0].lexical > 0 and found.confident


@pytest.mark.django_db
def test_an_exact_word_is_never_corrected_away(acme: dict[str, Any], notes: None) -> None:
    # "dismount" exists, one edit from nothing in the query; "discount" exists too: each answers itself.
    remember(acme["exec"], "Dismount the lidar before shipping a robot.", title="Dismount lidar", scope="engineering")
    assert _titles(acme["employee"], "dismount")[0] == "Dismount lidar"
    assert _titles(acme["employee"], "discount")[0] == "Discount policy"


@pytest.mark.django_db
def test_a_word_only_a_hidden_memory_holds_is_no_correction(acme: dict[str, Any], notes: None) -> None:
    before = _titles(acme["contractor"], "acquisiton")
    remember(
        acme["exec"], "Acquisition of Initech closes in May.", title="Acquisition", scope="engineering", clearance_min="Executive"
    )
    assert _titles(acme["contractor"], "acquisiton") == before
    assert _titles(acme["exec"], "acquisiton")[0] == "Acquisition"

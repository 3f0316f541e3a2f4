"""Query normalisation for the lexical side: which terms to look for, and how rare each is."""

from __future__ import annotations

import math
import re
import unicodedata

MAX_TERMS = 24

# Identifiers (PLAT-1423, E_DOCK_TIMEOUT, v2.3.1, acme/fleet-console) stay whole; other text
# splits into words. Stop words and stemming are left to PostgreSQL's english configuration.
_TOKEN = re.compile(r"[A-Za-z0-9]+(?:[-_./:][A-Za-z0-9]+)*")


def normalise_query(query: str) -> str:
    text = unicodedata.normalize("NFKC", query)
    return " ".join(text.split())


def query_terms(query: str) -> list[str]:
    """Distinct terms in order of appearance (case-insensitive), at most MAX_TERMS."""
    seen: dict[str, str] = {}
    for match in _TOKEN.finditer(normalise_query(query)):
        token = match.group(0)
        key = token.lower()
        if key not in seen:
            seen[key] = token
        if len(seen) >= MAX_TERMS:
            break
    return list(seen.values())


def is_identifier(term: str) -> bool:
    """Looks like a ticket id, error code, version or path rather than a word."""
    has_digit = any(ch.isdigit() for ch in term)
    has_alpha = any(ch.isalpha() for ch in term)
    return (has_digit and has_alpha) or bool(re.search(r"[-_./:]", term)) or (term.isupper() and len(term) > 1)


def idf(document_frequency: int, total: int) -> float:
    """Inverse document frequency (BM25's form, floored so common terms still count a little)."""
    return max(0.05, math.log(1 + (total - document_frequency + 0.5) / (document_frequency + 0.5)))


def one_edit_variants(word: str) -> set[str]:
    """Every spelling one deletion, adjacent swap, substitution or insertion (a–z) away from `word`."""
    word = word.lower()
    letters = "abcdefghijklmnopqrstuvwxyz"
    splits = [(word[:i], word[i:]) for i in range(len(word) + 1)]
    deletes = {a + b[1:] for a, b in splits if b}
    swaps = {a + b[1] + b[0] + b[2:] for a, b in splits if len(b) > 1}
    substitutions = {a + c + b[1:] for a, b in splits if b for c in letters}
    inserts = {a + c + b for a, b in splits for c in letters}
    return (deletes | swaps | substitutions | inserts) - {word}


def typo_candidate(term: str, min_letters: int = 5) -> bool:
    """A word typo tolerance may correct: only letters, at least `min_letters` of them."""
    return term.isalpha() and len(term) >= min_letters and not is_identifier(term)

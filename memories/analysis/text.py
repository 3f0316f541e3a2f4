"""Sentences with their offsets, word tokens, and a light normaliser shared by the heuristics."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

# A sentence ends at . ! ? (or a line break) followed by whitespace; decimals (3.11), versions
# (v2.0), abbreviations followed by lowercase (e.g. this) and URLs do not end one.
_BOUNDARY = re.compile(
    r"(?<=[.!?])[\"')\]]*\s+(?=[\"'(\[]?[A-Z0-9@#*\-•])|\n\s*\n|\n(?=\s*(?:[-*•]|\d+[.)]|\[?\d{1,2}:\d{2}|[A-Z][\w .'-]{0,40}:))"
)
_ABBREVIATIONS = ("e.g.", "i.e.", "etc.", "vs.", "approx.", "mr.", "ms.", "mrs.", "dr.", "no.", "st.", "inc.", "ltd.")


@dataclass(frozen=True)
class Span:
    text: str
    start: int
    end: int


def sentences(text: str) -> list[Span]:
    """Non-empty sentences of `text`, each with `text[start:end] == span.text` (stripped)."""
    spans: list[Span] = []
    cursor = 0
    for match in _BOUNDARY.finditer(text):
        piece = text[cursor : match.start()]
        if piece.rstrip().lower().endswith(_ABBREVIATIONS):
            continue
        spans.extend(_split_lines(text, cursor, match.start()))
        cursor = match.end()
    spans.extend(_split_lines(text, cursor, len(text)))
    return spans


def _split_lines(text: str, start: int, end: int) -> Iterator[Span]:
    # Single line breaks inside a block end a sentence when the next line looks like a new item.
    position = start
    for line in text[start:end].split("\n"):
        line_start = position
        position += len(line) + 1
        stripped = line.strip()
        if not stripped:
            continue
        offset = line_start + (len(line) - len(line.lstrip()))
        yield Span(stripped, offset, offset + len(stripped))


_WORD = re.compile(r"[A-Za-z][A-Za-z0-9'’_+#-]*[A-Za-z0-9+#]|[A-Za-z]")

STOPWORDS = frozenset(
    [
        "a",
        "an",
        "the",
        "and",
        "or",
        "but",
        "if",
        "then",
        "so",
        "of",
        "to",
        "in",
        "on",
        "at",
        "by",
        "for",
        "with",
        "from",
        "into",
        "onto",
        "over",
        "under",
        "about",
        "as",
        "is",
        "are",
        "was",
        "were",
        "be",
        "been",
        "being",
        "am",
        "do",
        "does",
        "did",
        "has",
        "have",
        "had",
        "having",
        "it",
        "its",
        "this",
        "that",
        "these",
        "those",
        "there",
        "here",
        "we",
        "our",
        "us",
        "you",
        "your",
        "they",
        "their",
        "them",
        "i",
        "me",
        "my",
        "he",
        "she",
        "his",
        "her",
        "him",
        "will",
        "would",
        "shall",
        "should",
        "can",
        "could",
        "may",
        "might",
        "must",
        "just",
        "also",
        "too",
        "very",
        "really",
        "please",
        "which",
        "who",
        "whom",
        "whose",
        "what",
        "when",
        "where",
        "why",
        "how",
        "than",
        "per",
        "via",
        "out",
        "up",
        "down",
        "off",
        "let",
        "lets",
        "let's",
        "one",
        "each",
        "every",
        "any",
        "some",
        "such",
        "both",
        "either",
        "same",
        "other",
        "another",
        "own",
        "only",
        "more",
        "most",
        "less",
        "least",
        "much",
        "many",
        "few",
        "again",
        "further",
        "once",
        "after",
        "before",
        "until",
        "within",
        "since",
        "during",
    ]
)

# Words that carry no subject of their own in team chatter.
FILLER = frozenset(
    [
        "reminder",
        "heads",
        "fyi",
        "note",
        "notes",
        "quick",
        "update",
        "updated",
        "hi",
        "hello",
        "team",
        "folks",
        "everyone",
        "everybody",
        "okay",
        "ok",
        "so",
        "well",
        "basically",
        "currently",
        "today",
        "now",
        "new",
        "please",
        "thanks",
        "thank",
        "going",
        "forward",
        "anymore",
        "still",
    ]
)

SYNONYMS = {
    "prod": "production",
    "deployment": "deploy",
    "deployments": "deploy",
    "deploys": "deploy",
    "deployed": "deploy",
    "deploying": "deploy",
    "req": "request",
    "reqs": "request",
    "min": "minute",
    "mins": "minute",
    "sec": "second",
    "secs": "second",
    "hr": "hour",
    "hrs": "hour",
    "db": "database",
    "repo": "repository",
    "repos": "repository",
    "k8s": "kubernetes",
    "infra": "infrastructure",
    "env": "environment",
    "config": "configuration",
    "docs": "documentation",
    "need": "require",
    "needs": "require",
    "needed": "require",
    "requires": "require",
    "required": "require",
    "mandatory": "require",
    "pr": "pull-request",
    "prs": "pull-request",
    "approvals": "approval",
    "approved": "approve",
    "submitted": "submit",
    "submits": "submit",
    "retried": "retry",
    "retries": "retry",
    "owned": "own",
    "owns": "own",
    "owner": "own",
    "reported": "report",
    "reports": "report",
    "stores": "store",
    "stored": "store",
}


def stem(word: str) -> str:
    """A deliberately small stemmer: plural and -ed/-ing forms fold together, nothing clever."""
    word = SYNONYMS.get(word, word)
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 5 and word.endswith("ing"):
        return word[:-3]
    if len(word) > 4 and word.endswith("ed") and not word.endswith("eed"):
        return word[:-2] if not word.endswith("ied") else word[:-3] + "y"
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


def words(text: str) -> list[str]:
    """Lowercased word tokens (letters first; numbers are values, handled elsewhere)."""
    return [w.lower().replace("’", "'") for w in _WORD.findall(text)]


def content_words(text: str) -> set[str]:
    """Stemmed words that can carry a subject: stop words and filler dropped."""
    return {stem(w) for w in words(text) if w not in STOPWORDS and w not in FILLER and len(w) > 1}


def jaccard(a: set[str], b: set[str]) -> float:
    if not a and not b:
        return 1.0
    return len(a & b) / len(a | b)

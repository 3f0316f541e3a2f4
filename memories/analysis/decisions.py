"""Decisions in meeting text: a cue-based heuristic, the LLM prompt, and the grounding check.

Whatever proposes a decision — the heuristic or a model — only *grounded* decisions leave
this module: the quote must occur verbatim in the input (whitespace and apostrophe style
aside; the quote returned is the input's own text at `start..end`), and the decision's text
must be supported by its quote. Everything else is dropped and counted.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any

from memories.analysis.text import Span, content_words, sentences

SOURCES = ("summary", "transcript")
MAX_DECISIONS = 50
MAX_QUOTE_CHARS = 600
MIN_QUOTE_CHARS = 8
MIN_SUPPORT = 1 / 3

_CUES = re.compile(
    r"\b(?:we(?:'ve| have)? decided|decided (?:to|that|on)|decision(?: is|:)|the decision was|agreed|approved|sign(?:ed)?[- ]off|"
    r"going (?:forward )?with|go with|we(?:'ll| will) go with|settled "
    r"on|we chose|chose to|will ship|ship(?:s|ping)? (?:on|in|by|it)|"
    r"action items?\b|\bAI:|to-?do:|owner:|committed to|green-?lit|greenlit|final call|conclusion:|resolved(?: to|:)|"
    r"we(?:'ll| will) (?:ship|use|adopt|move|switch|migrate|launch|release|drop|deprecate|"
    r"hire|freeze|keep|stop|start|require|roll out))",
    re.IGNORECASE,
)
_NOT_A_DECISION = re.compile(
    r"\b(?:not|n't|never|no)\s+(?:yet\s+)?(?:been\s+)?(?:decided|agreed|approved|a "
    r"decision)|\bundecided\b|\bstill (?:debating|discussing)\b|"
    r"\bopen question\b|\btbd\b|\bto be decided\b|\bpending (?:a )?decision\b|\bdisagreed\b|\bno decision\b|\bif we decide\b",
    re.IGNORECASE,
)
# "[00:12:03] Alice Smith:", "Alice (PM):", "- ", "* ", "1. ", "Decision:" — kept out of the quote.
_LABEL_WORDS = r"(?:decisions?|action items?|ai|to-?do|conclusion|resolved|outcome|approved|agreed|decided|next steps?|owner)"
_PREFIX = re.compile(
    rf"^(?:\[?\(?\d{{1,2}}:\d{{2}}(?::\d{{2}})?\)?\]?\s*[-–]?\s*)?(?:(?!(?i:{_LABEL_WORDS})\s*:)[A-Z][\w.'-]*(?: "
    rf"[A-Z][\w.'-]*){{0,3}}(?: \([^)]{{1,30}}\))?:\s+)?(?:[-*•]\s+|\d+[.)]\s+)?"
)
_DISCOURSE = re.compile(
    r"^(?:(?:okay|ok|so|alright|all right|right|yeah|yes|well|great|cool|fine|good|then|and)[,.!]?\s+)+", re.IGNORECASE
)
_LABEL = re.compile(r"^(?:decision|decisions|action items?|ai|to-?do|conclusion|resolved|outcome)\s*[:\-–]\s*", re.IGNORECASE)


@dataclass(frozen=True)
class Decision:
    text: str
    quote: str
    source: str
    start: int
    end: int

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Proposal:
    """A decision as proposed by an extractor, before grounding."""

    text: str
    quote: str
    source: str


def _strip_prefix(span: Span) -> Span:
    match = _PREFIX.match(span.text)
    cut = match.end() if match else 0
    if cut >= len(span.text):
        return span
    return Span(span.text[cut:], span.start + cut, span.end)


def _clean(quote: str) -> str:
    text = _DISCOURSE.sub("", _LABEL.sub("", quote.strip())).strip(" -–—*•")
    if not text:
        return quote.strip()
    text = text[0].upper() + text[1:]
    return text if text[-1] in ".!?" else text + "."


def heuristic_proposals(summary: str, transcript: str) -> list[Proposal]:
    """Decision sentences by cue ("we decided", "agreed", "approved", "going with", "will ship", "action item", …)."""
    found: list[Proposal] = []
    for source, text in (("summary", summary), ("transcript", transcript)):
        for span in sentences(text or ""):
            span = _strip_prefix(span)
            quote = span.text
            if len(quote) < MIN_QUOTE_CHARS or len(quote) > MAX_QUOTE_CHARS or quote.rstrip().endswith("?"):
                continue
            if not _CUES.search(quote) or _NOT_A_DECISION.search(quote):
                continue
            if len(re.findall(r"\w+", _LABEL.sub("", quote))) < 4:
                continue  # "Agreed." on its own says nothing about what was agreed
            found.append(Proposal(text=_clean(quote), quote=quote, source=source))
    return found


def _locate(quote: str, text: str) -> tuple[int, int] | None:
    """Where `quote` occurs in `text`, tolerating only whitespace and apostrophe differences."""
    if not quote or not text:
        return None
    exact = text.find(quote)
    if exact >= 0:
        return exact, exact + len(quote)
    parts = [re.escape(p) for p in quote.split()]
    if not parts:
        return None
    pattern = r"\s+".join(parts).replace("'", "['’]").replace("’", "['’]")
    match = re.search(pattern, text)
    return (match.start(), match.end()) if match else None


def _supported(text: str, quote: str) -> bool:
    claimed = content_words(text)
    if not claimed:
        return False
    return len(claimed & content_words(quote)) / len(claimed) >= MIN_SUPPORT


@dataclass(frozen=True)
class Grounded:
    decisions: list[Decision]
    dropped: int


def ground(proposals: Iterable[Proposal], *, summary: str, transcript: str) -> Grounded:
    """Keep proposals whose quote is in the input and supports their text; dedupe; count the rest."""
    texts = {"summary": summary or "", "transcript": transcript or ""}
    kept: list[Decision] = []
    seen: set[str] = set()
    dropped = 0
    for proposal in proposals:
        quote = (proposal.quote or "").strip()
        order = [proposal.source] + [s for s in SOURCES if s != proposal.source] if proposal.source in texts else list(SOURCES)
        place = None
        source = ""
        if MIN_QUOTE_CHARS <= len(quote) <= MAX_QUOTE_CHARS * 2:
            for source in order:
                place = _locate(quote, texts[source])
                if place is not None:
                    break
        text = " ".join((proposal.text or "").split())
        if place is None or not _supported(text, quote):
            dropped += 1
            continue
        start, end = place
        key = " ".join(re.findall(r"\w+", text.lower()))
        where = f"{source}:{start}:{end}"
        if key in seen or where in seen:
            continue
        seen.update({key, where})
        kept.append(Decision(text=text[:1000], quote=texts[source][start:end], source=source, start=start, end=end))
    return Grounded(kept[:MAX_DECISIONS], dropped)


# -- the LLM prompt ---------------------------------------------------------------------------------
LLM_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["decisions"],
    "properties": {
        "decisions": {
            "type": "array",
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["text", "quote", "source"],
                "properties": {
                    "text": {"type": "string", "description": "The decision in one plain sentence."},
                    "quote": {"type": "string", "description": "The exact words from the input that state it, copied verbatim."},
                    "source": {"type": "string", "enum": list(SOURCES)},
                },
            },
        }
    },
}

LLM_SYSTEM = (
    "You extract the decisions and action items a meeting actually reached. Include only what was decided, agreed, "
    "approved or assigned — not proposals, open questions or things still being discussed. For each, copy the exact "
    "supporting words from the input as `quote` (verbatim, one sentence or less) and say whether they come from the "
    "summary or the transcript. Never invent a decision; return an empty list when there is none."
)


def llm_prompt(summary: str, transcript: str) -> str:
    parts = []
    if summary.strip():
        parts.append(f"<summary>\n{summary}\n</summary>")
    if transcript.strip():
        parts.append(f"<transcript>\n{transcript}\n</transcript>")
    return "\n\n".join(parts) + "\n\nList the decisions with their verbatim quotes."


def llm_proposals(data: Any) -> list[Proposal]:
    items = data.get("decisions", []) if isinstance(data, dict) else []
    return [
        Proposal(text=str(i.get("text", "")), quote=str(i.get("quote", "")), source=str(i.get("source", "")))
        for i in items
        if isinstance(i, dict)
    ]


def windows(text: str, size: int) -> list[tuple[int, str]]:
    """`text` cut at sentence boundaries into pieces of at most ~`size` characters, with their offsets."""
    if len(text) <= size:
        return [(0, text)] if text.strip() else []
    pieces: list[tuple[int, str]] = []
    start = 0
    for span in sentences(text):
        if span.end - start > size and span.start > start:
            pieces.append((start, text[start : span.start]))
            start = span.start
    pieces.append((start, text[start:]))
    return pieces

"""The deterministic conflict classifier: structure first, similarity never decides alone.

Two memories are compared statement by statement. A pair of statements is *aligned* when
they say something about the same subject: their subject words (content words without
values, names, polarity and change words) overlap strongly and neither side carries a
qualifier the other lacks (free vs enterprise tier, staging vs production, Q1 vs Q2). Only
aligned statements can conflict, and only through their values:

- numbers with their unit, money, dates, weekdays, times, versions;
- yes/no (not, no longer, allowed/forbidden, enabled/disabled, required/optional);
- named choices (Stripe vs Adyen, PostgreSQL vs MySQL, Dana vs Luis).

Documents are read with their structure (see `_structured_spans`): headings and label lines
("Attendees: …", "Date: …", "Owner: …") are not statements, a transcript is not compared line by
line (its brief's summary and decisions are), a Markdown table row becomes one statement per cell
("Tier free: Limit 60/min"), a heading's qualifiers (## Contractors, ## Free tier) and a title's
period (Price list 2026) qualify the statements under them, and rates compare across spellings
("60/min" and "100 requests per minute" are both per minute).

Verdicts, in order:

- **stale**: same subject and the older memory's `valid_until` has passed, or aligned
  statements conflict and the newer one says it replaces the old (now, no longer, moved
  from, replaces, deprecated, was …), or the newer one says it moved *from* exactly what the
  older one's title or tags name ("Support moved from Zendesk to Freshdesk" against "Support
  tooling", tagged zendesk) — never for records of events (incidents, meetings, PRs): those
  never go stale;
- **contradiction**: aligned statements conflict and nothing says one replaced the other;
- **duplicate**: every statement of each memory has an aligned, value-equal partner in the
  other, and most words are shared (or the similarity is very high with near-identical words);
- otherwise no conflict — related-but-compatible memories are the common case.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime

from memories.analysis.text import FILLER, STOPWORDS, content_words, jaccard, sentences, stem, words

CLASSIFIER = "heuristic"
MAX_STATEMENTS = 60

# Alignment thresholds (see the module docstring); tuned for few false positives.
STRICT_ALIGNMENT = 0.6
LOOSE_ALIGNMENT = 0.5
DUPLICATE_WORD_OVERLAP = 0.5
VERY_HIGH_SIMILARITY = 0.97

_MONTHS = {
    "jan": 1, "january": 1, "feb": 2, "february": 2, "mar": 3, "march": 3, "apr": 4, "april": 4, "may": 5, "jun": 6,
    "june": 6, "jul": 7, "july": 7, "aug": 8, "august": 8, "sep": 9, "sept": 9, "september": 9, "oct": 10, "october": 10,
    "nov": 11, "november": 11, "dec": 12, "december": 12,
}  # fmt: skip
_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_NUMBER_WORDS = {
    "zero": 0,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "twelve": 12,
}
_MONTH_RE = "|".join(sorted(_MONTHS, key=len, reverse=True))

_MONEY = re.compile(
    r"[$€£]\s?\d[\d,]*(?:\.\d+)?\s*[kKmM]?\b|\b\d[\d,]*(?:\.\d+)?\s*(?:usd|eur|gbp|dollars|euros)\b", re.IGNORECASE
)
_ISO_DATE = re.compile(r"\b\d{4}-\d{2}-\d{2}\b")
_MONTH_DAY = re.compile(
    rf"\b(?:({_MONTH_RE})\.?\s+(\d{{1,2}})(?:st|nd|rd|th)?|(\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?({_MONTH_RE}))\b",
    re.IGNORECASE,
)
_TIME = re.compile(r"\b(\d{1,2}):(\d{2})\s*(am|pm)?\b|\b(\d{1,2})\s*(am|pm)\b", re.IGNORECASE)
_WEEKDAY = re.compile(r"\b(" + "|".join(_WEEKDAYS) + r")s?\b", re.IGNORECASE)
_PERIOD = re.compile(r"\b(?:q[1-4]|h[12]|fy\s?\d{2,4})\b|\b(?:19|20)\d{2}\b(?![-./:]\d)", re.IGNORECASE)
_VERSION = re.compile(r"\b(?:v\d+(?:\.\d+)*|([A-Za-z][\w+#-]*)\s+v?(\d+\.\d+(?:\.\d+)?))\b")
# "60/min", "100 requests per minute", "5k req/s", "38 an hour": a number per unit of time.
_RATE = re.compile(
    r"(?<![\w.])(\d[\d,]*(?:\.\d+)?)\s*(k\b)?\s*(?:[a-z]+\s+){0,2}?(?:/\s*|per\s+|an?\s+|every\s+)"
    r"(sec|secs|second|seconds|s|min|mins|minute|minutes|h|hr|hrs|hour|hours|day|days|week|weeks|month|months)\b",
    re.IGNORECASE,
)
_RATE_UNITS = {"s": "second", "sec": "second", "min": "minute", "h": "hour", "hr": "hour"}
_NUMBER = re.compile(r"(?<![\w.])(\d[\d,]*(?:\.\d+)?)\s*(%|x\b|s\b|ms\b|h\b|k\b)?")
_EMAIL_OR_URL = re.compile(r"\S+@\S+|https?://\S+", re.IGNORECASE)
_IDENTIFIER = re.compile(r"\b(?=[\w.-]*[A-Za-z])(?=[\w.-]*\d)[A-Za-z][\w.-]*[A-Za-z0-9]\b")
_NAME = re.compile(r"\b([A-Z][a-z]*[A-Z0-9][\w+#.-]*|[A-Z]{2,}[0-9]*|[A-Z][a-z0-9'+#-]+)\b")

_UNIT_ALIASES = {"s": "second", "ms": "millisecond", "h": "hour", "x": "times", "%": "percent", "k": "thousand"}

NEGATIONS = frozenset(
    {
        "not",
        "no",
        "never",
        "cannot",
        "can't",
        "won't",
        "don't",
        "doesn't",
        "isn't",
        "aren't",
        "shouldn't",
        "mustn't",
        "without",
        "none",
        "nor",
        "neither",
    }
)
POSITIVE = frozenset(
    {"allow", "allowed", "permitted", "enable", "enabled", "require", "supported", "approve", "open", "on", "yes", "mandatory"}
)
NEGATIVE = frozenset(
    {
        "forbidden",
        "prohibited",
        "banned",
        "disallowed",
        "disable",
        "disabled",
        "optional",
        "unsupported",
        "deprecated",
        "rejected",
        "closed",
        "blocked",
        "off",
        "paused",
    }
)
UNIVERSAL = frozenset({"all", "every", "any", "each", "everyone", "everybody", "always"})
# Words that name a variant of a subject: two statements about different variants do not conflict.
QUALIFIERS = frozenset(
    [
        "free",
        "enterprise",
        "standard",
        "pro",
        "premium",
        "basic",
        "business",
        "team",
        "starter",
        "trial",
        "staging",
        "production",
        "dev",
        "development",
        "test",
        "qa",
        "sandbox",
        "internal",
        "external",
        "public",
        "private",
        "eu",
        "us",
        "uk",
        "apac",
        "emea",
        "latam",
        "na",
        "ios",
        "android",
        "web",
        "mobile",
        "desktop",
        "beta",
        "alpha",
        "legacy",
        "contractor",
        "contractors",
        "employee",
        "employees",
        "intern",
        "interns",
        "read",
        "write",
        "weekday",
        "weekend",
    ]
)
_CHANGE_CUES = re.compile(
    r"\b(?:now|no longer|not anymore|anymore|instead(?: of)?|replac(?:e|es|ed|ing)|supersed(?:e|es|ed)|deprecated|updated?|"
    r"changed?|moved?|switch(?:ed|ing)?|migrated|from now on|going forward|as of|effective|previously|formerly|was|were|"
    r"again|lifted|revised|retired|(?:up|down) from|increased|decreased|raised|lowered|reduced|tak(?:es|ing) over|took over)\b",
    re.IGNORECASE,
)
_CHANGE_WORDS = frozenset(
    [
        "now",
        "longer",
        "anymore",
        "instead",
        "replace",
        "replaces",
        "replaced",
        "replacing",
        "supersede",
        "supersedes",
        "superseded",
        "deprecated",
        "update",
        "updated",
        "change",
        "changed",
        "move",
        "moved",
        "switch",
        "switched",
        "switching",
        "migrate",
        "migrated",
        "previously",
        "formerly",
        "again",
        "lifted",
        "revised",
        "effective",
        "retired",
        "increased",
        "decreased",
        "raised",
        "lowered",
        "reduced",
    ]
)
# "moved from Zendesk to Freshdesk", "switching from the monthly train to a biweekly one":
# a change verb, then "from OLD to NEW" in the same clause (OLD is one or two words).
_MOVED_FROM = re.compile(
    r"\b(?:mov(?:e|es|ed|ing)|switch(?:es|ed|ing)?|migrat(?:e|es|ed|ing)|chang(?:e|es|ed|ing)|transition(?:s|ed|ing)?)\b"
    r"(?P<what>[^.;:!?\n]{0,40}?)\bfrom\s+(?:the\s+|our\s+|an?\s+)?(?P<old>[^\s.,;:!?()]+(?:\s+[^\s.,;:!?()]+)?)\s+to\s+(?:the\s+|an?\s+)?"
    r"(?P<new>[^.,;:!?()\n]{1,40})",
    re.IGNORECASE,
)
# Records of something that happened: a later change does not make them wrong.
EVENT_CATEGORIES = frozenset({"incident", "meeting", "pr", "postmortem"})
_LIGHT_VERBS = frozenset(
    {"happen", "happens", "take", "takes", "place", "start", "starting", "started", "last", "week", "sprint", "month", "day"}
)


@dataclass(frozen=True)
class Memo:
    """What the classifier needs of a memory."""

    title: str
    content: str
    valid_from: datetime
    valid_until: datetime | None = None
    tags: tuple[str, ...] = ()
    category: str = ""


@dataclass(frozen=True)
class Verdict:
    kind: str | None  # "contradiction" | "duplicate" | "stale" | None (no conflict)
    confidence: float
    explanation: str
    # For stale: which side is outdated ("existing" or "new"). For a contradiction the
    # organization's policy decides; for a duplicate the existing record stays.
    outdated: str | None = None
    classifier: str = CLASSIFIER


@dataclass
class Statement:
    text: str
    frame: set[str]
    values: dict[str, set[str]] = field(default_factory=dict)
    names: set[str] = field(default_factory=set)
    periods: set[str] = field(default_factory=set)
    qualifiers: set[str] = field(default_factory=set)
    polarity: int = 1
    polar: bool = False
    universal: bool = False
    change_cue: bool = False


def _unit_after(text: str, end: int) -> str:
    for word in words(text[end : end + 40])[:3]:
        if word in {"per", "a", "an", "the", "of", "every", "each"}:
            continue
        return stem(word)
    return ""


def _unit_before(text: str, start: int) -> str:
    before = words(text[max(0, start - 30) : start])
    return stem(before[-1]) if before else ""


def analyse_statement(text: str, title_frame: set[str] | None = None) -> Statement:
    """Subject frame and values of one sentence."""
    values: dict[str, set[str]] = {}
    masked = _EMAIL_OR_URL.sub(" ", text)

    def add(kind: str, value: str) -> None:
        values.setdefault(kind, set()).add(value)

    def blank(match: re.Match[str]) -> str:
        return " " * (match.end() - match.start())

    for match in _MONEY.finditer(masked):
        add("money", re.sub(r"[^\d.kKmM]", "", match.group(0)).lower().rstrip("."))
    masked = _MONEY.sub(blank, masked)
    for match in _ISO_DATE.finditer(masked):
        add("date", match.group(0))
    masked = _ISO_DATE.sub(blank, masked)
    for match in _MONTH_DAY.finditer(masked):
        month = (match.group(1) or match.group(4)).lower()
        day = match.group(2) or match.group(3)
        add("date", f"{_MONTHS[month]:02d}-{int(day):02d}")
    masked = _MONTH_DAY.sub(blank, masked)
    for match in _TIME.finditer(masked):
        hour = int(match.group(1) or match.group(4))
        minute = int(match.group(2) or 0)
        meridiem = (match.group(3) or match.group(5) or "").lower()
        if meridiem == "pm" and hour < 12:
            hour += 12
        add("time", f"{hour:02d}:{minute:02d}")
    masked = _TIME.sub(blank, masked)
    for match in _WEEKDAY.finditer(masked):
        add("weekday", match.group(1).lower())
    periods = {p.lower().replace(" ", "") for p in _PERIOD.findall(masked)}
    masked = _PERIOD.sub(blank, masked)
    for match in _VERSION.finditer(masked):
        if match.group(2):
            add(f"version:{match.group(1).lower()}", match.group(2))
        else:
            add("version", match.group(0).lower().lstrip("v"))
    masked = _VERSION.sub(blank, masked)
    for match in _RATE.finditer(masked):
        if match.group(0).lower().split()[-1].startswith("every") or " every " in match.group(0).lower():
            continue  # "every 3 years" is a period of time, read as a number of years below
        unit = match.group(3).lower().rstrip("s") if len(match.group(3)) > 2 else match.group(3).lower()
        unit = _RATE_UNITS.get(unit, unit)
        per_unit = float(match.group(1).replace(",", "")) * (1000 if match.group(2) else 1)
        add(f"number:per-{unit}", f"{per_unit:g}")
    masked = _RATE.sub(lambda m: m.group(0) if " every " in m.group(0).lower() else " " * (m.end() - m.start()), masked)
    for word, digits in _NUMBER_WORDS.items():
        masked = re.sub(rf"\b{word}\b", str(digits), masked, flags=re.IGNORECASE)
    for match in _NUMBER.finditer(masked):
        number = match.group(1).replace(",", "").rstrip(".")
        suffix = (match.group(2) or "").lower()
        unit = _UNIT_ALIASES.get(suffix) if suffix else _unit_after(masked, match.end())
        add(f"number:{unit or _unit_before(masked, match.start())}", number)

    tokens = words(text)
    lowered = set(tokens)
    negations = sum(1 for t in tokens if t in NEGATIONS or t.endswith("n't"))
    positive = any(stem(t) in POSITIVE or t in POSITIVE for t in tokens)
    negative = any(t in NEGATIVE for t in tokens)
    polarity = -1 if (negations % 2 == 1) != negative else 1
    names = _names(text) - periods  # "Q3" is a period (compared as one), not a named choice
    name_stems = {stem(n) for n in names}
    month_words = set(_MONTHS) | set(_WEEKDAYS) | {d + "s" for d in _WEEKDAYS} | {"am", "pm"}
    frame = {
        w
        for w in content_words(_EMAIL_OR_URL.sub(" ", text))
        if w not in name_stems
        and w not in month_words
        and w not in NEGATIONS
        and w not in POSITIVE
        and w not in NEGATIVE
        and w not in _CHANGE_WORDS
        and w not in _LIGHT_VERBS
        and not w[0].isdigit()
    }
    frame -= {stem(w) for w in POSITIVE | NEGATIVE}
    if title_frame and len(frame) < 3:
        frame |= title_frame
    return Statement(
        text=text,
        frame=frame,
        values=values,
        names=names,
        periods=periods,
        qualifiers={q for q in lowered if q in QUALIFIERS},
        polarity=polarity,
        polar=bool(negations or positive or negative),
        universal=bool(lowered & UNIVERSAL),
        change_cue=bool(_CHANGE_CUES.search(text)),
    )


def _names(text: str) -> set[str]:
    """Named things: capitalised words not opening the sentence, CamelCase, ACRONYMS."""
    found: set[str] = set()
    body = _EMAIL_OR_URL.sub(" ", text)
    first = re.match(r"\s*(?:[A-Z][\w .'-]{0,40}:\s+)?([A-Za-z][\w'-]*)", body)
    first_start = first.start(1) if first else -1
    for match in _NAME.finditer(body):
        word = match.group(1)
        lowered = word.lower()
        if lowered in STOPWORDS or lowered in FILLER or lowered in _MONTHS or lowered.rstrip("s") in _WEEKDAYS:
            continue
        opening = match.start(1) == first_start
        distinctive = any(c.isupper() for c in word[1:]) or any(c.isdigit() for c in word)
        # "Billing service …" is capitalised only because it opens the sentence; "Jonas Weber leads …" is a name.
        followed_by_name = re.match(r"\s+[A-Z][a-z]", body[match.end(1) :]) is not None
        if opening and not distinctive and not followed_by_name:
            continue
        found.add(lowered)
    # Identifiers mixing letters and digits (eu-west-1, m5.large, sev2) name a specific thing too.
    found.update(t.lower() for t in _IDENTIFIER.findall(body))
    return found


@dataclass(frozen=True)
class Alignment:
    strict: bool
    score: float
    shared: frozenset[str]


def align(a: Statement, b: Statement, *, newer: Statement | None = None) -> Alignment | None:
    """Whether two statements talk about the same subject (None: they do not)."""
    # A word that is a name on either side is a value on both ("engineering manager" vs "VP of Engineering").
    named = {stem(n) for n in a.names | b.names}
    frame_a, frame_b = a.frame - named, b.frame - named
    shared = frame_a & frame_b
    if len(shared) < 2:
        return None
    score = jaccard(frame_a, frame_b)
    if score < LOOSE_ALIGNMENT:
        return None
    if a.periods and b.periods and a.periods != b.periods:
        return None  # Q1 vs Q2, 2024 vs 2025: different periods
    if a.qualifiers != b.qualifiers and (a.qualifiers - b.qualifiers) and (b.qualifiers - a.qualifiers):
        return None  # enterprise vs standard, staging vs production
    only_a, only_b = frame_a - frame_b, frame_b - frame_a
    strict = score >= STRICT_ALIGNMENT and not (only_a and only_b)
    if not strict and newer is not None and newer.change_cue and score >= LOOSE_ALIGNMENT:
        # "moved from X to Y starting this sprint": the newer statement may add words about the change.
        older_only = only_a if newer is b else only_b
        strict = not older_only
    if strict and (a.universal != b.universal) and (only_a or only_b):
        # "All endpoints need auth" vs "/healthz does not": an exception, not a contradiction.
        specific, general = (b, frame_a) if a.universal else (a, frame_b)
        if (frame_b if specific is b else frame_a) - general:
            strict = False
    return Alignment(strict=strict, score=score, shared=frozenset(shared))


@dataclass(frozen=True)
class Difference:
    what: str
    older: str
    newer: str


def differences(old: Statement, new: Statement) -> list[Difference]:
    """How two aligned statements disagree: values of the same kind, yes/no, named choices."""
    found: list[Difference] = []
    for kind in sorted(set(old.values) & set(new.values)):
        if old.values[kind] != new.values[kind]:
            found.append(Difference(_describe(kind), ", ".join(sorted(old.values[kind])), ", ".join(sorted(new.values[kind]))))
    # A number in one statement and a differently-labelled number in the other cannot be compared.
    if old.polar and new.polar and old.polarity != new.polarity:
        found.append(Difference("yes/no", "yes" if old.polarity > 0 else "no", "yes" if new.polarity > 0 else "no"))
    old_only, new_only = old.names - new.names, new.names - old.names
    if old_only and new_only and found and not new.change_cue:
        # Different names *and* different values ("Sev2 … 30 minutes" vs "Sev1 … 15 minutes"): the names
        # pick different subjects, so the values are not competing answers to one question.
        return []
    if (old_only and new_only) or (new_only and not old_only and new.change_cue):
        found.append(Difference("choice", ", ".join(sorted(old_only)) or "—", ", ".join(sorted(new_only))))
    return found


def _describe(kind: str) -> str:
    if kind.startswith("number:"):
        unit = kind.split(":", 1)[1]
        return f"number ({unit})" if unit else "number"
    if kind.startswith("version:"):
        return f"{kind.split(':', 1)[1]} version"
    return kind


@dataclass(frozen=True)
class Replacement:
    """An explicit "moved from OLD to NEW" in a memory."""

    what: frozenset[str]  # what moved: "paging" in "we moved paging from …", "support" in "support has moved from …"
    old: str
    new: str
    sentence: str


def _subject_words(text: str) -> set[str]:
    return {w for w in content_words(text) if "'" not in w}


def replacements(title: str, content: str) -> list[Replacement]:
    """The explicit "from OLD to NEW" changes a memory announces, OLD without numbers (values are
    compared statement by statement instead)."""
    found: list[Replacement] = []
    for span in [title, *(s.text for s in sentences(content)[:MAX_STATEMENTS])]:
        for match in _MOVED_FROM.finditer(span):
            old = match.group("old").strip()
            if not content_words(old) or any(c.isdigit() for c in old):
                continue
            # What moved is the verb's object, else the last words of its subject (same clause).
            what = _subject_words(match.group("what"))
            if not what:
                clause = re.split(r"[,;:()\-–—]", span[: match.start()])[-1]
                what = _subject_words(" ".join(words(clause)[-3:]))
            found.append(Replacement(what=frozenset(what), old=old, new=match.group("new").strip(), sentence=span))
    return found


def replaced(older: Memo, newer: Memo) -> Replacement | None:
    """The newer memory's explicit change away from what the older one is about, if it says one.

    "About" is strict: every word of OLD is in the older memory's title or tags; the older memory
    talks about everything that moved ("sessions moved from Postgres to Redis" does not make the
    database's setup page stale) and its title or tags name some of it ("the sync meeting moved
    from Zoom to Meet" does not make a Zoom setup guide stale); and it does not already name what
    replaced it (then it may be the announcement itself).
    """
    about = content_words(" ".join([older.title, *older.tags]))
    older_words = content_words(" ".join([older.title, *older.tags, older.content]))
    for change in replacements(newer.title, newer.content):
        old_words = content_words(change.old)
        new_words = content_words(change.new) - old_words
        what_it_is_about = change.what <= older_words and bool(change.what & about)
        if old_words <= about and what_it_is_about and not (new_words and new_words <= older_words):
            return change
    return None


# Metadata lines of a document: who, when, what — not claims to compare ("Attendees: …" vs "## Summary").
_LABEL_LINE = re.compile(
    r"^\s*(?:[-*]\s+)?\**(?:attendees|participants|present|absent|apologies|date|when|where|location|owners?|authors?|"
    r"reviewed|reviewers?|approved by|last updated|created|tags|labels|note-?taker|facilitator|chair)\**\s*:",
    re.IGNORECASE,
)
_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+(.*)$")
_TABLE_ROW = re.compile(r"^\s*\|(.+)\|\s*$")
_TABLE_RULE = re.compile(r"^\s*\|?\s*:?-{2,}:?\s*(?:\|\s*:?-{2,}:?\s*)*\|?\s*$")
_SPEAKER = re.compile(r"^\s*[A-Z][\w.'-]*(?:\s+[A-Z][\w.'-]*){0,2}\s*(?:\([^)]*\))?\s*:\s")
_TRANSCRIPT_HEADINGS = ("transcript", "raw notes", "recording")


_LIST_MARKER = re.compile(r"^(?:[-*+]|\d{1,2}[.)])\s+")
_ITEM_LABEL = re.compile(r"^([A-Z][a-z]+(?:\s+[a-z]+){0,2}):(?=\s)")


def _lower_qualifier(cell: str) -> str:
    first, _, rest = cell.partition(" ")
    return f"{first.lower()} {rest}".strip() if first.lower() in QUALIFIERS else cell


@dataclass(frozen=True)
class _Span:
    text: str
    heading: str = ""


def _cells(line: str) -> list[str]:
    match = _TABLE_ROW.match(line)
    return [c.strip().strip("*`") for c in match.group(1).split("|")] if match else []


def _structured_spans(content: str) -> list[_Span]:
    """The statements of a document, read with its structure (see the module docstring)."""
    spans: list[_Span] = []
    heading = ""
    in_transcript = False
    lines = content.splitlines()
    header: list[str] = []
    prose: list[str] = []

    def flush() -> None:
        if prose:
            for sentence in sentences("\n".join(prose)):
                text = _LIST_MARKER.sub("", sentence.text)
                # "Hotels: up to $200 per night": a list item's label is its subject, not a name.
                text = _ITEM_LABEL.sub(lambda m: m.group(1).lower() + ":", text)
                spans.append(_Span(text, heading))
            prose.clear()

    for index, line in enumerate(lines):
        heading_match = _HEADING.match(line)
        if heading_match:
            flush()
            heading = heading_match.group(1).strip()
            in_transcript = heading.lower().startswith(_TRANSCRIPT_HEADINGS)
            header = []
            continue
        if in_transcript:
            continue
        if _TABLE_ROW.match(line) or _TABLE_RULE.match(line):
            flush()
            if _TABLE_RULE.match(line):
                continue
            cells = _cells(line)
            following = lines[index + 1] if index + 1 < len(lines) else ""
            if not header and _TABLE_RULE.match(following):
                header = cells
                continue
            if header and cells and len(cells) == len(header):
                # One statement per cell, keyed by the row's first cell: "Tier free: Limit 60/min".
                # Column names are labels, not names ("Limit", "Owner"); a leading qualifier in a cell
                # ("Production deploy at 10:00") is a variant, not a name either.
                key = f"{header[0].lower()} {cells[0]}".strip()
                spans.extend(
                    _Span(f"{key}: {name.lower()} {_lower_qualifier(value)}", heading)
                    for name, value in zip(header[1:], cells[1:], strict=True)
                    if value and value not in {"-", "—"}
                )
            continue
        header = []
        if _LABEL_LINE.match(line) or (_SPEAKER.match(line) and heading.lower().startswith(_TRANSCRIPT_HEADINGS)):
            flush()
            continue
        if not line.strip():
            flush()
            continue
        prose.append(line)
    flush()
    return spans


def _statements(memo: Memo) -> list[Statement]:
    title_frame = content_words(memo.title) - {stem(n) for n in _names(memo.title)}
    title_periods = {p.lower().replace(" ", "") for p in _PERIOD.findall(memo.title)}
    found: list[Statement] = []
    for span in _structured_spans(memo.content)[:MAX_STATEMENTS]:
        statement = analyse_statement(span.text, title_frame)
        if span.heading:
            # "## Contractors" / "## Free tier": the section's variant qualifies what is said under it.
            statement.qualifiers |= {w for w in words(span.heading) if w in QUALIFIERS}
        if title_periods and not statement.periods:
            statement.periods = set(title_periods)  # "Price list 2026": its rows are about 2026
        found.append(statement)
    return [s for s in found if s.frame or s.values]


def _same_subject(existing: Memo, new: Memo, old_statements: list[Statement], new_statements: list[Statement]) -> bool:
    titles = jaccard(content_words(existing.title), content_words(new.title))
    if titles >= 0.5 and len(content_words(existing.title) & content_words(new.title)) >= 1:
        return True
    return any(align(a, b) for a in old_statements for b in new_statements)


def classify(existing: Memo, new: Memo, *, similarity: float, now: datetime) -> Verdict:
    """Classify a pair (see the module docstring). `existing` was stored before `new`."""
    verdict = _classify(existing, new, similarity=similarity, now=now)
    outdated = existing if verdict.outdated == "existing" else new
    if verdict.kind == "stale" and outdated.category.lower() in EVENT_CATEGORIES:
        return Verdict(
            None,
            0.0,
            f"Related, but the older one records an event ({outdated.category}); a later change does not make it wrong.",
        )
    return verdict


def _classify(existing: Memo, new: Memo, *, similarity: float, now: datetime) -> Verdict:
    titled = (
        _identifiers(Memo(title=existing.title, content="", valid_from=existing.valid_from)),
        _identifiers(Memo(title=new.title, content="", valid_from=new.valid_from)),
    )
    if all(titled) and titled[0] != titled[1]:
        # "Incident INC-4821" and "Incident INC-4822", handoff LS677 and VN315: a title naming its own
        # identifier names what the memory is about, so two different ones are two subjects.
        return Verdict(None, 0.0, f"About different things: {sorted(titled[0])[0]} and {sorted(titled[1])[0]}.")
    new_is_newer = new.valid_from >= existing.valid_from
    older, newer = (existing, new) if new_is_newer else (new, existing)
    older_side = "existing" if new_is_newer else "new"
    old_statements, new_statements = _statements(existing), _statements(new)
    same_subject = _same_subject(existing, new, old_statements, new_statements)

    expired = [m for m in (older, newer) if m.valid_until is not None and m.valid_until <= now]
    if same_subject and len(expired) == 1:
        outdated = "existing" if expired[0] is existing else "new"
        return Verdict(
            "stale",
            0.85,
            f"Same subject, and the {'older' if expired[0] is older else 'newer'} "
            f"memory's validity ended on {expired[0].valid_until:%Y-%m-%d}.",
            outdated=outdated,
        )

    older_statements, newer_statements = (old_statements, new_statements) if new_is_newer else (new_statements, old_statements)
    best: tuple[float, Statement, Statement, list[Difference]] | None = None
    for o in older_statements:
        for n in newer_statements:
            alignment = align(o, n, newer=n)
            if alignment is None or not alignment.strict:
                continue
            diffs = differences(o, n)
            if diffs and (best is None or alignment.score > best[0]):
                best = (alignment.score, o, n, diffs)
    if best is not None:
        score, o, n, diffs = best
        said = "; ".join(f"{d.what}: {d.older} → {d.newer}" for d in diffs[:3])
        if n.change_cue:
            return Verdict(
                "stale",
                round(min(0.95, 0.6 + 0.35 * score), 2),
                f"The newer memory says this changed ({said}): “{_clip(n.text)}” replaces “{_clip(o.text)}”.",
                outdated=older_side,
            )
        return Verdict(
            "contradiction",
            round(min(0.95, 0.6 + 0.35 * score), 2),
            f"Both state the same thing with different values ({said}): “{_clip(o.text)}” vs “{_clip(n.text)}”.",
        )

    change = replaced(older, newer)
    if change is not None:
        return Verdict(
            "stale",
            0.8,
            f"The newer memory says this moved from {change.old} to {change.new}: “{_clip(change.sentence)}”; "
            f"the older one is about {change.old}.",
            outdated=older_side,
        )

    if _duplicates(existing, new, old_statements, new_statements, similarity):
        return Verdict("duplicate", 0.9, "Both say the same thing in nearly the same words, with the same values.")
    return Verdict(None, 0.0, "Related, but no aligned statements disagree and they are not the same information.")


def _duplicates(existing: Memo, new: Memo, a: list[Statement], b: list[Statement], similarity: float) -> bool:
    if not a or not b:
        return False
    words_a, words_b = content_words(existing.content), content_words(new.content)
    overlap = jaccard(words_a, words_b)
    # Two notes from one template that name different tickets, incidents or codes are about
    # different things, however alike their words (recall must still find each by its id).
    if _identifiers(existing) != _identifiers(new):
        return False
    if similarity >= VERY_HIGH_SIMILARITY and overlap >= 0.8:
        return True
    if overlap < DUPLICATE_WORD_OVERLAP:
        return False
    return _covered(a, b) and _covered(b, a)


def _identifiers(memo: Memo) -> set[str]:
    return {t.lower() for t in _IDENTIFIER.findall(_EMAIL_OR_URL.sub(" ", f"{memo.title}\n{memo.content}"))}


def _covered(these: list[Statement], by: list[Statement]) -> bool:
    """Every statement has an aligned partner with the same values, polarity and names."""
    for s in these:
        partner = next((o for o in by if _strictly_aligned(s, o) and not differences(s, o) and s.values == o.values), None)
        if partner is None:
            return False
    return True


def _strictly_aligned(a: Statement, b: Statement) -> bool:
    alignment = align(a, b)
    return alignment is not None and alignment.strict


def _clip(text: str, limit: int = 140) -> str:
    text = text.rstrip(" .")
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"

"""Entities and simple relations in a memory's text: a heuristic, and the LLM prompt.

The heuristic finds what has a recognisable shape — @mentions (people), owner/repo names and
"X repository" (repos), JIRA-style ticket ids, "X team" (teams), "Project X" (projects),
"customer X" / "vendor X" — and capitalised multi-word names, typed by the words around them
(a name followed by "owns", "said", "leads" … is a person). Relations: "A owns/leads/maintains
B" when the sentence says so, otherwise entities named in one sentence are `mentioned_with`
each other. Whatever an LLM proposes is kept only if its name occurs in the text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from itertools import combinations
from typing import Any

from memories.analysis.text import STOPWORDS, sentences

KINDS = ("person", "team", "project", "repo", "customer", "vendor", "ticket", "other")
MAX_ENTITIES = 40
MAX_RELATIONS = 40

_MENTION = re.compile(r"(?<![\w.@])@([A-Za-z][\w.-]{0,38}[A-Za-z0-9_])")
_GITHUB_REPO = re.compile(r"github\.com/([A-Za-z0-9][\w.-]{0,38})/([A-Za-z0-9][\w.-]{0,99}?)(?:\.git)?(?=[/#?\s)\]]|$)")
_SLASH_REPO = re.compile(r"(?<![\w./:@-])([a-z0-9][a-z0-9_.-]{0,38})/([a-z0-9][a-z0-9_.-]{1,99})(?![\w/])")
_NAMED_REPO = re.compile(
    r"\b(?:the\s+)?`?([a-z0-9][a-z0-9_.-]*[-_.][a-z0-9_.-]+|[a-z0-9][a-z0-9_-]{2,})`?\s+(?:repo|repository)\b|\b(?:repo|repository)\s+`?([A-Za-z0-9][\w.-]*(?:/[\w.-]+)?)`?"
)
_TICKET = re.compile(r"\b([A-Z][A-Z0-9]{1,9}-\d{1,6})\b")
_NOT_TICKETS = {
    "UTF",
    "ISO",
    "SHA",
    "AES",
    "RFC",
    "GPT",
    "COVID",
    "HTTP",
    "TLS",
    "SSL",
    "MP",
    "RSA",
    "IPV",
    "X",
    "EU",
    "US",
    "CVE",
}
_TEAM = re.compile(r"\b(?:the\s+)?([A-Za-z][\w&-]*(?:\s+[A-Z][\w&-]*)?)\s+(team|squad|guild)\b", re.IGNORECASE)
_NOT_TEAMS = {
    "the",
    "our",
    "your",
    "their",
    "whole",
    "this",
    "that",
    "same",
    "new",
    "a",
    "each",
    "every",
    "entire",
    "other",
    "my",
    "his",
    "her",
    "its",
    "one",
    "any",
}
_PROJECT = re.compile(r"\b[Pp]roject\s+([A-Z][\w-]*(?:\s+[A-Z][\w-]*){0,2})")
_CUED_ORG = re.compile(r"\b(customer|client|vendor|supplier|provider)s?\s+([A-Z][\w&.-]*(?:\s+[A-Z][\w&.-]*){0,3})")
_CAPITALISED_RUN = re.compile(r"\b([A-Z][a-z][\w'&-]*(?:\s+(?:of\s+|&\s+)?[A-Z][\w'&-]+){1,3})\b")
_PERSON_VERBS = {
    "said", "says", "owns", "owned", "leads", "led", "will", "to", "joins", "joined", "covers", "asked", "agreed", "proposed",
    "suggested", "presented", "wrote", "takes", "took", "approved", "is", "was", "reviewed", "maintains", "runs", "from", "and",
}  # fmt: skip
_COMPANY_SUFFIXES = {"inc", "inc.", "corp", "corporation", "llc", "ltd", "ltd.", "gmbh", "ag", "sa", "plc", "co", "co."}
_CUSTOMER_CUES = re.compile(
    r"\b(customer|client|account|renew(?:ed|al)?|churn|deal|seats|signed|contract with|prospect)\b", re.IGNORECASE
)
_VENDOR_CUES = re.compile(r"\b(vendor|supplier|provider|licen[cs]e|subscription|we use|invoice from|procure)\b", re.IGNORECASE)
_OWNS = re.compile(r"\b(owns|own|leads|lead|maintains|maintain|runs|manages)\b", re.IGNORECASE)
_CALENDAR = {
    "monday",
    "tuesday",
    "wednesday",
    "thursday",
    "friday",
    "saturday",
    "sunday",
    "january",
    "february",
    "march",
    "april",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
}


@dataclass(frozen=True)
class FoundEntity:
    name: str
    kind: str

    @property
    def key(self) -> str:
        return entity_key(self.name)


@dataclass(frozen=True)
class FoundRelation:
    source: FoundEntity
    target: FoundEntity
    kind: str


@dataclass(frozen=True)
class Extraction:
    entities: list[FoundEntity]
    relations: list[FoundRelation]


def entity_key(name: str) -> str:
    return " ".join(name.lower().lstrip("@").split())[:200]


def _sentence_entities(sentence: str) -> list[tuple[FoundEntity, tuple[int, int]]]:
    """Entities of one sentence with where they sit; an earlier (more specific) pattern wins a span."""
    found: list[tuple[FoundEntity, tuple[int, int]]] = []
    taken: list[tuple[int, int]] = []

    def add(name: str, kind: str, span: tuple[int, int]) -> None:
        name = name.strip(" .,:;`'\"")
        if len(name) < 2 or any(s <= span[0] < e or s < span[1] <= e for s, e in taken):
            return
        taken.append(span)
        found.append((FoundEntity(name[:200], kind), span))

    for match in _GITHUB_REPO.finditer(sentence):
        add(f"{match.group(1)}/{match.group(2)}", "repo", match.span())
    for match in _SLASH_REPO.finditer(sentence):
        owner, repo = match.group(1), match.group(2)
        if any(c in owner + repo for c in "-_") or any(c.isdigit() for c in owner + repo):
            add(f"{owner}/{repo}", "repo", match.span())
    for match in _NAMED_REPO.finditer(sentence):
        name = match.group(1) or match.group(2)
        if name and name.lower() not in STOPWORDS and name.lower() not in {"this", "that", "our", "the", "new"}:
            add(name, "repo", match.span())
    for match in _MENTION.finditer(sentence):
        add("@" + match.group(1), "person", match.span())
    for match in _TICKET.finditer(sentence):
        if match.group(1).split("-")[0] not in _NOT_TICKETS:
            add(match.group(1), "ticket", match.span())
    for match in _PROJECT.finditer(sentence):
        add("Project " + match.group(1), "project", match.span())
    for match in _CUED_ORG.finditer(sentence):
        kind = "customer" if match.group(1).lower() in {"customer", "client"} else "vendor"
        add(match.group(2), kind, match.span(2))
    for match in _TEAM.finditer(sentence):
        words = match.group(1).split()
        if words[0].lower() in _NOT_TEAMS or words[-1].lower() in _NOT_TEAMS:
            continue
        add(f"{match.group(1)} {match.group(2).lower()}", "team", match.span())
    for match in _CAPITALISED_RUN.finditer(sentence):
        words = match.group(1).split()
        while words and (words[0].lower() in STOPWORDS or words[0].lower() in _CALENDAR):
            words = words[1:]
        if len(words) < 2 or any(w.lower() in _CALENDAR for w in words):
            continue
        name = " ".join(words)
        start = match.start(1) + match.group(1).find(words[0])
        add(name, _kind_of_name(name, sentence, match.end()), (start, match.end()))
    return found


def _kind_of_name(name: str, sentence: str, end: int) -> str:
    last = name.split()[-1].lower()
    if last in _COMPANY_SUFFIXES:
        if _VENDOR_CUES.search(sentence):
            return "vendor"
        return "customer" if _CUSTOMER_CUES.search(sentence) else "other"
    following = re.match(r"\s*(?:\([^)]*\)\s*)?[:,]?\s*([a-z]+)", sentence[end:])
    if len(name.split()) == 2 and following and following.group(1) in _PERSON_VERBS:
        return "person"
    if re.match(r"\s*\([A-Za-z ]{1,20}\)\s*:", sentence[end:]) or re.match(r"\s*:", sentence[end:]):
        return "person"  # "Sarah Lee (PM): …" — a speaker
    return "other"


def heuristic_extract(text: str) -> Extraction:
    entities: dict[tuple[str, str], FoundEntity] = {}
    relations: dict[tuple[str, str, str, str, str], FoundRelation] = {}
    for span in sentences(text):
        placed = sorted(_sentence_entities(span.text), key=lambda item: item[1][0])
        in_sentence: list[FoundEntity] = []
        for entity, _where in placed:
            known = entities.setdefault((entity.kind, entity.key), entity)
            if known not in in_sentence:
                in_sentence.append(known)
        stated = _stated_relation(span.text, placed, entities)
        if stated is not None:
            relations.setdefault(_relation_key(stated), stated)
        for a, b in combinations(in_sentence[:8], 2):
            if stated is not None and {a, b} == {stated.source, stated.target}:
                continue
            source, target = sorted((a, b), key=lambda e: (e.kind, e.key))
            relation = FoundRelation(source, target, "mentioned_with")
            relations.setdefault(_relation_key(relation), relation)
    return Extraction(list(entities.values())[:MAX_ENTITIES], list(relations.values())[:MAX_RELATIONS])


def _relation_key(relation: FoundRelation) -> tuple[str, str, str, str, str]:
    return (relation.source.kind, relation.source.key, relation.kind, relation.target.kind, relation.target.key)


def _stated_relation(
    sentence: str, placed: list[tuple[FoundEntity, tuple[int, int]]], known: dict[tuple[str, str], FoundEntity]
) -> FoundRelation | None:
    """ "<person or team> owns/leads/maintains <thing>": the entity right before the verb, the first one after it."""
    verb = _OWNS.search(sentence)
    if verb is None:
        return None
    before = [e for e, (_s, end) in placed if end <= verb.start() and not sentence[end : verb.start()].strip(" ,")]
    after = [e for e, (start, _e) in placed if start >= verb.end()]
    if not before or not after or before[-1].kind not in {"person", "team", "other"}:
        return None
    owner, thing = known[(before[-1].kind, before[-1].key)], known[(after[0].kind, after[0].key)]
    if owner == thing:
        return None
    word = verb.group(1).lower()
    kind = {"own": "owns", "lead": "leads", "maintain": "maintains", "run": "runs", "manages": "manages"}.get(word, word)
    return FoundRelation(owner, thing, kind)


# -- the LLM path ------------------------------------------------------------------------------------
LLM_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["entities", "relations"],
    "properties": {
        "entities": {
            "type": "array",
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["name", "kind"],
                "properties": {"name": {"type": "string"}, "kind": {"type": "string", "enum": list(KINDS)}},
            },
        },
        "relations": {
            "type": "array",
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["source", "target", "kind"],
                "properties": {"source": {"type": "string"}, "target": {"type": "string"}, "kind": {"type": "string"}},
            },
        },
    },
}

LLM_SYSTEM = (
    "Extract the named entities of a team knowledge-base entry: people, teams, projects, code repositories, customers, "
    "vendors and tickets, each named exactly as written in the text. Then list simple relations between them that the "
    "text states (e.g. owns, leads, works_on, depends_on, customer_of, assigned_to), as short snake_case verbs. "
    "Only entities and relations the text supports; no generic nouns."
)


def llm_prompt(text: str) -> str:
    return f"<entry>\n{text}\n</entry>\n\nList its entities and relations."


def ground_llm(data: Any, text: str) -> Extraction:
    """Keep entities whose name occurs in the text, and relations between kept entities."""
    lowered = text.lower()
    by_name: dict[str, FoundEntity] = {}
    for item in (data or {}).get("entities", []) if isinstance(data, dict) else []:
        name = " ".join(str(item.get("name", "")).split())[:200]
        kind = item.get("kind")
        if len(name) >= 2 and kind in KINDS and name.lower() in lowered:
            by_name.setdefault(name.lower(), FoundEntity(name, kind))
    relations: list[FoundRelation] = []
    for item in (data or {}).get("relations", []) if isinstance(data, dict) else []:
        source, target = by_name.get(str(item.get("source", "")).lower()), by_name.get(str(item.get("target", "")).lower())
        kind = re.sub(r"[^a-z_]", "", str(item.get("kind", "")).lower().replace(" ", "_"))[:50]
        if source and target and source != target and kind:
            relations.append(FoundRelation(source, target, kind))
    return Extraction(list(by_name.values())[:MAX_ENTITIES], relations[:MAX_RELATIONS])

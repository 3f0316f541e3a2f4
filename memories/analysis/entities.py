"""Entities and simple relations in a memory's text: a heuristic, and the LLM prompt.

The heuristic finds what has a recognisable shape — @mentions (people), owner/repo names and
"X repository" (repos), JIRA-style ticket ids, "X team" (teams), "Project X" (projects),
"customer X" / "vendor X" — and capitalised multi-word names, typed by the words around them
(a name followed by "owns", "said", "leads" … is a person; so is a name of one of the organization's
members or known authors, passed in as `people`). Not entities: rates and ratios that look like
owner/repo ("100/min.", "38/hour"), a lowercase word before "repo" ("the specific repo"), and the
verb opening an imperative or a heading ("Get VPN access", "Install Cisco AnyConnect" → "Cisco
AnyConnect"); a possessive "'s" is not part of a name. Relations: "A owns/leads/maintains
B" when the sentence says so, otherwise entities named in one sentence are `mentioned_with`
each other. Whatever an LLM proposes is kept only if its name occurs in the text.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from itertools import combinations
from typing import Any

from memories.analysis.text import STOPWORDS, sentences

KINDS = ("person", "team", "project", "repo", "customer", "vendor", "ticket", "other")
MAX_ENTITIES = 40
MAX_RELATIONS = 40

_MENTION = re.compile(r"(?<![\w.@])@([A-Za-z][\w.-]{0,38}[A-Za-z0-9_])")
_GITHUB_REPO = re.compile(r"github\.com/([A-Za-z0-9][\w.-]{0,38})/([A-Za-z0-9][\w.-]{0,99}?)(?:\.git)?(?=[/#?\s)\]]|$)")
# owner/repo in prose: both parts start with a letter ("100/min.", "502/413" and "9k/month" are numbers).
_SLASH_REPO = re.compile(r"(?<![\w./:@-])([a-z][a-z0-9_.-]{0,38})/([a-z][a-z0-9_.-]{1,99})(?![\w/])")
# "robots/hour", "requests/min": a per-unit rate, not a repository.
_RATE_UNITS = {
    "s", "sec", "second", "seconds", "min", "mins", "minute", "minutes", "h", "hr", "hrs", "hour", "hours", "day", "days",
    "week", "weeks", "month", "months", "mo", "year", "years", "yr", "km", "mi", "mile", "miles", "kg", "user", "users",
    "seat", "seats", "key", "request", "requests", "req", "call", "calls", "site", "sites", "robot", "robots",
}  # fmt: skip
# "the search-indexer repo", "the `protos` repository", "repository `fleet-console`": a plain lowercase
# word before "repo" ("the specific repo", "defines repository") is an adjective, not a name.
_NAMED_REPO = re.compile(
    r"\b(?:the\s+)?(?:([a-z0-9][a-z0-9_.-]*[-_./][a-z0-9_./-]*[a-z0-9])|`([a-z0-9][a-z0-9_.-]{1,})`)\s+(?:repo|repository)\b"
    r"|\b(?:repo|repository)\s+(?:`([A-Za-z0-9][\w.-]*(?:/[\w.-]+)?)`|([A-Za-z0-9][\w.-]*[-_./][\w.-]*[A-Za-z0-9]))"
)
# PLAT-1423, and INC-2024-092 whole (not "INC-2024"); one digit is a model ("DC-1"), not a ticket.
_TICKET = re.compile(r"\b([A-Z][A-Z0-9]{1,9}-\d{2,6}(?:-\d{1,6})?)\b(?!-\w)")
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
_TEAM = re.compile(r"(?<!['’])\b(?:the\s+)?([A-Za-z][\w&-]*(?:\s+[A-Z][\w&-]*)?)\s+(team|squad|guild)\b", re.IGNORECASE)
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
    "hi",
    "hello",
    "dear",
    "everyone",
    "regardless",
    "reserved",
    "owning",
    "another",
    "page",
    "ask",
    "contact",
    "ping",
}
_PROJECT = re.compile(r"\b[Pp]roject\s+([A-Z][\w-]*(?:\s+[A-Z][\w-]*){0,2})")
_CUED_ORG = re.compile(r"\b(customer|client|vendor|supplier|provider)s?\s+([A-Z][\w&.-]*(?:\s+[A-Z][\w&.-]*){0,3})")
_CAPITALISED_RUN = re.compile(r"\b([A-Z][a-z][\w'&-]*(?:\s+(?:of\s+|&\s+)?[A-Z][\w'&-]+){1,3})\b")
_PERSON_VERBS = {
    "said", "says", "owns", "owned", "leads", "led", "joins", "joined", "covers", "asked", "agreed", "proposed",
    "suggested", "presented", "wrote", "approved", "reviewed", "maintains", "thinks", "noted", "confirmed", "replied",
    "explained", "decided", "signed", "paged", "escalated", "mentioned", "shared", "pinged", "emailed", "promised",
}  # fmt: skip
# The opening word of an instruction, a greeting or a heading: "Get VPN access", "Hi Beatriz",
# "Verifying Dock API". Dropped from the start of a capitalised run (what follows may still be a name).
_OPENERS = {
    "get", "set", "use", "using", "run", "open", "install", "add", "check", "make", "ask", "call", "send", "go", "see", "read",
    "update", "create", "email", "contact", "click", "select", "connect", "restart", "enable", "disable", "request", "file",
    "submit", "review", "join", "visit", "log", "sign", "book", "follow", "reset", "download", "upload", "turn", "keep",
    "take", "put", "write", "post", "ping", "escalate", "rotate", "deploy", "push", "pull", "merge", "tag", "note",
    "remember", "never", "always", "do", "don't", "please", "cut", "watch", "encrypt", "report", "drop", "drops", "moves",
    "includes", "include", "verify", "confirm", "establish", "expect", "try", "avoid", "move", "switch", "start", "stop",
    "hi", "hello", "dear", "thanks", "welcome", "congrats", "two", "three", "new", "all", "no", "not", "higher", "lower",
    "frequent", "expedited", "removed", "added", "fixed", "bump", "bumps", "adds", "fixes", "removes", "upgrade", "migrate",
    "ship", "pin", "replace", "share", "store", "block", "allow", "let", "tell", "give", "bring", "pay", "choose", "pick",
    "find", "type", "press", "copy", "paste", "save", "delete", "back", "wait", "schedule",
}  # fmt: skip
_POSSESSIVE = re.compile(r"['’]s$")
# Job titles: "Head of People", "Site Managers", "General Counsel" name a role, not someone.
_ROLE_WORDS = {
    "manager", "managers", "partner", "partners", "supervisor", "supervisors", "admin", "admins", "engineer", "engineers",
    "counsel", "head", "director", "lead", "leads", "officer", "vp", "president", "coordinator", "specialist", "analyst",
    "owner", "owners", "champion", "champions", "representative", "administrator", "administrators", "intern", "interns",
}  # fmt: skip
# A generic acronym at the end qualifies the name before it ("Fleet Console UI", "Support SLA"); the
# name is what is left, if anything ("API" stays: "Dock API" is the product's name).
_TRAILING_GENERIC = {
    "sla", "slas", "faq", "csat", "dm", "dms", "pr", "prs", "ui", "ttl", "ttls", "ssh", "lts", "hil", "rma", "nda", "msa",
    "p1", "p2", "p3", "p4", "ii", "iii", "ci", "qa", "hr", "wms", "ok", "kpi", "kpis", "okr", "okrs", "qbr", "faqs", "sop",
}  # fmt: skip
# Departments: "Sales Ops", "Deal Desk", "Support & Customer Success" are teams.
_DEPARTMENT_WORDS = {"ops", "desk", "engineering", "operations", "success", "manufacturing", "procurement", "marketing"}
# Words that end an organization's name, never a person's: "Northwind Logistics", "Meridian Home Goods".
_ORGANIZATION_WORDS = {
    "logistics", "goods", "rewards", "grocers", "trading", "freight", "health", "dental", "parts", "distribution", "pharma",
    "labs", "systems", "solutions", "robotics", "group", "partners", "capital", "bank", "insurance", "services",
    "technologies", "software", "foods", "motors", "airlines", "supply", "retail", "stores", "markets", "holdings",
    "industries", "media", "energy", "consulting", "ventures", "networks", "security", "analytics", "hotels", "airways",
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


def _sentence_entities(sentence: str, people: dict[str, str]) -> list[tuple[FoundEntity, tuple[int, int]]]:
    """Entities of one sentence with where they sit; an earlier (more specific) pattern wins a span.

    `people` maps known people's keys (see entity_key) to their names as the organization writes them.
    """
    found: list[tuple[FoundEntity, tuple[int, int]]] = []
    taken: list[tuple[int, int]] = []

    def add(name: str, kind: str, span: tuple[int, int]) -> None:
        name = name.strip(" .,:;`'\"")
        if len(name) < 2 or any(span[0] < e and s < span[1] for s, e in taken):
            return
        taken.append(span)
        found.append((FoundEntity(name[:200], kind), span))

    for match in _GITHUB_REPO.finditer(sentence):
        add(f"{match.group(1)}/{match.group(2)}", "repo", match.span())
    for match in _SLASH_REPO.finditer(sentence):
        owner, repo = match.group(1), match.group(2).rstrip("._")
        if repo.lower() in _RATE_UNITS or owner.lower() in _RATE_UNITS:
            continue
        if repo == f"no-{owner}" or re.fullmatch(r"v\d+", repo):
            continue  # "go/no-go"; "telemetry/v3" is an API path
        if any(c in owner + repo for c in "-_") or any(c.isdigit() for c in owner + repo):
            add(f"{owner}/{repo}", "repo", match.span())
    for match in _NAMED_REPO.finditer(sentence):
        name = next((g for g in match.groups() if g), "")
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
        if not re.fullmatch(r"[A-Z]+s?", match.group(2)):  # "customer DPAs", "vendor SLAs": documents, not organizations
            add(match.group(2), kind, match.span(2))
    for match in _TEAM.finditer(sentence):
        words = match.group(1).split()
        if any(w.lower() in _NOT_TEAMS or w.lower() in STOPWORDS or w.lower() in _CALENDAR for w in words):
            continue
        add(f"{match.group(1)} {match.group(2).lower()}", "team", match.span())
    opening = _opening_position(sentence)
    for match in _CAPITALISED_RUN.finditer(sentence):
        words = match.group(1).split()
        at_opening = match.start(1) == opening
        while words and (
            words[0].lower() in STOPWORDS or words[0].lower() in _CALENDAR or (at_opening and _is_opener(words[0], people))
        ):
            at_opening = False  # only the first word opens the sentence
            words = words[1:]
        owner = next((i for i, w in enumerate(words) if _POSSESSIVE.search(w)), None)
        if owner is not None:  # "Fleet Console's Redis" is about Fleet Console; "Kestrel's QA" names no one
            words = words[: owner + 1]
            words[-1] = _POSSESSIVE.sub("", words[-1])
        while len(words) > 2 and words[-1].lower() in _TRAILING_GENERIC:
            words = words[:-1]
        if len(words) == 2 and words[-1].lower() in _TRAILING_GENERIC:
            continue
        if len(words) < 2 or any(w.lower() in _CALENDAR for w in words):
            continue
        if any(w.lower() in _ROLE_WORDS for w in words) and entity_key(" ".join(words)) not in people:
            continue
        name = " ".join(words)
        start = match.start(1) + match.group(1).find(words[0])
        known = people.get(entity_key(name))
        if known is not None:
            add(known, "person", (start, match.end()))
        else:
            add(name, _kind_of_name(name, sentence, match.end(), people), (start, match.end()))
    return found


def _opening_position(sentence: str) -> int:
    """Where the first word of a sentence, list item or heading starts ("- ", "1. ", "## " skipped)."""
    opening = re.match(r"\s*(?:[#>*+-]+\s+|\d+[.)]\s+|\*\*)*", sentence)
    return opening.end() if opening else 0


def _is_opener(word: str, people: dict[str, str]) -> bool:
    """The first word of a sentence that is an instruction, greeting or description, not part of a name."""
    lowered = word.lower()
    if any(key.split()[0] == lowered for key in people):
        return False  # "Ada Okafor approved …" opens with a name
    return lowered in _OPENERS or (lowered.endswith("ing") and len(lowered) > 5)


def _looks_like_a_personal_name(name: str) -> bool:
    """Two or three words, each capitalised and then lowercase ("Mei-Lin Chou", "Colm O'Driscoll"): not "Dock API"."""
    parts = name.split()
    return 2 <= len(parts) <= 3 and all(re.fullmatch(r"[A-Z][a-z]+(?:[-'’][A-Z]?[a-z]+)*|O['’][A-Z][a-z]+", p) for p in parts)


def _kind_of_name(name: str, sentence: str, end: int, people: dict[str, str] | None = None) -> str:
    last = name.split()[-1].lower()
    if last in _COMPANY_SUFFIXES:
        if _VENDOR_CUES.search(sentence):
            return "vendor"
        return "customer" if _CUSTOMER_CUES.search(sentence) else "other"
    if last in _DEPARTMENT_WORDS:
        return "team"
    if last in _ORGANIZATION_WORDS:
        return "customer" if _CUSTOMER_CUES.search(sentence) else ("vendor" if _VENDOR_CUES.search(sentence) else "other")
    if not _looks_like_a_personal_name(name):
        return "other"
    if people and name.split()[0].lower() in {key.split()[0] for key in people}:
        return "person"  # a known person's given name with a surname: "Priya Raman" beside member Priya Nair
    following = re.match(r"\s*(?:\([^)]*\)\s*)?[:,]?\s*([a-z]+)", sentence[end:])
    if len(name.split()) == 2 and following and following.group(1) in _PERSON_VERBS:
        return "person"
    if re.match(r"\s*\([A-Za-z ]{1,20}\)\s*:", sentence[end:]) or re.match(r"\s*:", sentence[end:]):
        return "person"  # "Sarah Lee (PM): …" — a speaker
    return "other"


def people_index(names: Iterable[str]) -> dict[str, str]:
    """Known people (members, authors) by entity key; a name of one word is not enough to recognise anyone."""
    return {entity_key(n): " ".join(n.split()) for n in names if len(n.split()) >= 2}


def heuristic_extract(text: str, *, people: Iterable[str] = ()) -> Extraction:
    """Entities and relations of `text`; `people` are the full names of the organization's members and known authors."""
    known_people = people_index(people)
    entities: dict[tuple[str, str], FoundEntity] = {}
    relations: dict[tuple[str, str, str, str, str], FoundRelation] = {}
    for span in sentences(text):
        placed = sorted(_sentence_entities(span.text, known_people), key=lambda item: item[1][0])
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

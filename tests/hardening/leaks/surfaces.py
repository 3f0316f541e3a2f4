"""Every read surface of Cortex, as one table per channel (REST, browser, MCP): a new surface is one line.

A surface is either one request (`One`) or one request per object of a kind (`Each`): memories,
conflicts, entities, jobs, connectors, scopes. For `Each`, an object the principal may not open
must answer exactly as a missing one does (status and body, once ids and request ids are set
aside), so existence never leaks; `hidden_only` surfaces (writes) are asked only about those.
`complete` surfaces must also show every current memory the principal may read (the suite is not
allowed to pass by showing nothing).
"""

from __future__ import annotations

import base64
import difflib
import hashlib
import json
import os
import re
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from hardening.leaks.world import ACME_SCOPES, SHARED_QUERY, Canary, Who, World

MISSING_UUID = str(uuid.UUID(int=0x5EED))
MISSING_INT = "987654321"
MISSING_SCOPE = "no-such-scope"
MISSING_ENTITY = "ZQK999-9999"
MISSING_RUN = f"{MISSING_UUID}/runs/{MISSING_UUID}"
MISSING_AUTHOR = "Scribe-nobody"
# A "Load more" position after every memory, so the next page is the first one (as the page's own cursors are).
FAR_CURSOR = base64.urlsafe_b64encode(f"2999-01-01T00:00:00+00:00|{MISSING_UUID}".encode()).decode().rstrip("=")
HTMX = {"HX-Request": "true"}
HTMX_RESULTS = {**HTMX, "HX-Target": "memory-results"}
OK, TOOL_ERROR = 0, 1  # the "status" of an MCP tool answer


@dataclass(frozen=True)
class Target:
    """One object a per-object surface asks about: its id in the path or arguments, and who may open it."""

    ident: str
    opens: Callable[[Who], bool]
    # Opens it in the organization it is asked in (`opens` may also count another of the person's
    # organizations, whose page is a 404 offering to switch); None: the same as `opens`.
    here: Callable[[Who], bool] | None = None


def _memory_by_id(world: World) -> dict[str, Canary]:
    by_id: dict[str, Canary] = {}
    for canary in world.canaries:
        if canary.memory_id and canary.memory_id not in by_id:
            by_id[canary.memory_id] = canary
    return by_id


def memories(world: World) -> list[Target]:
    # A browser session may be told that a memory lives in another of its member's organizations (and
    # offered a switch) exactly when that membership may open it there: `also` holds those memberships.
    def rule(canary: Canary) -> Callable[[Who], bool]:
        return lambda who: canary.opens(who) or any(canary.opens(other) for other in who.also)

    return [Target(mid, rule(canary), canary.opens) for mid, canary in _memory_by_id(world).items()]


def conflicts(world: World) -> list[Target]:
    by_id = _memory_by_id(world)

    def both(new: str, existing: str) -> Callable[[Who], bool]:
        return lambda who: by_id[new].opens(who) and by_id[existing].opens(who)

    return [Target(cid, both(new, existing)) for cid, new, existing in world.conflicts]


def entities(world: World) -> list[Target]:
    by_word = world.word_index()
    return [Target(str(pk), by_word[ticket.lower()].allowed) for ticket, pk in world.entity_ids.items()]


def entity_names(world: World) -> list[Target]:
    by_word = world.word_index()
    return [Target(ticket, by_word[ticket.lower()].allowed) for ticket in world.entity_ids]


def jobs(world: World) -> list[Target]:
    job = next(c for c in world.canaries if c.key == "job")
    return [Target(world.job_id, job.allowed)]


def connectors(world: World) -> list[Target]:
    rule = {c.key: c.allowed for c in world.canaries}
    return [
        Target(world.connector_id, rule["connector-acme"]),
        Target(world.sales_connector_id, rule["connector-acme-sales"]),
        Target(world.globex_connector_id, rule["connector-globex"]),
    ]


def authors(world: World) -> list[Target]:
    rule = {c.key: c.allowed for c in world.canaries}
    return [Target(name, rule[key]) for name, key in world.authors.items()]


def connector_runs(world: World) -> list[Target]:
    # One id in the path: "<connector id>/runs/<run id>", each run under its own connector.
    return [Target(f"{target.ident}/runs/{world.runs[target.ident]}", target.opens) for target in connectors(world)]


def audit_events(world: World) -> list[Target]:
    rule = {c.key: c.allowed for c in world.canaries}
    return [Target(str(event_id), rule[key]) for key, event_id in world.audit_event_ids.items()]


def redaction_requests(world: World) -> list[Target]:
    request = next(c for c in world.canaries if c.key == "redaction-request")
    return [Target(world.redaction_request_id, request.opens)]


def scopes(world: World) -> list[Target]:
    def reads(slug: str, org: str) -> Callable[[Who], bool]:
        return lambda who: who.usable and who.org == org and slug in who.readable

    return [Target(slug, reads(slug, "acme")) for slug in ACME_SCOPES if slug != "public-docs"] + [
        Target("g-secret", reads("g-secret", "globex"))
    ]


@dataclass(frozen=True)
class One:
    name: str
    call: tuple[Any, ...]  # REST: (method, path, data); UI: (path, query[, headers]); MCP: (tool, arguments)
    complete: bool = False


@dataclass(frozen=True)
class Each:
    name: str
    targets: Callable[[World], list[Target]]
    call: tuple[Any, ...]  # as One, with "{id}" wherever the object's id goes
    missing: str = MISSING_UUID
    hidden_only: bool = False
    opened_status: int | None = None  # the status an object the principal may open must answer
    every: bool = False  # asked about every object even in the sampled (`make test`) run


Surface = One | Each

# -- REST (a bearer token) ------------------------------------------------------------------------------
REST: list[Surface] = [
    One("me", ("GET", "/api/me", None)),
    One("scopes", ("GET", "/api/scopes", None)),
    One("list", ("GET", "/api/memories", {"limit": 50}), complete=True),
    One("list-history", ("GET", "/api/memories", {"limit": 50, "status": "all"})),
    One("recall", ("POST", "/api/recall", {"query": SHARED_QUERY, "limit": 50}), complete=True),
    One("recall-get", ("GET", "/api/recall", {"q": SHARED_QUERY, "limit": 50})),
    One("ask", ("POST", "/api/ask", {"question": f"What is the {SHARED_QUERY}?", "limit": 8})),
    One("conflicts", ("GET", "/api/conflicts", {"status": "all"})),
    One("entities", ("GET", "/api/entities", {"limit": 50})),
    One("entities-search", ("GET", "/api/entities", {"q": "ZQK", "limit": 50})),
    One("connectors", ("GET", "/api/connectors", None)),
    One("audit", ("GET", "/api/audit", {"limit": 200})),
    One("audit-export", ("GET", "/api/audit/export", None)),
    One("audit-verify", ("GET", "/api/audit/verify", None)),
    One("redaction-requests", ("GET", "/api/redaction-requests", None)),
    Each("memory", memories, ("GET", "/api/memories/{id}", None), opened_status=200),
    Each("memory-malformed-id", memories, ("GET", "/api/memories/{id}", None), missing="not-a-uuid"),
    Each("list-by-scope", scopes, ("GET", "/api/memories", {"scope": "{id}"}), missing=MISSING_SCOPE),
    Each("list-by-author", authors, ("GET", "/api/memories", {"author": "{id}"}), missing=MISSING_AUTHOR),
    Each("recall-in-scope", scopes, ("POST", "/api/recall", {"query": SHARED_QUERY, "scopes": ["{id}"]}), missing=MISSING_SCOPE),
    Each("ask-in-scope", scopes, ("POST", "/api/ask", {"question": SHARED_QUERY, "scopes": ["{id}"]}), missing=MISSING_SCOPE),
    Each(
        "remember-in-scope",
        scopes,
        ("POST", "/api/memories", {"content": "x", "scope": "{id}"}),
        missing=MISSING_SCOPE,
        hidden_only=True,
    ),
    Each("conflict", conflicts, ("GET", "/api/conflicts/{id}", None)),
    Each("job", jobs, ("GET", "/api/jobs/{id}", None)),
    Each("entity", entities, ("GET", "/api/entities/{id}", None), missing=MISSING_INT),
    Each("connector", connectors, ("GET", "/api/connectors/{id}", None)),
    Each("connector-runs", connectors, ("GET", "/api/connectors/{id}/runs", None)),
    Each("connector-run", connector_runs, ("GET", "/api/connectors/{id}", None), missing=MISSING_RUN),
    Each("supersede", memories, ("POST", "/api/memories/{id}/supersede", {"content": "new words"}), hidden_only=True),
    Each("patch", memories, ("PATCH", "/api/memories/{id}", {"tags": ["x"]}), hidden_only=True),
    Each("redact", memories, ("POST", "/api/memories/{id}/redact", {"reason": "why"}), hidden_only=True),
    Each("restore", memories, ("POST", "/api/memories/{id}/restore", None), hidden_only=True),
    Each("request-redaction", memories, ("POST", "/api/memories/{id}/redaction-requests", {"reason": "why"}), hidden_only=True),
    Each("delete", memories, ("DELETE", "/api/memories/{id}", None), hidden_only=True),
    Each("resolve", conflicts, ("POST", "/api/conflicts/{id}/resolve", {"resolution": "keep_both"}), hidden_only=True),
    Each("reopen", conflicts, ("POST", "/api/conflicts/{id}/reopen", {"note": "why"}), hidden_only=True),
    Each(
        "decide-redaction",
        redaction_requests,
        ("POST", "/api/redaction-requests/{id}/decide", {"decision": "decline"}),
        hidden_only=True,
    ),
]

# -- the browser (a signed-in session) ------------------------------------------------------------------
UI: list[Surface] = [
    One("home", ("/", None)),
    One("memories", ("/memories/", None)),
    One("memories-history", ("/memories/", {"status": "all"})),
    One("search", ("/memories/", {"q": SHARED_QUERY})),
    One("memories-htmx", ("/memories/", None, HTMX_RESULTS)),
    One("memories-htmx-history", ("/memories/", {"status": "all"}, HTMX_RESULTS)),
    One("search-htmx", ("/memories/", {"q": SHARED_QUERY}, HTMX_RESULTS)),
    One("memories-more", ("/memories/", {"cursor": FAR_CURSOR}, HTMX)),
    One("memories-more-history", ("/memories/", {"cursor": FAR_CURSOR, "status": "all"}, HTMX)),
    One("authors", ("/memories/authors/", None)),
    One("authors-typed", ("/memories/authors/", {"author": "zq"})),
    One("ask", ("/ask/", {"q": f"What is the {SHARED_QUERY}?"})),
    One("entities", ("/entities/", None)),
    One("activity", ("/activity/", None)),
    One("conflicts", ("/conflicts/", {"status": "all"})),
    One("redaction-requests", ("/redaction-requests/", None)),
    One("audit", ("/audit/", None)),
    One("audit-export", ("/audit/export/", {"format": "jsonl"})),
    One("export", ("/settings/export/", {"status": "all"})),
    One("connectors", ("/connectors/", None)),
    One("settings", ("/settings/", None)),
    One("settings-scopes", ("/settings/", {"tab": "scopes"})),
    Each("memory", memories, ("/memories/{id}/", None), opened_status=200),
    Each("memory-edit", memories, ("/memories/{id}/edit/", None)),
    Each("entity", entities, ("/entities/{id}/", None), missing=MISSING_INT),
    Each("conflict", conflicts, ("/conflicts/{id}/", None)),
    Each("job", jobs, ("/briefs/jobs/{id}/", None)),
    Each("connector", connectors, ("/connectors/{id}/", None)),
    Each("connector-card", connectors, ("/connectors/{id}/card/", None)),
    Each("connector-card-htmx", connectors, ("/connectors/{id}/card/", None, HTMX)),
    Each("audit-event", audit_events, ("/audit/{id}/", None), missing=MISSING_INT),
    Each("audit-event-drawer", audit_events, ("/audit/{id}/", None, HTMX), missing=MISSING_INT),
    Each("memories-in-scope", scopes, ("/memories/", {"scope": "{id}"}), missing=MISSING_SCOPE),
    Each("memories-by-author", authors, ("/memories/", {"author": "{id}"}), missing=MISSING_AUTHOR),
    Each("memories-by-author-htmx", authors, ("/memories/", {"author": "{id}"}, HTMX_RESULTS), missing=MISSING_AUTHOR),
    Each("authors-typed-name", authors, ("/memories/authors/", {"author": "{id}"}), missing=MISSING_AUTHOR),
    Each("export-scope", scopes, ("/settings/export/", {"scope": "{id}"}), missing=MISSING_SCOPE),
]

# -- MCP (the official client against the live endpoint) ------------------------------------------------
MCP: list[Surface] = [
    One("recall", ("recall", {"query": SHARED_QUERY, "limit": 50}), complete=True),
    One("recall-packed", ("recall", {"query": SHARED_QUERY, "limit": 50, "max_tokens": 4000})),
    One("list_memories", ("list_memories", {"limit": 50}), complete=True),
    One("list_scopes", ("list_scopes", {})),
    One("recall_timeline", ("recall_timeline", {"limit": 50})),
    Each("get_memory", memories, ("get_memory", {"id": "{id}"}), opened_status=OK),
    Each("recall_about", entity_names, ("recall_about", {"entity": "{id}", "limit": 50}), missing=MISSING_ENTITY),
    Each("list_memories-in-scope", scopes, ("list_memories", {"scope": "{id}", "limit": 50}), missing=MISSING_SCOPE),
    Each("recall-in-scope", scopes, ("recall", {"query": SHARED_QUERY, "scopes": ["{id}"]}), missing=MISSING_SCOPE),
    Each("remember-in-scope", scopes, ("remember", {"content": "x", "scope": "{id}"}), missing=MISSING_SCOPE, hidden_only=True),
    Each("supersede", memories, ("supersede", {"id": "{id}", "content": "new words"}), hidden_only=True),
    Each("redact", memories, ("redact", {"id": "{id}", "reason": "why"}), hidden_only=True),
    Each("request_redaction", memories, ("request_redaction", {"id": "{id}", "reason": "why"}), hidden_only=True),
]


def fill(value: Any, ident: str) -> Any:
    """The call with the object's id put wherever "{id}" stands."""
    if isinstance(value, str):
        return value.replace("{id}", ident)
    if isinstance(value, list):
        return [fill(v, ident) for v in value]
    if isinstance(value, tuple):
        return tuple(fill(v, ident) for v in value)
    if isinstance(value, dict):
        return {k: fill(v, ident) for k, v in value.items()}
    return value


@dataclass
class Answer:
    """What one request answered, flattened for searching: status, body and the headers that carry data."""

    status: int
    text: str
    request_id: str = ""
    data: Any = None

    def normalised(self, ident: str) -> tuple[int, str]:
        """Status and body with this object's id, the request id and per-response tokens set aside."""
        text = self.text
        if self.request_id:
            text = text.replace(self.request_id, "<RID>")
        if ident.isdigit() and len(ident) < 6:
            # A short number (an entity id) only where it is an id: in a path.
            text = re.sub(rf"(?<=/){ident}(?=[/?\"'#]|$)", "<ID>", text)
        elif ident:
            text = re.sub(rf"(?<![\w-]){re.escape(ident)}(?![\w-])", "<ID>", text)
        text = re.sub(r'("X-CSRFToken": ")[^"]*', r"\1", text)
        text = re.sub(r'nonce="[^"]*"', 'nonce=""', text)
        text = re.sub(r'(csrfmiddlewaretoken" value=")[^"]*', r"\1", text)
        text = re.sub(r'("csrf[-_]token"[^>]*content=")[^"]*', r"\1", text)
        text = re.sub(r'"request_id": ?"[^"]*"', '"request_id": ""', text)
        return self.status, text


@dataclass
class Check:
    """Everything one principal was shown on one channel, and what was wrong with it."""

    who: Who
    requests: int = 0
    canaries_checked: int = 0
    problems: list[str] = field(default_factory=list)

    def leaks(self, world: World, label: str, answer: Answer, *, sent: str = "") -> None:
        """Canaries in the answer beyond the principal's rights; what the principal itself sent (an
        entity name, a scope slug echoed in an error) is no leak and is set aside first."""
        self.requests += 1
        self.canaries_checked += len(world.canaries)
        text = re.sub(re.escape(sent), "", answer.text, flags=re.IGNORECASE) if sent else answer.text
        for leak in world.leaks(self.who, text):
            self.problems.append(f"{label}: shows {leak} (status {answer.status})")

    def complete(self, world: World, label: str, answer: Answer, org: str) -> None:
        text = answer.text.lower()
        missing = sorted(
            key
            for key in world.listed_for(self.who, org)
            if not any(w.lower() in text for w in next(c for c in world.canaries if c.key == key).words)
        )
        if missing:
            self.problems.append(f"{label}: does not show {missing} (status {answer.status})")


# `make test` asks each principal about a rotating sample of each kind's objects (every object is
# still asked about by some principal); the reliability step sets CORTEX_LEAK_FULL=1 for all of them.
SAMPLE_HIDDEN, SAMPLE_OPENED = 2, 1


def _sample(targets: list[Target], who: Who, *, full: bool) -> list[Target]:
    if full:
        return targets
    hidden = [t for t in targets if not t.opens(who)]
    opened = [t for t in targets if t.opens(who)]
    start = int(hashlib.sha256(who.name.encode()).hexdigest(), 16)

    def rotate(items: list[Target], count: int) -> list[Target]:
        if len(items) <= count:
            return items
        step = len(items) / count
        return [items[(start + int(i * step)) % len(items)] for i in range(count)]

    return rotate(hidden, SAMPLE_HIDDEN) + rotate(opened, SAMPLE_OPENED)


def full_run() -> bool:
    return os.environ.get("CORTEX_LEAK_FULL", "") == "1"


def run_surfaces(world: World, who: Who, table: Iterable[Surface], ask: Callable[[tuple[Any, ...]], Answer], org: str) -> Check:
    """Ask every surface of a table as `who`; collect leaks, existence leaks and incomplete lists."""
    check = Check(who)
    full = full_run()
    for surface in table:
        if isinstance(surface, One):
            answer = ask(surface.call)
            check.leaks(world, surface.name, answer)
            if surface.complete and who.usable:
                check.complete(world, surface.name, answer, org)
            continue
        missing = ask(fill(surface.call, surface.missing))
        check.leaks(world, f"{surface.name}[missing]", missing)
        for target in _sample(surface.targets(world), who, full=full or surface.every):
            hidden = not target.opens(who)
            if surface.hidden_only and not hidden:
                continue
            answer = ask(fill(surface.call, target.ident))
            label = f"{surface.name}[{target.ident}]"
            check.leaks(world, label, answer, sent=target.ident)
            opened_here = (target.here or target.opens)(who)
            if opened_here and who.usable and surface.opened_status is not None and answer.status != surface.opened_status:
                check.problems.append(f"{label}: may be opened but answers {answer.status} {answer.text[:200]!r}")
            if hidden and answer.normalised(target.ident) != missing.normalised(surface.missing):
                difference = _difference(answer, target.ident, missing, surface.missing)
                check.problems.append(f"{label}: answers otherwise than a missing one: {difference}")
    return check


def _difference(answer: Answer, ident: str, missing: Answer, missing_ident: str) -> str:
    (status, text), (missing_status, missing_text) = answer.normalised(ident), missing.normalised(missing_ident)
    if status != missing_status:
        return f"status {status} {text[:200]!r} vs {missing_status} {missing_text[:200]!r}"
    lines = difflib.unified_diff(missing_text.splitlines(), text.splitlines(), lineterm="", n=0)
    return " | ".join(list(lines)[2:8])


def json_text(data: Any) -> str:
    return json.dumps(data, ensure_ascii=False, sort_keys=True, default=str)

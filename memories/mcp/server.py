"""The MCP tools — remember, recall, list_memories, get_memory, list_scopes, supersede, redact,
recall_about, recall_timeline — on the SDK's MCPServer.

A tool is an interface like a REST view: it checks its arguments with the same input
serializers REST uses, turns the bearer token into the Principal, makes one service or
selector call and renders the answer twice: `structuredContent` (checked against the tool's
output schema) and a readable text whose results end with their citations. Nothing here
queries memories itself.

Errors are tool errors (`isError`), never protocol errors or 500s: a CortexError keeps its
`error_code` and `message`; an unknown tool, an unknown or malformed argument and a crash get
codes of their own. Every tool call is audited once as `mcp.call` (tool, outcome, error code)
besides what the services audit; the HTTP request's request id ties them together. A NotFound
that hid an existing object is also recorded in its owner's log (memories.services.denials).
"""

from __future__ import annotations

import json
import logging
import math
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any

from django.conf import settings
from mcp import MCPError
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.server.mcpserver.tools import Tool
from mcp.types import INVALID_PARAMS, CallToolResult, GetPromptResult, InputRequiredResult, TextContent, ToolAnnotations
from pydantic import BaseModel, Field, ValidationError
from rest_framework import serializers

from audit.context import current_request_id
from audit.models import AuditEvent
from audit.services import Actor, record
from cortex_site.api import token_throttle_wait
from cortex_site.errors import CortexError, NotAuthenticated, NotFound, PermissionDenied, RateLimited, ValidationFailed
from cortex_site.moments import parse_moment
from cortex_site.text import storable
from memories.access import Principal, clearance_name, clearance_names
from memories.interchange.inputs import MemoryCreateInput, RecallInput, SupersedeInput, recall_query
from memories.interchange.representation import citation, cite_text, iso, present_memory, redaction
from memories.mcp import schemas
from memories.mcp.auth import ApiTokenVerifier, actor_for, principal_for
from memories.mcp.threads import in_worker_thread
from memories.models import Memory
from memories.retrieval.packing import MIN_MAX_TOKENS, estimate_tokens, pack
from memories.selectors.entities import entity_memories, entity_named
from memories.selectors.memories import MemoryFilters, memory_for_history, memory_list, memory_timeline, supersession_chain
from memories.selectors.recall import MAX_LIMIT, recall
from memories.services import memories as services
from memories.services.denials import denial_record
from memories.services.read_events import memory_list_audit, memory_read_audit
from memories.services.redactions import redaction_request_create

logger = logging.getLogger(__name__)

SOURCE = "MCP"
PREVIEW_CHARS = 200

INSTRUCTIONS = """\
Cortex is your team's memory: decisions, policies, incidents, merged PRs, threads and notes,
each with a source you can cite. What you can see and write is decided by the token you
connected with.

- Before answering a question about how the team works or what it decided, call `recall`
  and cite what you use (each result ends with its citation). Give `max_tokens` to get an
  answer that fits your context: full content for the best, previews for the next.
- Store durable knowledge — a decision, a policy, the outcome of an incident, a fact others will
  need — with `remember`, with its source when you have one. Never store chit-chat, secrets
  (keys, passwords, tokens) or personal data. `list_scopes` tells where a memory would land and
  who reads each scope; the answer of `remember` says who can read what you stored.
- When a memory is outdated, `supersede` it with the new version; `redact` only what must go.
- `recall_about` gives a dossier on a person, system or team; `recall_timeline` the dated
  memories of a period; `list_memories` shows what is new; `get_memory` reads one in full.
"""


# -- running a tool --------------------------------------------------------------------------------
@dataclass(frozen=True)
class Answer:
    """A tool's successful result before it goes on the wire."""

    data: BaseModel
    text: str
    target_type: str = ""
    target_id: str = ""


def memory_url(memory_id: Any) -> str:
    return f"{settings.CORTEX_BASE_URL}/memories/{memory_id}/"


def tool_error(error_code: str, message: str, details: dict[str, Any] | None = None) -> CallToolResult:
    """An `isError` result carrying the REST error envelope as structured content."""
    body = {
        "error_code": error_code,
        "message": message,
        "request_id": current_request_id() or "",
        # Round-trip through JSON: details may hold DRF ErrorDetails, dates, uuids.
        "details": json.loads(json.dumps(details or {}, default=str)),
    }
    return CallToolResult(
        content=[TextContent(type="text", text=f"{error_code}: {message}")], structured_content=body, is_error=True
    )


def _outcome(exc: CortexError) -> str:
    if isinstance(exc, PermissionDenied | NotAuthenticated):
        return AuditEvent.Outcome.DENIED
    return AuditEvent.Outcome.ERROR


def _audit_call(
    tool: str, organization: Any, actor: Actor, outcome: str, *, error_code: str = "", target_type: str = "", target_id: str = ""
) -> None:
    record(
        "mcp.call",
        organization=organization,
        actor=actor,
        target_type=target_type,
        target_id=target_id,
        outcome=outcome,
        # The name of an unknown tool is the caller's text, which may hold what jsonb cannot (a NUL).
        details={"tool": storable(tool[:100]), "outcome": outcome, "error_code": error_code or None},
    )


def run_tool(tool: str, access: AccessToken | None, work: Callable[[Principal], Answer]) -> CallToolResult:
    """One tool body, in a worker thread: Principal from the token, the work, the `mcp.call` event.

    A CortexError becomes a tool error with its code and message. Anything else is a bug and
    propagates: CortexMCPServer.call_tool logs it and answers INTERNAL_ERROR.
    """
    principal: Principal | None = None
    try:
        if access is None:  # the SDK refuses unauthenticated requests before this; be explicit anyway
            raise NotAuthenticated("A bearer token is required.", error_code="NOT_AUTHENTICATED")
        principal = principal_for(access)
        wait = token_throttle_wait(principal.token)
        if wait is not None:
            seconds = math.ceil(wait)
            raise RateLimited(
                f"Too many calls with this token (the limit is shared with its REST calls); retry in {seconds} s.",
                details={"retry_after_seconds": seconds},
            )
        answer = work(principal)
    except CortexError as exc:
        organization, actor = (principal.organization_id, principal.actor) if principal else actor_for(access)
        _audit_call(tool, organization, actor, _outcome(exc), error_code=exc.error_code)
        if principal is not None and isinstance(exc, NotFound):
            # A hidden object's owner learns of the probe (memories.services.denials); 403s are in mcp.call.
            denial_record(exc, principal=principal, via="mcp", path=f"tool:{tool[:100]}")
        return tool_error(exc.error_code, exc.message, exc.details)
    _audit_call(
        tool,
        principal.organization_id,
        principal.actor,
        AuditEvent.Outcome.OK,
        target_type=answer.target_type,
        target_id=answer.target_id,
    )
    return CallToolResult(
        content=[TextContent(type="text", text=answer.text)],
        structured_content=answer.data.model_dump(mode="json"),
    )


async def _call(tool: str, work: Callable[[Principal], Answer]) -> CallToolResult:
    # All of a tool's database work runs in one worker thread, never on the event loop.
    return await in_worker_thread(run_tool)(tool, get_access_token(), work)


def _validated(serializer_class: type[serializers.Serializer], data: dict[str, Any]) -> dict[str, Any]:
    """Arguments checked by REST's own input serializer, so both interfaces accept the same values."""
    serializer = serializer_class(data=data)
    if not serializer.is_valid():
        field, problems = next(iter(serializer.errors.items()))
        # A list's errors are keyed by the item's position ({1: ["…"]}): name it as `scopes.1`.
        while isinstance(problems, dict) and problems:
            position, problems = next(iter(problems.items()))
            field = f"{field}.{position}"
        problem = problems[0] if isinstance(problems, list) and problems else problems
        raise ValidationFailed(f"{field}: {problem}", error_code="VALIDATION_ERROR", details={"fields": serializer.errors})
    return dict(serializer.validated_data)


# -- remember --------------------------------------------------------------------------------------
_RESOLUTION_WORDS = {
    services.ScopeResolution.EXPLICIT: "the scope you gave",
    services.ScopeResolution.TOKEN_DEFAULT: "your token's default scope",
    services.ScopeResolution.SOURCE_RULE: "the organization's rule for MCP memories",
    services.ScopeResolution.DEFAULT: "the default scope",
}


NO_DEFAULT_SCOPE = "remember needs a scope: the default one is not among the scopes this token can read"


def readers(memory: Memory) -> str:
    """Who can read a memory, in words: the scope's audience and the lowest clearance."""
    rung = clearance_name(memory.organization_id, memory.clearance_rank)
    if memory.scope.visibility == memory.scope.Visibility.ALL_MEMBERS:
        audience = f"every member of the organization with clearance {rung} or above"
    else:
        audience = f"members granted the scope {memory.scope.slug} with clearance {rung} or above"
    return audience


def _remember(principal: Principal, arguments: dict[str, Any]) -> Answer:
    fields = _validated(MemoryCreateInput, {name: value for name, value in arguments.items() if value is not None})
    fields["source"] = SOURCE  # the author is the token's user: memory_create takes it from the principal
    result = services.memory_create(principal=principal, draft=services.MemoryDraft(**fields))
    memory = result.memory
    resolution = result.scope_resolution
    data = schemas.RememberOutput(
        id=str(memory.pk),
        title=memory.title,
        scope=memory.scope.slug,
        scope_resolution=resolution,  # type: ignore[arg-type]
        readers=readers(memory),
        status=memory.status,
        deduplicated=result.deduplicated,
        url=memory_url(memory.pk),
    )
    if result.deduplicated:
        text = f'Already remembered: "{memory.title}" holds this content in scope {memory.scope.slug}; nothing new was stored.'
    else:
        text = f'Remembered "{memory.title}" in scope {memory.scope.slug} (chosen by {_RESOLUTION_WORDS[resolution]}).'
    text += f"\nWho can read it: {data.readers}."
    text += f"\nid: {memory.pk} · status: {memory.status}\n{data.url}"
    return Answer(data, text, "memory", str(memory.pk))


async def remember(
    content: Annotated[str, Field(description="What to remember. Plain text or Markdown; long documents are fine.")],
    title: Annotated[str | None, Field(description="A short title. Derived from the first line of content when omitted.")] = None,
    scope: Annotated[
        str | None,
        Field(
            description=(
                "Scope slug, e.g. engineering (list_scopes shows yours). When omitted: your token's default "
                "scope, else the organization's rule for MCP, else public-docs — which every member reads."
            )
        ),
    ] = None,
    category: Annotated[str | None, Field(description="One word such as decision, policy, incident, note (the default).")] = None,
    tags: Annotated[list[str] | None, Field(description="Up to 20 tags, e.g. ['api', 'security'].")] = None,
    source_url: Annotated[str | None, Field(description="Link to where this knowledge comes from (http or https).")] = None,
    clearance_min: Annotated[
        str | None,
        Field(description="Lowest clearance that may read it, e.g. Employee. At most your own; the lowest rung when omitted."),
    ] = None,
    valid_from: Annotated[
        str | None,
        Field(
            description="When this became true (ISO 8601, e.g. 2025-01-15T10:30:00Z). Defaults to now.",
            json_schema_extra={"format": "date-time"},
        ),
    ] = None,
    valid_until: Annotated[
        str | None,
        Field(description="When this stops being true (ISO 8601), if it expires.", json_schema_extra={"format": "date-time"}),
    ] = None,
) -> Annotated[CallToolResult, schemas.RememberOutput]:
    """Store a memory for your team: a decision, a policy, an incident's outcome, a fact others
    will need — with its source (source_url) when you have one. Do not store chit-chat, secrets
    (keys, passwords, tokens) or personal data. Returns its id, the scope it landed in, how that
    scope was chosen, who can read it, and its page in Cortex."""
    arguments = {
        "content": content,
        "title": title,
        "scope": scope,
        "category": category,
        "tags": tags,
        "source_url": source_url,
        "clearance_min": clearance_min,
        "valid_from": valid_from,
        "valid_until": valid_until,
    }
    return await _call("remember", lambda principal: _remember(principal, arguments))


# -- recall ----------------------------------------------------------------------------------------
def _recall(principal: Principal, arguments: dict[str, Any], max_tokens: int | None = None) -> Answer:
    values = _validated(RecallInput, {name: value for name, value in arguments.items() if value is not None})
    query = recall_query(values)
    try:
        found = recall(principal, query)
        hits, took_ms, confident = found.hits, found.took_ms, found.confident
    except ValidationFailed as exc:
        if exc.error_code != "EMPTY_QUERY":
            raise
        hits, took_ms, confident = [], 0.0, False  # an agent sending nothing gets nothing, not an error
    count = f"{len(hits)} memor{'y' if len(hits) == 1 else 'ies'}"
    header = (
        f'{count} for "{query.query}", best first:'
        if confident
        else f'No confident match for "{query.query}" — the {count} closest (weak matches, probably not the answer):'
    )
    lines, tiers, dropped = pack(header, list(hits), max_tokens, cite=cite_text)
    results = [
        schemas.RecallHit(
            rank=rank,
            id=str(hit.memory.pk),
            title=hit.memory.title,
            snippet=hit.snippet,
            score=hit.score,
            relevance=hit.relevance,
            recency=hit.recency,
            match=hit.match,
            confidence=hit.confidence,
            scope=hit.memory.scope.slug,
            url=memory_url(hit.memory.pk),
            citation=schemas.Citation(**citation(hit.memory)),
            earlier_version_id=str(hit.earlier_version.pk) if hit.earlier_version is not None else None,
            content=hit.memory.content if tiers.get(str(hit.memory.pk)) == "full" else None,
        )
        for rank, hit in enumerate(hits, start=1)
        if str(hit.memory.pk) in tiers
    ]
    text = "\n".join(lines)
    packing = None
    if max_tokens is not None:
        packing = schemas.Packing(
            max_tokens=max_tokens,
            used_tokens=estimate_tokens(text),
            full=[i for i, t in tiers.items() if t == "full"],
            preview=[i for i, t in tiers.items() if t == "preview"],
            dropped=dropped,
        )
    data = schemas.RecallOutput(
        query=query.query, limit=query.limit, results=results, confident=confident, took_ms=took_ms, packing=packing
    )
    if not hits:
        return Answer(data, f'No memories you can see match "{query.query}".')
    return Answer(data, text)


async def recall_tool(
    query: Annotated[
        str, Field(description="What you want to know, in your own words or with exact terms (names, ids, error codes).")
    ],
    limit: Annotated[
        int,
        Field(description=f"How many memories to return, 1–{MAX_LIMIT} (as in REST, others are refused).", ge=1, le=MAX_LIMIT),
    ] = 5,
    scopes: Annotated[
        list[str] | None, Field(description="Only these scopes (slugs). Default: every scope you can read.")
    ] = None,
    category: Annotated[str | None, Field(description="Only this category, e.g. decision or policy.")] = None,
    tags: Annotated[list[str] | None, Field(description="Only memories carrying all of these tags.")] = None,
    max_tokens: Annotated[
        int | None,
        Field(
            description=(
                f"Fit the answer into this many tokens (at least {MIN_MAX_TOKENS}): full content for the best results, "
                "snippets for the next, the rest listed by id."
            ),
            ge=MIN_MAX_TOKENS,
        ),
    ] = None,
) -> Annotated[CallToolResult, schemas.RecallOutput]:
    """Search your team's memory. Returns the best-matching memories you may see, ranked by
    0.7·relevance + 0.3·recency, each with a snippet and a citation to quote."""
    arguments = {"query": query, "limit": limit, "scopes": scopes, "category": category, "tags": tags}
    return await _call("recall", lambda principal: _recall(principal, arguments, max_tokens))


# -- list_memories ---------------------------------------------------------------------------------
def _preview(content: str) -> str:
    flat = " ".join(content.split())
    return flat if len(flat) <= PREVIEW_CHARS else flat[:PREVIEW_CHARS].rsplit(" ", 1)[0] + "…"


def _list_memories(principal: Principal, limit: int, scope: str | None, category: str | None) -> Answer:
    filters = MemoryFilters(scope=scope or None, category=category or None)
    memories = list(memory_list(principal, filters)[:limit])
    memory_list_audit(principal=principal, filters=filters, memories=memories, via="mcp")
    results = [
        schemas.MemorySummary(
            id=str(m.pk),
            title=m.title,
            scope=m.scope.slug,
            category=m.category,
            source=m.source,
            tags=list(m.tags),
            valid_from=iso(m.valid_from),
            created_at=iso(m.created_at),
            preview=_preview(m.content),
            url=memory_url(m.pk),
            citation=schemas.Citation(**citation(m)),
        )
        for m in memories
    ]
    data = schemas.ListMemoriesOutput(limit=limit, results=results)
    if not memories:
        return Answer(data, "No memories you can see" + (" match these filters." if scope or category else " yet."))
    lines = [f"The {len(memories)} most recent memories you can see, newest first:"]
    for rank, m in enumerate(memories, start=1):
        lines += [
            "",
            f"[{rank}] {m.title} ({m.category}, scope {m.scope.slug})",
            f"    {_preview(m.content)}",
            f"    Cite: {cite_text(m)}",
        ]
    return Answer(data, "\n".join(lines))


async def list_memories(
    limit: Annotated[
        int, Field(description=f"How many, 1–{MAX_LIMIT} (as in REST, others are refused).", ge=1, le=MAX_LIMIT)
    ] = 20,
    scope: Annotated[str | None, Field(description="Only this scope (slug).")] = None,
    category: Annotated[str | None, Field(description="Only this category.")] = None,
) -> Annotated[CallToolResult, schemas.ListMemoriesOutput]:
    """The most recent memories you can see, newest first."""
    return await _call("list_memories", lambda principal: _list_memories(principal, limit, scope, category))


# -- get_memory ------------------------------------------------------------------------------------
def _get_memory(principal: Principal, memory_id: str) -> Answer:
    memory = memory_for_history(principal, _memory_id(memory_id))
    memory_read_audit(principal=principal, memory=memory, via="mcp")
    chain = supersession_chain(principal, memory)
    redacted = redaction(memory)
    data = schemas.MemoryDetail(
        **present_memory(principal, memory),  # links to versions the reader cannot see are null
        citation=schemas.Citation(**citation(memory)),
        history=[schemas.HistoryEntry(id=str(m.pk), title=m.title, status=m.status, valid_from=iso(m.valid_from)) for m in chain],
        redaction=schemas.Redaction(**redacted) if redacted else None,
        url=memory_url(memory.pk),
    )
    lines = [
        f"# {memory.title}",
        f"scope {data.scope} · category {data.category} · clearance {data.clearance_min} · status {data.status}"
        + (f" · tags {', '.join(data.tags)}" if data.tags else ""),
        f"valid from {data.valid_from}" + (f" until {data.valid_until}" if data.valid_until else ""),
        "",
        memory.content,
        "",
        f"Cite: {cite_text(memory)}",
    ]
    if len(chain) > 1:
        lines += ["", "Versions, oldest first:"]
        lines += [
            f"  - {m.title} ({m.status}, {iso(m.valid_from)}) {m.pk}" + ("  ← this one" if m.pk == memory.pk else "")
            for m in chain
        ]
    lines += ["", data.url]
    return Answer(data, "\n".join(lines), "memory", str(memory.pk))


async def get_memory(
    id: Annotated[str, Field(description="The memory's id (a UUID), as returned by recall, list_memories or remember.")],
) -> Annotated[CallToolResult, schemas.MemoryDetail]:
    """Read one memory in full: content, citation and its versions (supersession chain)."""
    return await _call("get_memory", lambda principal: _get_memory(principal, id))


# -- list_scopes -----------------------------------------------------------------------------------
def resolve_default_scope_slug(principal: Principal) -> tuple[str | None, str]:
    """Where `remember` without a scope lands by the organization's rules, and the rule in words.

    None when that scope is one the principal cannot read (a token narrowed to other scopes, a
    token default whose grant was revoked): remember refuses it as UNKNOWN_SCOPE without naming it,
    and so does this answer.
    """
    try:
        scope, resolution = services.resolve_scope(principal, None, SOURCE)
    except PermissionDenied as exc:  # read-only, or the rule's scope is not writable: still say where
        return str(exc.details.get("scope", "")), _RESOLUTION_WORDS[str(exc.details.get("resolution", "default"))]
    except NotFound:
        return None, NO_DEFAULT_SCOPE
    return scope.slug, _RESOLUTION_WORDS[resolution]


def _list_scopes(principal: Principal) -> Answer:
    writable = principal.writable_scope_ids
    ladder = clearance_names(principal.organization_id)
    default, rule = resolve_default_scope_slug(principal)
    scopes = [
        schemas.ScopeInfo(slug=sc.slug, name=sc.name, visibility=sc.visibility, can_write=sc.pk in writable)  # type: ignore[arg-type]
        for sc in principal.readable_scopes()
    ]
    data = schemas.ListScopesOutput(
        organization=principal.organization.name,
        clearance=principal.clearance,
        clearance_ladder=[ladder[rank] for rank in sorted(ladder)],
        scopes=scopes,
        read_only=principal.read_only,
        default_scope=default,
        default_scope_rule=rule,
    )
    lines = [
        f"Organization {data.organization}; your clearance is {data.clearance} (ladder: {' < '.join(data.clearance_ladder)}).",
        *(["Read-only: you can recall but not remember or change."] if data.read_only else []),
        f"remember without a scope stores into {default} ({rule})." if default else f"{rule}.",
        "",
        "Scopes you can read:",
        *[
            f"  - {sc.slug} — {sc.name}: "
            + ("every member reads it" if sc.visibility == "all_members" else "only members granted it read it")
            + ("; you can write" if sc.can_write else "; read only for you")
            for sc in scopes
        ],
    ]
    return Answer(data, "\n".join(lines))


async def list_scopes() -> Annotated[CallToolResult, schemas.ListScopesOutput]:
    """The scopes you can read and write, the clearance ladder, and where `remember` lands by default."""
    return await _call("list_scopes", _list_scopes)


# -- supersede and redact ---------------------------------------------------------------------------
def _memory_id(memory_id: str) -> str:
    try:
        return str(uuid.UUID(str(memory_id)))
    except ValueError:
        raise ValidationFailed(
            f"{str(memory_id)[:60]!r} is not a memory id (a UUID, as recall and list_memories return).",
            error_code="INVALID_ARGUMENTS",
        ) from None


def _supersede(principal: Principal, memory_id: str, arguments: dict[str, Any]) -> Answer:
    fields = _validated(SupersedeInput, {name: value for name, value in arguments.items() if value is not None})
    result = services.memory_supersede(principal=principal, memory_id=_memory_id(memory_id), changes=fields)
    memory = result.memory
    data = schemas.ChangeOutput(
        id=str(memory.pk), status=memory.status, replaces=_memory_id(memory_id), url=memory_url(memory.pk)
    )
    if result.proposal is not None:
        text = (
            f'Proposed "{memory.title}" as a revision of {data.replaces}: you do not have the authority to supersede its '
            "author's memory, so the earlier version stays current until someone with that authority accepts it "
            f"(conflict {result.proposal.pk}).\n{data.url}"
        )
        return Answer(data, text, "memory", str(memory.pk))
    text = f'"{memory.title}" now replaces the earlier version ({data.replaces}); recall finds the new one.\n{data.url}'
    return Answer(data, text, "memory", str(memory.pk))


async def supersede(
    id: Annotated[str, Field(description="The id of the memory the new version replaces.")],
    content: Annotated[str | None, Field(description="The new content. Carried over from the old version when omitted.")] = None,
    title: Annotated[str | None, Field(description="The new title, if it changes.")] = None,
    tags: Annotated[list[str] | None, Field(description="The new tags, if they change.")] = None,
    source_url: Annotated[str | None, Field(description="Where the new version comes from.")] = None,
) -> Annotated[CallToolResult, schemas.ChangeOutput]:
    """Replace an outdated memory with a new version: the old one leaves recall but keeps its
    history. Use it when a decision or policy changed — not to add unrelated knowledge."""
    arguments = {"content": content, "title": title, "tags": tags, "source_url": source_url}
    return await _call("supersede", lambda principal: _supersede(principal, id, arguments))


def _redact(principal: Principal, memory_id: str, reason: str, urgent: bool) -> Answer:
    try:
        memory = services.memory_redact(principal=principal, memory_id=_memory_id(memory_id), reason=reason, urgent=urgent)
    except PermissionDenied as exc:
        if exc.error_code != "REDACTION_NOT_ALLOWED":
            raise
        raise PermissionDenied(
            f"{exc.message} Call request_redaction with this id and your reason: the author and the admins decide.",
            error_code=exc.error_code,
            details={**exc.details, "instead": "request_redaction"},
        ) from None
    data = schemas.ChangeOutput(id=str(memory.pk), status=memory.status, url=memory_url(memory.pk))
    return Answer(
        data,
        f"Redacted memory {memory.pk}: its content is gone from search; who, when and why are kept.",
        "memory",
        str(memory.pk),
    )


async def redact(
    id: Annotated[str, Field(description="The id of the memory to redact.")],
    reason: Annotated[str, Field(description="Why it must go (e.g. it holds a secret or personal data).")],
    urgent: Annotated[
        bool, Field(description="Final at once (a leaked secret, personal data); otherwise an admin can restore it for a while.")
    ] = False,
) -> Annotated[CallToolResult, schemas.ChangeOutput]:
    """Remove a memory's content from Cortex for good (it holds a secret, personal data, or is
    wrong and harmful). Irreversible; prefer supersede for knowledge that merely changed."""
    return await _call("redact", lambda principal: _redact(principal, id, reason, urgent))


def _request_redaction(principal: Principal, memory_id: str, reason: str) -> Answer:
    request = redaction_request_create(principal=principal, memory_id=_memory_id(memory_id), reason=reason)
    data = schemas.RedactionRequestOutput(id=str(request.pk), memory_id=str(request.memory_id), status=request.status)
    text = (
        f"Asked for memory {request.memory_id} to be redacted (request {request.pk}); its author and the admins "
        "see it in their review queue and decide. It stays readable until then."
    )
    return Answer(data, text, "memory", str(request.memory_id))


async def request_redaction(
    id: Annotated[str, Field(description="The id of the memory that should be redacted.")],
    reason: Annotated[str, Field(description="Why it should go (a secret, personal data, wrong and harmful).")],
) -> Annotated[CallToolResult, schemas.RedactionRequestOutput]:
    """Ask the memory's author and admins to redact a memory you may read but not redact yourself."""
    return await _call("request_redaction", lambda principal: _request_redaction(principal, id, reason))


# -- recall_about and recall_timeline ----------------------------------------------------------------
def _entry(memory: Memory) -> schemas.DossierEntry:
    return schemas.DossierEntry(
        id=str(memory.pk),
        title=memory.title,
        scope=memory.scope.slug,
        category=memory.category,
        valid_from=iso(memory.valid_from),
        preview=_preview(memory.content),
        url=memory_url(memory.pk),
        citation=schemas.Citation(**citation(memory)),
    )


def _entry_lines(rank: int, memory: Memory) -> list[str]:
    return [
        "",
        f"[{rank}] {(iso(memory.valid_from) or '')[:10]} {memory.title} ({memory.category}, scope {memory.scope.slug})",
        f"    {_preview(memory.content)}",
        f"    Cite: {cite_text(memory)}",
    ]


def _recall_about(principal: Principal, name: str, limit: int) -> Answer:
    entity = entity_named(principal, name)
    memories = list(entity_memories(principal, entity).select_related("scope", "author").order_by("-valid_from", "-id")[:limit])
    data = schemas.RecallAboutOutput(entity=entity.name, kind=entity.kind, results=[_entry(m) for m in memories])
    lines = [
        f"{entity.name} ({entity.kind}): {len(memories)} memor{'y' if len(memories) == 1 else 'ies'} you can see, newest first:"
    ]
    for rank, memory in enumerate(memories, start=1):
        lines += _entry_lines(rank, memory)
    return Answer(data, "\n".join(lines))


async def recall_about(
    entity: Annotated[str, Field(description="A person, system, team, customer or repository, by name.")],
    limit: Annotated[int, Field(description=f"How many memories, 1–{MAX_LIMIT} (others are refused).", ge=1, le=MAX_LIMIT)] = 20,
) -> Annotated[CallToolResult, schemas.RecallAboutOutput]:
    """A dossier: the memories you can see that mention an entity, newest first (from the entity graph)."""
    return await _call("recall_about", lambda principal: _recall_about(principal, entity, limit))


def _moment(value: str | None, name: str) -> datetime | None:
    if not value:
        return None
    try:
        return parse_moment(value.strip())
    except ValueError:
        raise ValidationFailed(
            f"{name}: give an ISO 8601 date or time, e.g. 2025-01-15.", error_code="INVALID_ARGUMENTS"
        ) from None


def _recall_timeline(principal: Principal, since: str | None, until: str | None, scope: str | None, limit: int) -> Answer:
    start, end = _moment(since, "since"), _moment(until, "until")
    memories = list(memory_timeline(principal, since=start, until=end, scope=scope)[:limit])
    data = schemas.TimelineOutput(
        since=iso(start) if start else None, until=iso(end) if end else None, results=[_entry(m) for m in memories]
    )
    period = f"from {since or 'the beginning'} until {until or 'now'}"
    lines = [f"{len(memories)} memor{'y' if len(memories) == 1 else 'ies'} you can see {period}, oldest first:"]
    for rank, memory in enumerate(memories, start=1):
        lines += _entry_lines(rank, memory)
    return Answer(data, "\n".join(lines))


async def recall_timeline(
    since: Annotated[str | None, Field(description="From this date or time (ISO 8601), inclusive.")] = None,
    until: Annotated[str | None, Field(description="Until this date or time (ISO 8601), exclusive.")] = None,
    scope: Annotated[str | None, Field(description="Only this scope (slug).")] = None,
    limit: Annotated[int, Field(description=f"How many memories, 1–{MAX_LIMIT} (others are refused).", ge=1, le=MAX_LIMIT)] = 20,
) -> Annotated[CallToolResult, schemas.TimelineOutput]:
    """Dated memories in the order they happened (by when each became true), oldest first."""
    return await _call("recall_timeline", lambda principal: _recall_timeline(principal, since, until, scope, limit))


# -- the server ------------------------------------------------------------------------------------
def _tool(fn: Callable[..., Any], name: str, title: str, annotations: ToolAnnotations) -> Tool:
    tool = Tool.from_function(fn, name=name, title=title, annotations=annotations)
    # Like REST's strict serializers: an argument the tool does not know is an error, not ignored.
    tool.parameters["additionalProperties"] = False
    return tool


def _read_only(title: str) -> ToolAnnotations:
    return ToolAnnotations(title=title, read_only_hint=True, idempotent_hint=True, open_world_hint=False)


def tools() -> list[Tool]:
    return [
        _tool(
            remember,
            "remember",
            "Remember",
            ToolAnnotations(
                title="Remember", read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False
            ),
        ),
        _tool(recall_tool, "recall", "Recall", _read_only("Recall")),
        _tool(list_memories, "list_memories", "List recent memories", _read_only("List recent memories")),
        _tool(get_memory, "get_memory", "Get a memory", _read_only("Get a memory")),
        _tool(list_scopes, "list_scopes", "List scopes", _read_only("List scopes")),
        _tool(recall_about, "recall_about", "Recall about an entity", _read_only("Recall about an entity")),
        _tool(recall_timeline, "recall_timeline", "Recall a timeline", _read_only("Recall a timeline")),
        _tool(
            supersede,
            "supersede",
            "Supersede a memory",
            ToolAnnotations(
                title="Supersede a memory",
                read_only_hint=False,
                destructive_hint=True,
                idempotent_hint=False,
                open_world_hint=False,
            ),
        ),
        _tool(
            request_redaction,
            "request_redaction",
            "Request redaction",
            ToolAnnotations(
                title="Request redaction",
                read_only_hint=False,
                destructive_hint=False,
                idempotent_hint=False,
                open_world_hint=False,
            ),
        ),
        _tool(
            redact,
            "redact",
            "Redact a memory",
            ToolAnnotations(
                title="Redact a memory", read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=False
            ),
        ),
    ]


def _holds_nul(value: Any) -> bool:
    """Whether an argument's text (a string, or a list of them: the tools take nothing deeper) holds a NUL."""
    if isinstance(value, str):
        return "\x00" in value
    return isinstance(value, list) and any(isinstance(item, str) and "\x00" in item for item in value)


def _argument_problem(error: ValidationError) -> str:
    # Field names and pydantic's sentence only: the rejected values are the caller's data.
    return "; ".join(f"{'.'.join(str(p) for p in e['loc']) or 'arguments'}: {e['msg']}" for e in error.errors())


class CortexMCPServer(MCPServer):
    """MCPServer whose tool calls always answer with a Cortex tool error and are always audited.

    The SDK refuses an unknown tool or bad arguments before our tool runs (as ToolError) and
    wraps a crash in UnexpectedToolError; those are turned into tool errors with an
    `error_code` here, and audited as `mcp.call`, since `run_tool` never saw them.
    """

    def __init__(self, name: str, *, tools: list[Tool], **kwargs: Any) -> None:
        super().__init__(name, tools=tools, **kwargs)
        # Tool name → the argument names its input schema declares.
        self._arguments = {tool.name: set(tool.parameters.get("properties", {})) for tool in tools}

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None = None
    ) -> CallToolResult | InputRequiredResult:
        known = self._arguments.get(name)
        if known is None:
            offered = ", ".join(self._arguments)
            return await self._refused(name, "UNKNOWN_TOOL", f"Unknown tool {name[:100]!r}. Cortex offers: {offered}.")
        unknown = sorted(set(arguments) - known)
        if unknown:
            takes = f"takes: {', '.join(sorted(known))}" if known else "takes no arguments"
            message = f"Unknown argument{'s' if len(unknown) > 1 else ''}: {', '.join(unknown)}. {name} {takes}."
            return await self._refused(name, "INVALID_ARGUMENTS", message, {"unknown": unknown})
        holding_nul = next((argument for argument, value in arguments.items() if _holds_nul(value)), None)
        if holding_nul is not None:
            # As REST refuses such a query parameter (cortex_site.middleware.NulInQueryMiddleware): as a
            # filter it could only fail its query, as text it could never be stored.
            message = f"{holding_nul} holds a NUL character, which no text in Cortex can hold."
            return await self._refused(name, "INVALID_ARGUMENTS", message, {"argument": holding_nul})
        try:
            return await super().call_tool(name, arguments, context)
        except UnexpectedToolError:
            logger.exception("MCP tool %s crashed", name)
            return await self._refused(
                name,
                "INTERNAL_ERROR",
                "Something went wrong on our side; the request id identifies it in the logs.",
                outcome=AuditEvent.Outcome.ERROR,
            )
        except ToolError as exc:
            cause = exc.__cause__
            problem = _argument_problem(cause) if isinstance(cause, ValidationError) else str(exc)
            return await self._refused(name, "INVALID_ARGUMENTS", f"Invalid arguments for {name}: {problem}")

    async def get_prompt(
        self, name: str, arguments: dict[str, Any] | None = None, context: Context[Any, Any] | None = None
    ) -> GetPromptResult | InputRequiredResult:
        # The SDK answers an unknown prompt with error code 0 and logs a traceback; like an unknown
        # resource it is the client's mistake: invalid params. (Cortex offers no prompts.)
        if name not in {prompt.name for prompt in await self.list_prompts()}:
            raise MCPError(code=INVALID_PARAMS, message=f"Unknown prompt: {name[:100]}")
        return await super().get_prompt(name, arguments, context)

    async def _refused(
        self,
        name: str,
        error_code: str,
        message: str,
        details: dict[str, Any] | None = None,
        *,
        outcome: str = AuditEvent.Outcome.ERROR,
    ) -> CallToolResult:
        organization, actor = actor_for(get_access_token())
        await in_worker_thread(_audit_call)(name, organization, actor, outcome, error_code=error_code)
        return tool_error(error_code, message, details)


def build_server(*, resource_url: str) -> CortexMCPServer:
    """The MCP server with Cortex's tools, authenticating bearer tokens through the SDK's hook.

    `resource_url` is this endpoint's public URL: the SDK serves its OAuth protected-resource
    metadata and names it in 401 challenges. Tokens are issued by Cortex itself (UI or CLI),
    so Cortex is also named as the authorization server.
    """
    return CortexMCPServer(
        "cortex",
        title="Cortex team memory",
        instructions=INSTRUCTIONS,
        version="1",
        token_verifier=ApiTokenVerifier(),
        auth=AuthSettings(
            issuer_url=settings.CORTEX_BASE_URL,  # type: ignore[arg-type]
            resource_server_url=resource_url,  # type: ignore[arg-type]
            validate_token_resource=False,  # our tokens are not audience-bound; see ApiTokenVerifier
        ),
        tools=tools(),
        warn_on_duplicate_tools=True,
    )

"""The structured output of each MCP tool: these models are the tools' published output schemas."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from memories.retrieval.scoring import Confidence


class Citation(BaseModel):
    """What an agent quotes when it uses a memory (the same citation REST recall returns)."""

    title: str
    source: str = Field(description="Where the memory came from: MCP, API, Manual, GitHub, Slack, …")
    source_url: str | None = Field(description="Link to the original item, when there is one.")
    author: str | None
    valid_from: str | None = Field(description="The date the memory speaks for (ISO 8601).")
    scope: str


class RememberOutput(BaseModel):
    id: str
    title: str
    scope: str
    scope_resolution: Literal["explicit", "token_default", "source_rule", "default"] = Field(
        description=(
            "How the scope was chosen: the scope you gave, your token's default scope, the organization's rule "
            "for the source, or the default scope."
        )
    )
    readers: str = Field(description="Who can read the memory: the scope's audience and the lowest clearance.")
    status: str
    deduplicated: bool = Field(
        description="True when identical content was already stored; that memory is returned and nothing new is written."
    )
    url: str = Field(description="The memory's page in Cortex.")


class RecallHit(BaseModel):
    rank: int
    id: str
    title: str
    snippet: str = Field(description="The best-matching passage of the memory.")
    score: float = Field(description="0.7 · relevance + 0.3 · recency.")
    relevance: float = Field(description="Relative to this recall's best candidate (1 = the best).")
    recency: float
    match: float = Field(description="Absolute match strength in [0, 1], comparable across queries.")
    confidence: Confidence = Field(description="match ≥ 0.75 strong, ≥ 0.38 partial, else weak.")
    scope: str
    url: str
    citation: Citation
    earlier_version_id: str | None = Field(
        default=None, description="Set when this memory was found through an earlier (superseded) version of it that matched."
    )
    content: str | None = Field(default=None, description="The full content, when max_tokens packing gave this memory in full.")


class RecallOutput(BaseModel):
    query: str
    limit: int
    results: list[RecallHit]
    confident: bool = Field(description="False when no result is at least a partial match: only the closest memories.")
    took_ms: float
    packing: Packing | None = Field(default=None, description="How the results were fitted into max_tokens, when given.")


class MemorySummary(BaseModel):
    id: str
    title: str
    scope: str
    category: str
    source: str
    tags: list[str]
    valid_from: str | None
    created_at: str | None
    preview: str = Field(description="The beginning of the content.")
    url: str
    citation: Citation


class ListMemoriesOutput(BaseModel):
    limit: int
    results: list[MemorySummary]


class Author(BaseModel):
    id: str | None
    name: str
    given_by: str | None = Field(default=None, description="import or connector when a source stated the name")


class HistoryEntry(BaseModel):
    id: str
    title: str
    status: str
    valid_from: str | None


class Redaction(BaseModel):
    redacted_at: str | None
    redacted_by: str | None
    reason: str
    held_until: str | None = Field(default=None, description="Until when an admin can restore it; null once final")


class MemoryDetail(BaseModel):
    """The memory shape of DESIGN.md §4, with its citation, its versions and its page."""

    id: str
    title: str
    content: str
    scope: str
    category: str
    source: str
    source_url: str | None
    author: Author
    tags: list[str]
    clearance_min: str
    status: str
    valid_from: str | None
    valid_until: str | None
    created_at: str | None
    updated_at: str | None
    supersedes: str | None
    superseded_by: str | None
    citation: Citation
    history: list[HistoryEntry] = Field(description="The supersession chain you can see, oldest first (this memory included).")
    redaction: Redaction | None
    url: str


class ScopeInfo(BaseModel):
    slug: str
    name: str
    visibility: Literal["all_members", "granted"] = Field(
        description="all_members: every member of the organization reads it; granted: only members given access."
    )
    can_write: bool = Field(description="Whether you (with this token) may remember into it.")


class ListScopesOutput(BaseModel):
    organization: str
    clearance: str = Field(description="Your clearance: you read memories at or below it and may label new ones up to it.")
    clearance_ladder: list[str] = Field(description="The organization's clearance rungs, lowest first.")
    scopes: list[ScopeInfo]
    read_only: bool = Field(description="True when this token may only read.")
    default_scope: str | None = Field(
        description="Where `remember` stores a memory when you give no scope; null when it needs one (see the rule)."
    )
    default_scope_rule: str = Field(
        description="Why that is the default (the token's default, or the organization's), or why there is none."
    )


class Packing(BaseModel):
    max_tokens: int
    used_tokens: int = Field(description="Estimated tokens of the text answer (4 characters a token), never above max_tokens.")
    full: list[str] = Field(description="Ids given with their full content.")
    preview: list[str] = Field(description="Ids given with their snippet only; call get_memory for the rest.")
    dropped: list[str] = Field(description="Ids that matched but did not fit; call get_memory to read them.")


class DossierEntry(BaseModel):
    id: str
    title: str
    scope: str
    category: str
    valid_from: str | None
    preview: str
    url: str
    citation: Citation


class RecallAboutOutput(BaseModel):
    entity: str
    kind: str
    results: list[DossierEntry] = Field(description="Memories you can see that mention the entity, newest first.")


class TimelineOutput(BaseModel):
    since: str | None
    until: str | None
    results: list[DossierEntry] = Field(description="Dated memories you can see, oldest first.")


class ChangeOutput(BaseModel):
    id: str = Field(description="The memory now current: the new version (supersede) or the redacted one (redact).")
    status: str
    replaces: str | None = Field(default=None, description="For supersede: the id of the version it replaced.")
    url: str


class RedactionRequestOutput(BaseModel):
    id: str = Field(description="The request's id.")
    memory_id: str
    status: str = Field(description="open until the author or an admin approves (redacts) or declines it.")

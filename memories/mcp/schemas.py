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
    scope_resolution: Literal["explicit", "source_rule", "default"] = Field(
        description="How the scope was chosen: the scope you gave, the organization's rule for the source, or the default scope."
    )
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


class RecallOutput(BaseModel):
    query: str
    limit: int
    results: list[RecallHit]
    confident: bool = Field(description="False when no result is at least a partial match: only the closest memories.")
    took_ms: float


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


class HistoryEntry(BaseModel):
    id: str
    title: str
    status: str
    valid_from: str | None


class Redaction(BaseModel):
    redacted_at: str | None
    redacted_by: str | None
    reason: str


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

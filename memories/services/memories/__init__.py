"""The write pipeline and the memory lifecycle: create, supersede, patch, redact, delete.

Every write path — REST, UI, MCP, CLI import, connectors — calls `memory_create` (or
`memory_create_many` for a batch, or one of the lifecycle services), so the same rules hold
everywhere:

  validate → resolve scope → may the principal write there (no write-up) and is clearance_min
  at most its clearance → idempotency / exact duplicate → chunk → embed every chunk in one
  batch → one transaction (memory, chunks, audit event) → post-write work on commit.

Embedding happens before the transaction (for a batch with an in-process model, on a worker
thread while the transaction writes the memory rows, and before anything commits): a provider
failure stores nothing (503, EMBEDDING_UNAVAILABLE) and a retry is safe.

Split by concept — `validation`, `scopes` (scope resolution), `pipeline` (create), `lifecycle`
(supersede, patch, redact, delete, reinstate) — and re-exported here, so callers import from
`memories.services.memories`.
"""

from memories.services.memories.lifecycle import (
    REDACTED_CONTENT,
    REDACTED_TITLE,
    REDACTION_HOOKS,
    RedactionHook,
    memory_activate_proposal,
    memory_delete,
    memory_patch,
    memory_redact,
    memory_reinstate,
    memory_restore,
    memory_supersede,
    memory_supersede_with_existing,
    redaction_holds_finalise,
    register_redaction_hook,
)
from memories.services.memories.pipeline import MemoryDraft, WriteResult, embedding_text, memory_create, memory_create_many
from memories.services.memories.scopes import DEFAULT_SOURCE_RULES, ScopeResolution, resolve_scope
from memories.services.memories.validation import (
    MAX_TAGS,
    check_validity,
    clean_category,
    clean_source,
    clean_source_url,
    clearance_rank_of,
    content_hash,
    derive_title,
    normalise_tags,
)

__all__ = [
    "DEFAULT_SOURCE_RULES",
    "MAX_TAGS",
    "REDACTED_CONTENT",
    "REDACTED_TITLE",
    "REDACTION_HOOKS",
    "MemoryDraft",
    "RedactionHook",
    "ScopeResolution",
    "WriteResult",
    "check_validity",
    "clean_category",
    "clean_source",
    "clean_source_url",
    "clearance_rank_of",
    "content_hash",
    "derive_title",
    "embedding_text",
    "memory_activate_proposal",
    "memory_create",
    "memory_create_many",
    "memory_delete",
    "memory_patch",
    "memory_redact",
    "memory_reinstate",
    "memory_restore",
    "memory_supersede",
    "memory_supersede_with_existing",
    "normalise_tags",
    "redaction_holds_finalise",
    "register_redaction_hook",
    "resolve_scope",
]

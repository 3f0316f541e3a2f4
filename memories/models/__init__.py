from memories.models.memory import DEFAULT_EMBEDDING_DIM, EmbeddingSignature, Memory, MemoryChunk, SourceScopeRule
from memories.models.tenancy import (
    DEFAULT_CLEARANCE_LADDER,
    PUBLIC_DOCS_SLUG,
    ApiToken,
    ClearanceLevel,
    Membership,
    Organization,
    Scope,
    ScopeGrant,
    User,
)

__all__ = [
    "DEFAULT_CLEARANCE_LADDER",
    "DEFAULT_EMBEDDING_DIM",
    "PUBLIC_DOCS_SLUG",
    "ApiToken",
    "ClearanceLevel",
    "EmbeddingSignature",
    "Membership",
    "Memory",
    "MemoryChunk",
    "Organization",
    "Scope",
    "ScopeGrant",
    "SourceScopeRule",
    "User",
]

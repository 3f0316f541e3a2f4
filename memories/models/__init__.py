from memories.models.conflicts import Conflict
from memories.models.entities import Entity, EntityMention, Relation
from memories.models.jobs import Job
from memories.models.memory import (
    DEFAULT_EMBEDDING_DIM,
    EmbeddingSignature,
    Memory,
    MemoryChunk,
    SourceScopeRule,
    TermCount,
)
from memories.models.oauth import OAuthGrant
from memories.models.redactions import RedactionHold, RedactionRequest
from memories.models.tenancy import (
    DEFAULT_CLEARANCE_LADDER,
    PUBLIC_DOCS_SLUG,
    ApiToken,
    ApiTokenScope,
    ClearanceLevel,
    Invite,
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
    "ApiTokenScope",
    "ClearanceLevel",
    "Conflict",
    "EmbeddingSignature",
    "Entity",
    "EntityMention",
    "Invite",
    "Job",
    "Membership",
    "Memory",
    "MemoryChunk",
    "OAuthGrant",
    "Organization",
    "RedactionHold",
    "RedactionRequest",
    "Relation",
    "Scope",
    "ScopeGrant",
    "SourceScopeRule",
    "TermCount",
    "User",
]

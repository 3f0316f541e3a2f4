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
    "PUBLIC_DOCS_SLUG",
    "ApiToken",
    "ClearanceLevel",
    "Membership",
    "Organization",
    "Scope",
    "ScopeGrant",
    "User",
]

"""Which scope a new memory lands in: the explicit one, else a per-organization source rule, else public-docs."""

from __future__ import annotations

from collections.abc import Mapping

from cortex_site.errors import NotFound, PermissionDenied
from memories.access import Principal
from memories.models import PUBLIC_DOCS_SLUG, Scope, SourceScopeRule

DEFAULT_SOURCE_RULES = {"GitHub": "engineering"}


class ScopeResolution:
    EXPLICIT = "explicit"
    TOKEN_DEFAULT = "token_default"  # noqa: S105 - a rule name, not a secret
    SOURCE_RULE = "source_rule"
    DEFAULT = "default"


def resolve_scope(
    principal: Principal, explicit: str | None, source: str, *, by_slug: Mapping[str, Scope] | None = None
) -> tuple[Scope, str]:
    """Which scope a new memory lands in, and which rule decided; refuses scopes it may not write.

    The order: the scope given → the token's default scope (set when an agent was connected) →
    the organization's rule for the source → public-docs.

    A scope the principal cannot read is reported exactly like a missing one (UNKNOWN_SCOPE, 400),
    whether it was named or chosen by a rule or the token's default, so granted scopes do not leak
    their existence (the built-in GitHub → engineering rule skips an engineering the writer cannot
    see, as in an organization without one). A rule never widens: when the rule's scope is readable
    but not writable the write is refused rather than moved to a broader scope.

    `by_slug`: the organization's scopes by slug, when a batch has read them once.
    """
    if explicit:
        if by_slug is not None:
            scope = by_slug.get(explicit)
        else:
            scope = Scope.objects.filter(organization_id=principal.organization_id, slug=explicit).first()
        if scope is None or not principal.can_read_scope(scope):
            raise NotFound(f"Unknown scope {explicit!r}.", error_code="UNKNOWN_SCOPE", details={"scope": explicit})
        resolution = ScopeResolution.EXPLICIT
    elif principal.token is not None and principal.token.default_scope is not None:
        scope, resolution = principal.token.default_scope, ScopeResolution.TOKEN_DEFAULT
    else:
        scope, resolution = _scope_by_rule(principal, source)
    if not principal.can_read_scope(scope):
        # A rule (or a token's default) may point at a scope this writer cannot see: answer exactly as
        # an unknown scope does — same code, same status, same details — and never name it.
        raise NotFound(
            f"Unknown scope for {source!r} memories: name a scope you can write.",
            error_code="UNKNOWN_SCOPE",
            details={"scope": None},
        )
    if not principal.can_write_scope(scope):
        reason = "this token is read-only" if principal.read_only else "you can read it but not write to it"
        raise PermissionDenied(
            f"You cannot write to scope {scope.slug!r}: {reason}.",
            error_code="SCOPE_NOT_WRITABLE",
            details={"scope": scope.slug, "resolution": resolution},
        )
    return scope, resolution


def _scope_by_rule(principal: Principal, source: str) -> tuple[Scope, str]:
    rule = (
        SourceScopeRule.objects.filter(organization_id=principal.organization_id, source__iexact=source)
        .select_related("scope")
        .first()
    )
    if rule is not None:
        return rule.scope, ScopeResolution.SOURCE_RULE
    default_slug = next((slug for src, slug in DEFAULT_SOURCE_RULES.items() if src.lower() == source.lower()), None)
    if default_slug:
        scope = Scope.objects.filter(organization_id=principal.organization_id, slug=default_slug).first()
        # The built-in rule applies only where its scope exists for this writer: one it cannot see
        # behaves as in an organization without that scope, so refusing would reveal it.
        if scope is not None and principal.can_read_scope(scope):
            return scope, ScopeResolution.SOURCE_RULE
    return Scope.objects.get(organization_id=principal.organization_id, slug=PUBLIC_DOCS_SLUG), ScopeResolution.DEFAULT

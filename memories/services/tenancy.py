"""Writes to the tenancy model: organizations, members, scopes, grants, tokens.

Each service takes `by`: the Principal acting (checked here) or None for an operator at the
CLI (trusted, audited as `cli`). Multi-row writes are one transaction; every change is audited.
"""

from __future__ import annotations

import hashlib
import secrets
from datetime import datetime
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import Model
from django.utils import timezone

from audit.services import Actor, record
from cortex_site.errors import Conflict, NotFound, PermissionDenied, ValidationFailed
from memories.access import Operator, Principal, clearance_names
from memories.models import (
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
from memories.models.tenancy import slug_validator

TOKEN_PREFIX = "ctx"  # noqa: S105 - the public prefix of every token, not a secret


def _actor(by: Principal | Operator | None) -> Actor:
    return by.actor if by is not None else Actor.cli()


def _require_admin(by: Principal | Operator | None, organization: Organization) -> None:
    """`by` administers `organization` (None is the operator at the console, like an `Operator`)."""
    if by is None:
        return
    if by.organization_id != organization.pk:
        raise NotFound("Organization not found.")
    by.require_admin()


def _is_self(by: Principal | Operator | None, membership: Membership) -> bool:
    """Whether `by` is that member acting on themself (the operator never is)."""
    return isinstance(by, Principal) and by.membership.pk == membership.pk


def _require_within_rung(by: Principal | Operator | None, membership: Membership) -> None:
    """An admin acts only on members at or below their own clearance rung.

    Without this a Manager-clearance admin could demote or remove an Executive: the admin role
    manages the organization, it does not outrank the ladder.
    """
    if by is None or isinstance(by, Operator) or membership.clearance_rank <= by.clearance_rank:
        return  # the operator (CLI) manages every member
    names = clearance_names(membership.organization_id)
    raise PermissionDenied(
        f"{membership.user.email} holds {names.get(membership.clearance_rank, membership.clearance_rank)} clearance, "
        f"above your {names.get(by.clearance_rank, by.clearance_rank)}: only an admin at that rung or higher can change "
        "or remove them.",
        error_code="MEMBER_ABOVE_OWN_CLEARANCE",
        details={"member": membership.user.email},
    )


def _check_name(value: str, model: type[Model], what: str) -> str:
    """A display name that fits the model's column (stripped), or ValidationFailed(NAME_TOO_LONG)."""
    field = model._meta.get_field("name")
    limit = getattr(field, "max_length", None) or 0
    name = value.strip()
    if len(name) > limit:
        raise ValidationFailed(f"{what} is {len(name)} characters; at most {limit}.", error_code="NAME_TOO_LONG")
    return name


def _check_slug(value: str, field: str) -> str:
    from django.core.exceptions import ValidationError

    try:
        slug_validator(value)
    except ValidationError:
        raise ValidationFailed(
            f"{value!r} is not a valid {field}: use 1–50 lowercase letters, digits and hyphens.",
            error_code="INVALID_SLUG",
            details={field: value},
        ) from None
    return value


def clearance_rank_for(organization: Organization, name: str) -> int:
    """The rank of a rung by name (case-insensitive), or a clear error listing the ladder."""
    ladder = list(ClearanceLevel.objects.filter(organization=organization).order_by("rank"))
    for level in ladder:
        if level.name.lower() == name.strip().lower():
            return level.rank
    raise NotFound(
        f"Unknown clearance {name!r}. This organization's ladder is: {' < '.join(level.name for level in ladder)}.",
        error_code="UNKNOWN_CLEARANCE",
        details={"clearance": name, "ladder": [level.name for level in ladder]},
    )


# -- organizations -------------------------------------------------------------------------
@transaction.atomic
def organization_create(
    *, slug: str, name: str = "", ladder: tuple[str, ...] = DEFAULT_CLEARANCE_LADDER, by_actor: Actor | None = None
) -> Organization:
    """Create a tenant with its clearance ladder and the default `public-docs` scope."""
    _check_slug(slug, "organization slug")
    name = _check_name(name, Organization, "The organization's name")
    if Organization.objects.filter(slug=slug).exists():
        raise Conflict(f"An organization with slug {slug!r} already exists.", error_code="ORGANIZATION_EXISTS")
    try:
        with transaction.atomic():
            organization = Organization.objects.create(slug=slug, name=name.strip() or slug)
    except IntegrityError:
        # Lost a race with a concurrent create of the same slug.
        raise Conflict(f"An organization with slug {slug!r} already exists.", error_code="ORGANIZATION_EXISTS") from None
    ClearanceLevel.objects.bulk_create(
        ClearanceLevel(organization=organization, name=rung, rank=index) for index, rung in enumerate(ladder)
    )
    Scope.objects.create(
        organization=organization,
        slug=PUBLIC_DOCS_SLUG,
        name="Public docs",
        description="Readable by every member; the default scope for new memories.",
        visibility=Scope.Visibility.ALL_MEMBERS,
    )
    record(
        "organization.create",
        organization=organization,
        actor=by_actor or Actor.cli(),
        target_type="organization",
        target_id=organization.slug,
        details={"name": organization.name, "ladder": list(ladder)},
    )
    return organization


# -- members -----------------------------------------------------------------------------
@transaction.atomic
def member_add(
    *,
    organization: Organization,
    email: str,
    clearance: str,
    role: str = Membership.Role.MEMBER,
    name: str = "",
    password: str | None = None,
    check_password_strength: bool = True,
    by: Principal | Operator | None = None,
) -> Membership:
    """Add a person to an organization, creating their user account if it does not exist yet.

    The operator's path (CLI, fixtures): people invited from the browser go through
    `accounts.invite_create` and set their own password. A password given here passes Django's
    validators unless `check_password_strength` is False (only the demo, whose password is published).
    Adding someone who is already a member is an error, never a duplicate.
    """
    _require_admin(by, organization)
    email = email.strip().lower()
    if "@" not in email or len(email) > 254:
        raise ValidationFailed(f"{email!r} is not an email address.", error_code="INVALID_EMAIL")
    if role not in Membership.Role.values:
        raise ValidationFailed(f"Unknown role {role!r}; use member or admin.", error_code="INVALID_ROLE")
    name = _check_name(name, User, "The person's name")
    rank = clearance_rank_for(organization, clearance)
    if by is not None and rank > by.clearance_rank:
        raise PermissionDenied("You cannot grant a clearance above your own.", error_code="CLEARANCE_ABOVE_OWN")
    user = User.objects.filter(email__iexact=email).first()
    created_user = user is None
    if user is None:
        if password and check_password_strength:
            from memories.services.accounts import check_password

            check_password(password, user=User(email=email, name=name.strip()))
        user = User.objects.create_user(email, password=password, name=name.strip())
    elif password:
        raise ValidationFailed(f"{email} already has an account; their password is theirs to change.", error_code="USER_EXISTS")
    if Membership.objects.filter(user=user, organization=organization).exists():
        raise Conflict(f"{email} is already a member of {organization.slug}.", error_code="MEMBER_EXISTS")
    membership = Membership.objects.create(user=user, organization=organization, clearance_rank=rank, role=role)
    record(
        "member.add",
        organization=organization,
        actor=_actor(by),
        target_type="user",
        target_id=user.pk,
        details={"email": email, "clearance": clearance, "role": role, "new_account": created_user},
    )
    return membership


@transaction.atomic
def member_update(
    *, membership: Membership, clearance: str | None = None, role: str | None = None, by: Principal | Operator | None = None
) -> Membership:
    organization = membership.organization
    _require_admin(by, organization)
    _require_within_rung(by, membership)
    changes: dict[str, Any] = {}
    if clearance is not None:
        rank = clearance_rank_for(organization, clearance)
        if by is not None and rank > by.clearance_rank:
            raise PermissionDenied("You cannot grant a clearance above your own.", error_code="CLEARANCE_ABOVE_OWN")
        changes["clearance_rank"] = rank
    if role is not None:
        if role not in Membership.Role.values:
            raise ValidationFailed(f"Unknown role {role!r}; use member or admin.", error_code="INVALID_ROLE")
        if role != Membership.Role.ADMIN and membership.is_admin and _is_last_admin(membership):
            raise Conflict("An organization needs at least one admin.", error_code="LAST_ADMIN")
        changes["role"] = role
    if changes:
        Membership.objects.filter(pk=membership.pk).update(**changes)
        membership.refresh_from_db()
        record(
            "member.update",
            organization=organization,
            actor=_actor(by),
            target_type="user",
            target_id=membership.user_id,
            details={"clearance": clearance, "role": role},
        )
    return membership


def _is_last_admin(membership: Membership) -> bool:
    return (
        not Membership.objects.filter(organization_id=membership.organization_id, role=Membership.Role.ADMIN, deactivated_at=None)
        .exclude(pk=membership.pk)
        .exists()
    )


@transaction.atomic
def member_remove(*, membership: Membership, by: Principal | Operator | None = None) -> None:
    _require_admin(by, membership.organization)
    _require_within_rung(by, membership)
    if membership.is_admin and _is_last_admin(membership):
        raise Conflict("An organization needs at least one admin.", error_code="LAST_ADMIN")
    record(
        "member.remove",
        organization=membership.organization,
        actor=_actor(by),
        target_type="user",
        target_id=membership.user_id,
        details={"email": membership.user.email},
    )
    membership.delete()


# -- scopes and grants -----------------------------------------------------------------------
@transaction.atomic
def scope_create(
    *,
    organization: Organization,
    slug: str,
    name: str = "",
    visibility: str = Scope.Visibility.GRANTED,
    members_can_write: bool = True,
    description: str = "",
    by: Principal | Operator | None = None,
) -> Scope:
    _require_admin(by, organization)
    _check_slug(slug, "scope slug")
    name = _check_name(name, Scope, "The scope's name")
    if visibility not in Scope.Visibility.values:
        raise ValidationFailed(f"Unknown visibility {visibility!r}; use granted or all_members.", error_code="INVALID_VISIBILITY")
    if Scope.objects.filter(organization=organization, slug=slug).exists():
        raise Conflict(f"Scope {slug!r} already exists in {organization.slug}.", error_code="SCOPE_EXISTS")
    try:
        scope = Scope.objects.create(
            organization=organization,
            slug=slug,
            name=name.strip() or slug.replace("-", " ").title(),
            visibility=visibility,
            members_can_write=members_can_write,
            description=description,
        )
    except IntegrityError:
        raise Conflict(f"Scope {slug!r} already exists in {organization.slug}.", error_code="SCOPE_EXISTS") from None
    record(
        "scope.create",
        organization=organization,
        actor=_actor(by),
        target_type="scope",
        target_id=slug,
        details={"visibility": visibility, "members_can_write": members_can_write},
    )
    return scope


@transaction.atomic
def scope_update(
    *,
    scope: Scope,
    name: str | None = None,
    visibility: str | None = None,
    members_can_write: bool | None = None,
    by: Principal | Operator | None = None,
) -> Scope:
    _require_admin(by, scope.organization)
    changes: dict[str, Any] = {}
    if name is not None and name.strip():
        changes["name"] = name.strip()
    if visibility is not None:
        if visibility not in Scope.Visibility.values:
            raise ValidationFailed(
                f"Unknown visibility {visibility!r}; use granted or all_members.", error_code="INVALID_VISIBILITY"
            )
        if scope.slug == PUBLIC_DOCS_SLUG and visibility != Scope.Visibility.ALL_MEMBERS:
            raise ValidationFailed("public-docs is readable by every member by definition.", error_code="PUBLIC_DOCS_FIXED")
        changes["visibility"] = visibility
    if members_can_write is not None:
        changes["members_can_write"] = members_can_write
    if changes:
        Scope.objects.filter(pk=scope.pk).update(**changes)
        scope.refresh_from_db()
        record(
            "scope.update",
            organization=scope.organization,
            actor=_actor(by),
            target_type="scope",
            target_id=scope.slug,
            details=changes,
        )
    return scope


@transaction.atomic
def scope_retire(*, scope: Scope, retired: bool = True, by: Principal | Operator | None = None) -> Scope:
    """Retire a scope (no new writes; what it holds stays readable by the same rules), or bring it back."""
    _require_admin(by, scope.organization)
    if retired and scope.slug == PUBLIC_DOCS_SLUG:
        raise ValidationFailed("public-docs is the default scope and cannot be retired.", error_code="PUBLIC_DOCS_FIXED")
    changed = (
        Scope.objects.filter(pk=scope.pk, retired_at=None).update(retired_at=timezone.now())
        if retired
        else Scope.objects.filter(pk=scope.pk).exclude(retired_at=None).update(retired_at=None)
    )
    if changed != 1:
        raise Conflict(
            f"Scope {scope.slug} is {'already retired' if retired else 'not retired'}.", error_code="SCOPE_RETIRE_STATE"
        )
    scope.refresh_from_db()
    record(
        "scope.retire" if retired else "scope.unretire",
        organization=scope.organization,
        actor=_actor(by),
        target_type="scope",
        target_id=scope.slug,
    )
    return scope


@transaction.atomic
def grant_set(*, membership: Membership, scope: Scope, can_write: bool, by: Principal | Operator | None = None) -> ScopeGrant:
    """Give (or change) a member's access to a scope. Admins granting themselves are audited like anyone."""
    if membership.organization_id != scope.organization_id:
        raise NotFound("Scope not found.", error_code="UNKNOWN_SCOPE")
    _require_admin(by, scope.organization)
    _require_within_rung(by, membership)
    grant, created = ScopeGrant.objects.update_or_create(
        organization_id=membership.organization_id, membership=membership, scope=scope, defaults={"can_write": can_write}
    )
    record(
        "grant.set",
        organization=scope.organization,
        actor=_actor(by),
        target_type="scope",
        target_id=scope.slug,
        details={
            "email": membership.user.email,
            "can_write": can_write,
            "created": created,
            "self_grant": _is_self(by, membership),
        },
    )
    return grant


@transaction.atomic
def grant_revoke(*, membership: Membership, scope: Scope, by: Principal | Operator | None = None) -> None:
    if membership.organization_id != scope.organization_id:
        raise NotFound("Scope not found.", error_code="UNKNOWN_SCOPE")
    _require_admin(by, scope.organization)
    _require_within_rung(by, membership)
    deleted, _ = ScopeGrant.objects.filter(membership=membership, scope=scope).delete()
    if not deleted:
        raise NotFound(f"{membership.user.email} has no grant on {scope.slug}.", error_code="UNKNOWN_GRANT")
    record(
        "grant.revoke",
        organization=scope.organization,
        actor=_actor(by),
        target_type="scope",
        target_id=scope.slug,
        details={"email": membership.user.email},
    )


# -- tokens ----------------------------------------------------------------------------------
def _hash_secret(raw: str) -> str:
    return hashlib.sha256(raw.encode()).hexdigest()


@transaction.atomic
def token_create(
    *,
    membership: Membership,
    name: str,
    scope_slugs: list[str] | None = None,
    read_only: bool = False,
    expires_at: datetime | None = None,
    by: Principal | Operator | None = None,
) -> tuple[ApiToken, str]:
    """Create a token for a membership; returns (token, secret). The secret is never stored.

    People create tokens for themselves; admins may create them for others. A token can only
    narrow: its scopes must be readable by the membership.
    """
    if by is not None and not _is_self(by, membership):
        _require_admin(by, membership.organization)
        _require_within_rung(by, membership)
    if by is not None and by.token is not None:
        raise PermissionDenied("Tokens cannot create tokens; sign in to create one.", error_code="TOKEN_CANNOT_CREATE_TOKEN")
    name = name.strip()
    if not name or len(name) > 100:
        raise ValidationFailed("A token needs a name of 1–100 characters.", error_code="INVALID_NAME")
    if expires_at is not None and expires_at <= timezone.now():
        raise ValidationFailed("The expiry must be in the future.", error_code="INVALID_EXPIRY")
    owner = Principal(membership)
    scopes: list[Scope] = []
    for slug in scope_slugs or []:
        scope = Scope.objects.filter(organization_id=membership.organization_id, slug=slug).first()
        if scope is None or not owner.can_read_scope(scope):
            raise NotFound(f"Unknown scope {slug!r}.", error_code="UNKNOWN_SCOPE", details={"scope": slug})
        scopes.append(scope)
    prefix = secrets.token_hex(4)
    while ApiToken.objects.filter(prefix=prefix).exists():
        prefix = secrets.token_hex(4)
    raw = f"{TOKEN_PREFIX}_{prefix}_{secrets.token_urlsafe(32)}"
    token = ApiToken.objects.create(
        organization_id=membership.organization_id,
        membership=membership,
        name=name,
        prefix=prefix,
        secret_hash=_hash_secret(raw),
        read_only=read_only,
        expires_at=expires_at,
        narrowed=bool(scopes),
    )
    token.scopes.set(scopes, through_defaults={"organization_id": membership.organization_id})
    record(
        "token.create",
        organization=membership.organization,
        actor=_actor(by),
        target_type="token",
        target_id=token.pk,
        details={
            "name": name,
            "prefix": prefix,
            "owner": membership.user.email,
            "scopes": [s.slug for s in scopes],
            "read_only": read_only,
            "expires_at": expires_at,
        },
    )
    return token, raw


@transaction.atomic
def token_revoke(*, token: ApiToken, by: Principal | Operator | None = None) -> ApiToken:
    membership = token.membership
    if by is not None and not _is_self(by, membership):
        _require_admin(by, membership.organization)
        _require_within_rung(by, membership)
    if token.revoked_at is not None:
        raise Conflict(f"Token {token.prefix} is already revoked.", error_code="TOKEN_ALREADY_REVOKED")
    ApiToken.objects.filter(pk=token.pk).update(revoked_at=timezone.now())
    token.refresh_from_db()
    record(
        "token.revoke",
        organization=membership.organization,
        actor=_actor(by),
        target_type="token",
        target_id=token.pk,
        details={"prefix": token.prefix, "owner": membership.user.email},
    )
    return token


def token_authenticate(raw: str) -> ApiToken | None:
    """The usable token a raw secret belongs to, or None (unknown, wrong secret, revoked or expired)."""
    import hmac

    parts = raw.split("_", 2)
    if len(parts) != 3 or parts[0] != TOKEN_PREFIX:
        return None
    token = ApiToken.objects.select_related("membership__organization", "membership__user").filter(prefix=parts[1]).first()
    if token is None or not hmac.compare_digest(token.secret_hash, _hash_secret(raw)):
        return None
    if not token.is_usable() or not token.membership.user.is_active or token.membership.deactivated_at is not None:
        return None
    return token

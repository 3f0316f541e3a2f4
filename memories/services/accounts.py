"""Accounts: invitations, passwords, signing out everywhere, deactivating and reactivating members.

Admins never type someone else's password: they invite an address with the clearance, role and
scope grants chosen up front, and the invitee sets their own password through a single-use,
expiring link. Inviting answers the same whether or not the address has an account elsewhere,
so an admin of one organization cannot probe another's members.
"""

from __future__ import annotations

import hashlib
import secrets
from datetime import timedelta

from django.conf import settings
from django.contrib.auth import password_validation
from django.core.exceptions import ValidationError
from django.core.mail import send_mail
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from audit.services import Actor, record
from cortex_site.errors import Conflict, NotFound, PermissionDenied, ValidationFailed
from memories.access import Principal, clearance_name
from memories.models import ApiToken, Invite, Membership, Organization, Scope, ScopeGrant, User
from memories.services.tenancy import _actor, _is_last_admin, _require_admin, _require_within_rung, clearance_rank_for

INVITE_PATH = "/invite/"


def _hash(raw: str) -> str:
    return hashlib.sha256(raw.encode()).hexdigest()


def normalize_email(email: str) -> str:
    """Emails are compared and stored lowercased: `Ada@Acme.test` and `ada@acme.test` are one person."""
    email = (email or "").strip().lower()
    if "@" not in email or len(email) > 254 or email.startswith("@") or email.endswith("@"):
        raise ValidationFailed(f"{email!r} is not an email address.", error_code="INVALID_EMAIL", details={"email": email})
    return email


def check_password(password: str, *, user: User | None = None) -> None:
    """Django's password validators (length ≥ 12, common passwords, similarity to the email and name)."""
    try:
        password_validation.validate_password(password, user=user)
    except ValidationError as exc:
        raise ValidationFailed(" ".join(exc.messages), error_code="WEAK_PASSWORD", details={"problems": exc.messages}) from None


# -- invites ----------------------------------------------------------------------------------------------
@transaction.atomic
def invite_create(
    *,
    organization: Organization,
    email: str,
    clearance: str,
    role: str = Membership.Role.MEMBER,
    grants: dict[str, bool] | None = None,
    by: Principal | None = None,
) -> tuple[Invite, str]:
    """Invite an address; returns (invite, link). The link is emailed once the transaction commits.

    An earlier pending invite of the same address to the same organization is replaced. Whether
    the address has an account (here or elsewhere) is never looked at: the answer is the same.
    """
    _require_admin(by, organization)
    email = normalize_email(email)
    if role not in Membership.Role.values:
        raise ValidationFailed(f"Unknown role {role!r}; use member or admin.", error_code="INVALID_ROLE")
    rank = clearance_rank_for(organization, clearance)
    if by is not None and rank > by.clearance_rank:
        raise PermissionDenied("You cannot grant a clearance above your own.", error_code="CLEARANCE_ABOVE_OWN")
    chosen: dict[str, bool] = {}
    for slug, can_write in (grants or {}).items():
        scope = Scope.objects.filter(organization=organization, slug=slug).first()
        if scope is None:
            raise NotFound(f"Unknown scope {slug!r}.", error_code="UNKNOWN_SCOPE", details={"scope": slug})
        chosen[scope.slug] = bool(can_write)
    # Membership of *this* organization is the admin's own business (they see the member list);
    # accounts elsewhere are not.
    if Membership.objects.filter(organization=organization, user__email__iexact=email).exists():
        raise Conflict(f"{email} is already a member of {organization.name}.", error_code="MEMBER_EXISTS")
    now = timezone.now()
    Invite.objects.filter(organization=organization, email=email, accepted_at=None, revoked_at=None).update(revoked_at=now)
    raw = secrets.token_urlsafe(32)
    invite = Invite.objects.create(
        organization=organization,
        email=email,
        clearance_rank=rank,
        role=role,
        grants=chosen,
        secret_hash=_hash(raw),
        invited_by=by.user if by is not None else None,
        expires_at=now + timedelta(hours=settings.CORTEX_INVITE_TTL_HOURS),
    )
    link = f"{settings.CORTEX_BASE_URL}{INVITE_PATH}{raw}/"
    record(
        "invite.create",
        organization=organization,
        actor=_actor(by),
        target_type="invite",
        target_id=invite.pk,
        details={"email": email, "clearance": clearance_name(organization.pk, rank), "role": role, "grants": chosen},
    )
    inviter = by.user.display_name if by is not None else "An administrator"
    transaction.on_commit(
        lambda: send_mail(
            subject=f"You are invited to {organization.name} on Cortex",
            message=(
                f"{inviter} invited you to {organization.name} on Cortex.\n\n"
                f"Accept within {settings.CORTEX_INVITE_TTL_HOURS} hours: {link}\n\n"
                "The link works once. If you did not expect this, ignore this email."
            ),
            from_email=None,
            recipient_list=[email],
        )
    )
    return invite, link


def invite_by_link(raw: str) -> Invite:
    """The pending invite a link's secret belongs to; used, revoked, expired and unknown links alike are NotFound."""
    invite = Invite.objects.select_related("organization").filter(secret_hash=_hash(raw or "")).first()
    if invite is None or not invite.is_pending():
        raise NotFound(
            "This invitation link is invalid, used or expired. Ask an admin for a new one.", error_code="INVITE_INVALID"
        )
    return invite


def invite_needs_sign_in(invite: Invite) -> bool:
    """True when the invited address already has an account: its owner signs in instead of setting a password.

    Only the holder of the emailed link learns this — the address's owner.
    """
    return User.objects.filter(email__iexact=invite.email).exists()


@transaction.atomic
def invite_accept(*, raw: str, password: str = "", name: str = "", signed_in: User | None = None) -> Membership:
    """Accept an invite: creates the account (with the invitee's own password) or uses the signed-in one.

    Single-use under concurrency: the invite is claimed with a conditional update, so two clicks
    create one membership.
    """
    invite = invite_by_link(raw)
    user = User.objects.filter(email__iexact=invite.email).first()
    if user is not None:
        if signed_in is None or signed_in.pk != user.pk:
            raise PermissionDenied(
                f"{invite.email} already has a Cortex account: sign in as {invite.email} and open the link again.",
                error_code="SIGN_IN_TO_ACCEPT",
            )
    else:
        check_password(password, user=User(email=invite.email, name=name.strip()))
    now = timezone.now()
    claimed = Invite.objects.filter(pk=invite.pk, accepted_at=None, revoked_at=None, expires_at__gt=now).update(accepted_at=now)
    if claimed != 1:
        raise NotFound(
            "This invitation link is invalid, used or expired. Ask an admin for a new one.", error_code="INVITE_INVALID"
        )
    created = user is None
    if user is None:
        user = User.objects.create_user(invite.email, password=password, name=name.strip())
    if Membership.objects.filter(user=user, organization=invite.organization).exists():
        raise Conflict(f"You are already a member of {invite.organization.name}.", error_code="MEMBER_EXISTS")
    membership = Membership.objects.create(
        user=user, organization=invite.organization, clearance_rank=invite.clearance_rank, role=invite.role
    )
    scopes = {s.slug: s for s in Scope.objects.filter(organization=invite.organization, slug__in=list(invite.grants))}
    ScopeGrant.objects.bulk_create(
        ScopeGrant(organization=invite.organization, membership=membership, scope=scopes[slug], can_write=can_write)
        for slug, can_write in invite.grants.items()
        if slug in scopes
    )
    record(
        "invite.accept",
        organization=invite.organization,
        actor=Actor(kind="session", label=user.email, user_id=user.pk),
        target_type="invite",
        target_id=invite.pk,
        details={"email": user.email, "new_account": created, "grants": sorted(scopes)},
    )
    return membership


@transaction.atomic
def invite_revoke(*, invite: Invite, by: Principal | None = None) -> None:
    _require_admin(by, invite.organization)
    if Invite.objects.filter(pk=invite.pk, accepted_at=None, revoked_at=None).update(revoked_at=timezone.now()) != 1:
        raise Conflict("This invitation was already used or revoked.", error_code="INVITE_NOT_PENDING")
    record(
        "invite.revoke",
        organization=invite.organization,
        actor=_actor(by),
        target_type="invite",
        target_id=invite.pk,
        details={"email": invite.email},
    )


# -- sessions -------------------------------------------------------------------------------------------------
@transaction.atomic
def user_sign_out_everywhere(*, user: User, organization: Organization | None, actor: Actor) -> None:
    """End every session of this person (the current one included) by moving their session epoch on."""
    User.objects.filter(pk=user.pk).update(session_epoch=F("session_epoch") + 1)
    user.refresh_from_db(fields=["session_epoch"])
    record("auth.sign_out_everywhere", organization=organization, actor=actor, target_type="user", target_id=user.pk)


# -- members: deactivate / reactivate ------------------------------------------------------------------------------
@transaction.atomic
def member_deactivate(*, membership: Membership, by: Principal | None = None) -> Membership:
    """Stop a member acting in this organization; their memories stay, with them as author.

    Their tokens here are revoked; their sessions end here at once (the session finds no active
    membership), and everywhere when this was their last active organization.
    """
    _require_admin(by, membership.organization)
    _require_within_rung(by, membership)
    if membership.deactivated_at is not None:
        raise Conflict(f"{membership.user.email} is already deactivated.", error_code="MEMBER_ALREADY_DEACTIVATED")
    if membership.is_admin and _is_last_admin(membership):
        raise Conflict("An organization needs at least one admin.", error_code="LAST_ADMIN")
    now = timezone.now()
    Membership.objects.filter(pk=membership.pk).update(deactivated_at=now)
    revoked = ApiToken.objects.filter(membership=membership, revoked_at=None).update(revoked_at=now)
    if not Membership.objects.filter(user_id=membership.user_id, deactivated_at=None).exists():
        User.objects.filter(pk=membership.user_id).update(session_epoch=F("session_epoch") + 1)
    membership.refresh_from_db()
    record(
        "member.deactivate",
        organization=membership.organization,
        actor=_actor(by),
        target_type="user",
        target_id=membership.user_id,
        details={"email": membership.user.email, "tokens_revoked": revoked},
    )
    return membership


@transaction.atomic
def member_reactivate(*, membership: Membership, by: Principal | None = None) -> Membership:
    _require_admin(by, membership.organization)
    _require_within_rung(by, membership)
    if Membership.objects.filter(pk=membership.pk).exclude(deactivated_at=None).update(deactivated_at=None) != 1:
        raise Conflict(f"{membership.user.email} is active.", error_code="MEMBER_ACTIVE")
    membership.refresh_from_db()
    record(
        "member.reactivate",
        organization=membership.organization,
        actor=_actor(by),
        target_type="user",
        target_id=membership.user_id,
        details={"email": membership.user.email},
    )
    return membership


@transaction.atomic
def invites_accept_verified(*, email: str, name: str = "") -> User | None:
    """Accept every pending invitation of an address an identity provider has verified (SSO sign-in).

    Creates the account (without a password: it signs in through the IdP, or sets one by reset)
    when there is none and at least one invitation waits. Returns the user, or None when the
    address has neither an account nor a pending invitation.
    """
    email = normalize_email(email)
    now = timezone.now()
    pending = list(
        Invite.objects.select_for_update()
        .select_related("organization")
        .filter(email=email, accepted_at=None, revoked_at=None, expires_at__gt=now)
    )
    user = User.objects.filter(email__iexact=email).first()
    if user is None and not pending:
        return None
    created = user is None
    if user is None:
        user = User.objects.create_user(email, password=None, name=name.strip())
    for invite in pending:
        if Invite.objects.filter(pk=invite.pk, accepted_at=None).update(accepted_at=now) != 1:
            continue
        if Membership.objects.filter(user=user, organization=invite.organization).exists():
            continue
        membership = Membership.objects.create(
            user=user, organization=invite.organization, clearance_rank=invite.clearance_rank, role=invite.role
        )
        scopes = {s.slug: s for s in Scope.objects.filter(organization=invite.organization, slug__in=list(invite.grants))}
        ScopeGrant.objects.bulk_create(
            ScopeGrant(organization=invite.organization, membership=membership, scope=scopes[slug], can_write=can_write)
            for slug, can_write in invite.grants.items()
            if slug in scopes
        )
        record(
            "invite.accept",
            organization=invite.organization,
            actor=Actor(kind="session", label=user.email, user_id=user.pk),
            target_type="invite",
            target_id=invite.pk,
            details={"email": user.email, "new_account": created, "grants": sorted(scopes), "via": "oidc"},
        )
        created = False
    return user


def activity_mark_seen(*, membership: Membership) -> None:
    """The person opened their Activity page: the badge counts only what comes after."""
    Membership.objects.filter(pk=membership.pk).update(activity_seen_at=timezone.now())

"""Tenancy: organizations, people, clearance ladders, scopes, grants and API tokens.

Single-row invariants live here; who may do what is decided by `memories.access.Principal`,
and every write goes through `memories.services`.
"""

from __future__ import annotations

import uuid
from typing import Any, ClassVar

from django.contrib.auth.base_user import AbstractBaseUser, BaseUserManager
from django.contrib.auth.models import PermissionsMixin
from django.core.validators import RegexValidator
from django.db import models
from django.db.models.functions import Lower
from django.utils import timezone

PUBLIC_DOCS_SLUG = "public-docs"
DEFAULT_CLEARANCE_LADDER = ("Contractor", "Employee", "Manager", "Executive")

slug_validator = RegexValidator(
    r"^[a-z0-9](?:[a-z0-9-]{0,48}[a-z0-9])?$",
    "Use 1–50 lowercase letters, digits and hyphens, not starting or ending with a hyphen.",
)


class UserManager(BaseUserManager["User"]):
    use_in_migrations = True

    def create_user(self, email: str, password: str | None = None, **extra: Any) -> User:
        user = self.model(email=self.normalize_email(email).lower(), **extra)
        if password:
            user.set_password(password)
        else:
            user.set_unusable_password()
        user.save(using=self._db)
        return user

    def get_by_natural_key(self, username: str | None) -> User:
        # Sign-in is case-insensitive: emails are stored lowercased, whatever case people type.
        return self.get(email__iexact=(username or "").strip())

    def create_superuser(self, email: str, password: str | None = None, **extra: Any) -> User:
        extra.setdefault("is_staff", True)
        extra.setdefault("is_superuser", True)
        return self.create_user(email, password, **extra)


class User(AbstractBaseUser, PermissionsMixin):
    """A person. Which organizations they see, and at what clearance, is in Membership."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    email = models.EmailField(max_length=254, unique=True)  # stored lowercased
    name = models.CharField(max_length=150, blank=True)
    is_active = models.BooleanField(default=True)
    is_staff = models.BooleanField(default=False)
    date_joined = models.DateTimeField(default=timezone.now)
    # Part of every session's auth hash: changing it signs the person out everywhere at once
    # (Django checks the hash on each request), without touching their password.
    session_epoch = models.PositiveIntegerField(default=0)

    objects: ClassVar[UserManager] = UserManager()

    USERNAME_FIELD = "email"
    EMAIL_FIELD = "email"
    REQUIRED_FIELDS: ClassVar[list[str]] = []

    class Meta:
        constraints = [models.UniqueConstraint(Lower("email"), name="user_email_unique_ci")]

    def __str__(self) -> str:
        return self.email

    @property
    def display_name(self) -> str:
        return self.name or self.email.split("@")[0]

    def get_session_auth_hash(self) -> str:
        return f"{super().get_session_auth_hash()}:{self.session_epoch}"

    def get_session_auth_fallback_hash(self):  # type: ignore[no-untyped-def]
        for fallback in super().get_session_auth_fallback_hash():
            yield f"{fallback}:{self.session_epoch}"


class Organization(models.Model):
    """The tenant. Every tenant-owned row carries its organization."""

    class ConflictPolicy(models.TextChoices):
        # auto: duplicates and stale pairs resolve at once, contradictions by authority then recency.
        AUTO = "auto"
        # manual: every detected conflict waits in the queue for a person.
        MANUAL = "manual"

    slug = models.CharField(max_length=50, unique=True, validators=[slug_validator])
    name = models.CharField(max_length=150)
    conflict_policy = models.CharField(max_length=8, choices=ConflictPolicy.choices, default=ConflictPolicy.AUTO)
    # Audit events older than this are removed by the retention task (with a signed checkpoint).
    audit_retention_days = models.PositiveIntegerField(default=730)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return self.name


class ClearanceLevel(models.Model):
    """One rung of an organization's clearance ladder; a higher rank sees more.

    Memberships and memories store the rank (an int) so retrieval filters stay a single
    comparison; ranks are therefore fixed once created — rename rungs, never renumber them.
    """

    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="clearance_levels")
    name = models.CharField(max_length=50)
    rank = models.PositiveSmallIntegerField()

    class Meta:
        ordering = ["organization", "rank"]
        constraints = [
            models.UniqueConstraint(fields=["organization", "rank"], name="clearance_rank_unique"),
            models.UniqueConstraint(fields=["organization", "name"], name="clearance_name_unique"),
        ]

    def __str__(self) -> str:
        return self.name


class Membership(models.Model):
    class Role(models.TextChoices):
        MEMBER = "member"
        ADMIN = "admin"

    user = models.ForeignKey(User, on_delete=models.CASCADE, related_name="memberships")
    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="memberships")
    clearance_rank = models.PositiveSmallIntegerField()
    role = models.CharField(max_length=8, choices=Role.choices, default=Role.MEMBER)
    created_at = models.DateTimeField(auto_now_add=True)
    # A deactivated member keeps their memories (and authorship) but can no longer act here:
    # no session principal, no token, until reactivated.
    deactivated_at = models.DateTimeField(null=True, blank=True)
    # The Activity page was last opened here: newer items make the badge.
    activity_seen_at = models.DateTimeField(null=True, blank=True)
    # The daily digest e-mail of Activity items is opt-in, per organization; `digest_sent_at` is the
    # last day's claim (at most one digest a day, and only items newer than it and the last visit).
    digest_email = models.BooleanField(default=False)
    digest_sent_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["user", "organization"], name="membership_unique"),
            # (organization, id): the target of same-organization foreign keys (see docs/scaling.md).
            models.UniqueConstraint(fields=["organization", "id"], name="membership_org_id_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.user} @ {self.organization.slug}"

    @property
    def is_admin(self) -> bool:
        return self.role == self.Role.ADMIN


class Scope(models.Model):
    """A named area of knowledge. `all_members` scopes are readable by every member;
    `granted` scopes only through a ScopeGrant."""

    class Visibility(models.TextChoices):
        ALL_MEMBERS = "all_members"
        GRANTED = "granted"

    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="scopes")
    slug = models.CharField(max_length=50, validators=[slug_validator])
    name = models.CharField(max_length=150)
    description = models.TextField(blank=True)
    visibility = models.CharField(max_length=16, choices=Visibility.choices, default=Visibility.GRANTED)
    # For all_members scopes: may every member write, or only holders of a writing grant?
    members_can_write = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)
    # A retired scope takes no new writes; what it holds stays readable by the same rules.
    retired_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["organization", "slug"]
        constraints = [
            models.UniqueConstraint(fields=["organization", "slug"], name="scope_slug_unique"),
            # (organization, id): the target of same-organization foreign keys (see docs/scaling.md).
            models.UniqueConstraint(fields=["organization", "id"], name="scope_org_id_unique"),
        ]

    def __str__(self) -> str:
        return self.slug


class ScopeGrant(models.Model):
    # The membership's organization, repeated so the row is placed with its tenant (see docs/scaling.md).
    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="+")
    membership = models.ForeignKey(Membership, on_delete=models.CASCADE, related_name="grants")
    scope = models.ForeignKey(Scope, on_delete=models.CASCADE, related_name="grants")
    can_write = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["membership", "scope", "organization"], name="grant_unique")]

    def __str__(self) -> str:
        return f"{self.membership} → {self.scope} ({'rw' if self.can_write else 'r'})"


class ApiToken(models.Model):
    """A bearer token for the API and MCP. The secret is shown once; only its SHA-256 is kept.

    A token acts as its membership and can only narrow it: a subset of scopes, read-only,
    an expiry. Tokens are random 256-bit secrets, so a fast hash is enough (no password KDF).
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    # The membership's organization, repeated so the row is placed with its tenant (see docs/scaling.md).
    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="+")
    membership = models.ForeignKey(Membership, on_delete=models.CASCADE, related_name="tokens")
    name = models.CharField(max_length=100)
    prefix = models.CharField(max_length=16, unique=True)
    secret_hash = models.CharField(max_length=64)
    scopes = models.ManyToManyField(Scope, blank=True, related_name="+", through="ApiTokenScope")
    # Narrowed tokens read only `scopes` — even when those scopes are later deleted and the set is
    # empty, which then means nothing rather than everything.
    narrowed = models.BooleanField(default=False)
    read_only = models.BooleanField(default=False)
    # Where an agent's `remember` lands when it names no scope or clearance (OAuth consent sets them).
    default_scope = models.ForeignKey(Scope, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    default_clearance_rank = models.PositiveSmallIntegerField(null=True, blank=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]
        # (organization, id): the target of same-organization foreign keys (see docs/scaling.md).
        constraints = [models.UniqueConstraint(fields=["organization", "id"], name="apitoken_org_id_unique")]

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"

    def is_usable(self, now: Any = None) -> bool:
        now = now or timezone.now()
        return self.revoked_at is None and (self.expires_at is None or self.expires_at > now)


class ApiTokenScope(models.Model):
    """One scope a narrowed token may use (the table Django made for ApiToken.scopes, with its organization)."""

    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="+")
    apitoken = models.ForeignKey(ApiToken, on_delete=models.CASCADE)
    scope = models.ForeignKey(Scope, on_delete=models.CASCADE)

    class Meta:
        db_table = "memories_apitoken_scopes"
        constraints = [models.UniqueConstraint(fields=["apitoken", "scope", "organization"], name="apitoken_scope_unique")]

    def __str__(self) -> str:
        return f"{self.apitoken_id} → {self.scope_id}"


class Invite(models.Model):
    """An admin's invitation of an email address into an organization, with everything chosen up front.

    The link's secret is random and only its SHA-256 is kept. It is single-use (`accepted_at` is set
    by a conditional update) and expires.
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="invites")
    email = models.EmailField(max_length=254)  # stored lowercased
    clearance_rank = models.PositiveSmallIntegerField()
    role = models.CharField(max_length=8, choices=Membership.Role.choices, default=Membership.Role.MEMBER)
    # Scope slug → can_write, applied when the invite is accepted (scopes deleted since are skipped).
    grants = models.JSONField(default=dict, blank=True)
    secret_hash = models.CharField(max_length=64, unique=True)
    invited_by = models.ForeignKey(User, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField()
    accepted_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"invite {self.email} → {self.organization_id}"

    def is_pending(self, now: Any = None) -> bool:
        now = now or timezone.now()
        return self.accepted_at is None and self.revoked_at is None and self.expires_at > now

"""What the operator CLI looks up by name: organizations by slug, members by email, scopes by
slug, tokens by prefix. Each raises NotFound with a sentence saying how to fix it."""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import Count, Q

from cortex_site.errors import NotFound
from memories.access import Operator, clearance_names
from memories.models import ApiToken, Conflict, Membership, Organization, Scope


def organization_by_slug(slug: str) -> Organization:
    found = Organization.objects.filter(slug=slug).first()
    if found is None:
        raise NotFound(f"Unknown organization {slug!r}. Create it with: cortex org create {slug}")
    return found


def organization_exists(slug: str | None = None) -> bool:
    """Whether any organization (or the one named `slug`) exists."""
    organizations = Organization.objects.all() if slug is None else Organization.objects.filter(slug=slug)
    return organizations.exists()


def organization_ids_by_slug() -> list[tuple[str, int]]:
    """(slug, id) of every organization, by slug: the operator verifies every audit chain."""
    return list(Organization.objects.order_by("slug").values_list("slug", "pk"))


def member_by_email(operator: Operator, email: str) -> Membership:
    org = operator.organization
    found = (
        Membership.objects.filter(organization=org, user__email__iexact=email.strip())
        .select_related("user", "organization")
        .first()
    )
    if found is None:
        raise NotFound(
            f"{email} is not a member of {org.slug}. Add them with: cortex user add {email} --org {org.slug} --clearance <rung>"
        )
    return found


def scope_by_slug(operator: Operator, slug: str) -> Scope:
    org = operator.organization
    found = Scope.objects.filter(organization=org, slug=slug).first()
    if found is None:
        raise NotFound(f"Unknown scope {slug!r} in {org.slug}. Create it with: cortex scope create {slug} --org {org.slug}")
    return found


def token_by_prefix(operator: Operator, prefix: str) -> ApiToken:
    found = (
        ApiToken.objects.filter(prefix=prefix.strip(), membership__organization=operator.organization)
        .select_related("membership__user", "membership__organization")
        .first()
    )
    if found is None:
        raise NotFound(f"No token with prefix {prefix!r} in {operator.organization.slug}.")
    return found


def open_conflict_count(operator: Operator) -> int:
    return Conflict.objects.filter(organization=operator.organization, status=Conflict.Status.OPEN).count()


@dataclass(frozen=True)
class OrganizationSummary:
    slug: str
    name: str
    members: int  # active memberships
    scopes: int  # not retired


def organization_summaries() -> list[OrganizationSummary]:
    """Every organization, by slug, with its active members and open scopes (`cortex org list`)."""
    rows = Organization.objects.order_by("slug").annotate(
        active_members=Count("memberships", filter=Q(memberships__deactivated_at__isnull=True), distinct=True),
        open_scopes=Count("scopes", filter=Q(scopes__retired_at__isnull=True), distinct=True),
    )
    return [OrganizationSummary(o.slug, o.name, o.active_members, o.open_scopes) for o in rows]


@dataclass(frozen=True)
class MemberSummary:
    email: str
    name: str
    clearance: str  # the rung's name
    role: str
    active: bool


def member_summaries(operator: Operator) -> list[MemberSummary]:
    """The organization's members, by email, with the name of their rung (`cortex user list`)."""
    org = operator.organization
    rungs = clearance_names(org.pk)
    members = Membership.objects.filter(organization=org).select_related("user").order_by("user__email")
    return [
        MemberSummary(
            m.user.email, m.user.name, rungs.get(m.clearance_rank, str(m.clearance_rank)), m.role, m.deactivated_at is None
        )
        for m in members
    ]


def scopes_of(operator: Operator) -> list[Scope]:
    """The organization's scopes, by slug, retired ones too (`cortex scope list`)."""
    return list(Scope.objects.filter(organization=operator.organization).order_by("slug"))

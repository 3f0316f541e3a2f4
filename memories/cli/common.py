"""Lookups shared by CLI commands: clear errors for unknown organizations, users and scopes."""

from __future__ import annotations

from cortex_site.errors import NotFound
from memories.models import Membership, Organization, Scope


def organization(slug: str) -> Organization:
    org = Organization.objects.filter(slug=slug).first()
    if org is None:
        raise NotFound(f"Unknown organization {slug!r}. Create it with: cortex org create {slug}")
    return org


def membership(org: Organization, email: str) -> Membership:
    member = (
        Membership.objects.filter(organization=org, user__email__iexact=email.strip())
        .select_related("user", "organization")
        .first()
    )
    if member is None:
        raise NotFound(
            f"{email} is not a member of {org.slug}. Add them with: cortex user add {email} --org {org.slug} --clearance <rung>"
        )
    return member


def scope(org: Organization, slug: str) -> Scope:
    found = Scope.objects.filter(organization=org, slug=slug).first()
    if found is None:
        raise NotFound(f"Unknown scope {slug!r} in {org.slug}. Create it with: cortex scope create {slug} --org {org.slug}")
    return found

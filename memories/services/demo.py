"""The demo organizations: "Acme" with people at every clearance, scopes and grants, and "Globex".

Idempotent: seeding again changes nothing. Run by `cortex demo` (memories/cli/demo.py).
"""

from __future__ import annotations

from django.db import transaction

from memories.models import Membership, Organization, Scope
from memories.services import tenancy as services

DEMO_PASSWORD = "cortex-demo"  # noqa: S105 - a published demo credential, printed on every start

PEOPLE = [
    # email, name, clearance, admin
    ("ada@acme.test", "Ada Okafor", "Executive", True),
    ("mo@acme.test", "Mo Lindqvist", "Manager", False),
    ("eve@acme.test", "Eve Tanaka", "Employee", False),
    ("carl@acme.test", "Carl Diaz", "Contractor", False),
]
SCOPES = [
    # slug, name, visibility
    ("engineering", "Engineering", Scope.Visibility.GRANTED),
    ("sales", "Sales", Scope.Visibility.GRANTED),
    ("people", "People & HR", Scope.Visibility.GRANTED),
    ("leadership", "Leadership", Scope.Visibility.GRANTED),
    ("handbook", "Company handbook", Scope.Visibility.ALL_MEMBERS),
]
GRANTS = {
    # email: {scope: can_write}
    "ada@acme.test": {"engineering": True, "sales": True, "people": True, "leadership": True},
    "mo@acme.test": {"engineering": True, "sales": True, "people": False},
    "eve@acme.test": {"engineering": True, "sales": False},
    "carl@acme.test": {"engineering": False},
}


@transaction.atomic
def demo_seed() -> Organization:
    """Create whatever of the demo is missing; the Acme organization."""
    organization = Organization.objects.filter(slug="acme").first() or services.organization_create(
        slug="acme", name="Acme Robotics"
    )
    for slug, name, visibility in SCOPES:
        if not Scope.objects.filter(organization=organization, slug=slug).exists():
            services.scope_create(organization=organization, slug=slug, name=name, visibility=visibility)
    for email, name, clearance, admin in PEOPLE:
        membership = Membership.objects.filter(organization=organization, user__email=email).first()
        if membership is None:
            role = Membership.Role.ADMIN if admin else Membership.Role.MEMBER
            membership = services.member_add(
                organization=organization,
                email=email,
                clearance=clearance,
                role=role,
                name=name,
                password=DEMO_PASSWORD,
                check_password_strength=False,  # the demo password is published; no one's real secret
            )
        for scope_slug, can_write in GRANTS[email].items():
            scope = Scope.objects.get(organization=organization, slug=scope_slug)
            if not membership.grants.filter(scope=scope, can_write=can_write).exists():
                services.grant_set(membership=membership, scope=scope, can_write=can_write)
    # A second organization, so the switcher and tenant isolation are visible from the start.
    globex = Organization.objects.filter(slug="globex").first() or services.organization_create(
        slug="globex", name="Globex Logistics"
    )
    if not Membership.objects.filter(organization=globex, user__email="ada@acme.test").exists():
        services.member_add(organization=globex, email="ada@acme.test", clearance="Manager", role=Membership.Role.ADMIN)
    return organization

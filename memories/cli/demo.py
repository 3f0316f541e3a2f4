"""cortex demo — the "Acme" organization with people at every clearance, scopes, grants and,
on its first run, a knowledge base of a few hundred memories (memories/demo/data/).

Idempotent: running it again changes nothing and prints the same credentials.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction

from memories.demo.knowledge import seed_knowledge
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


def add_parser(sub: Any) -> None:
    demo = sub.add_parser("demo", help="create (or show) the demo organization 'Acme'")
    demo.add_argument("--first-start", action="store_true", help="only seed when the database has no organization yet")
    demo.set_defaults(handler=handle)


@transaction.atomic
def seed() -> Organization:
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
                organization=organization, email=email, clearance=clearance, role=role, name=name, password=DEMO_PASSWORD
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


def handle(command: Any, *, first_start: bool, **_: Any) -> None:
    if first_start and Organization.objects.exists() and not Organization.objects.filter(slug="acme").exists():
        return  # a real installation: leave it alone
    organization = seed()
    report = seed_knowledge(organization)
    if report is not None:
        command.stdout.write(
            f"Demo knowledge written: {report.memories} memories, {report.superseded} newer versions, "
            f"{report.briefs} meeting brief (conflict detection and entity extraction run in the worker)."
        )
        for failure in report.failures:
            command.stderr.write(f"  not written: {failure}")
    command.stdout.write("Demo organization: Acme Robotics (acme). Sign in at /login/ with any of:")
    for email, _name, clearance, admin in PEOPLE:
        command.stdout.write(f"  {email:<16} password {DEMO_PASSWORD}   {clearance}{' (admin)' if admin else ''}")

"""cortex demo — the "Acme" organization with people at every clearance, scopes, grants and,
on its first run, a knowledge base of a few hundred memories (memories/demo/data/).

Idempotent: running it again changes nothing and prints the same credentials.
"""

from __future__ import annotations

from typing import Any

from memories.demo.knowledge import seed_knowledge
from memories.selectors.operator import organization_exists
from memories.services.demo import DEMO_PASSWORD, PEOPLE, demo_seed


def add_parser(sub: Any) -> None:
    demo = sub.add_parser("demo", help="create (or show) the demo organization 'Acme'")
    demo.add_argument("--first-start", action="store_true", help="only seed when the database has no organization yet")
    demo.set_defaults(handler=handle)


def handle(command: Any, *, first_start: bool, **_: Any) -> None:
    if first_start and organization_exists() and not organization_exists("acme"):
        return  # a real installation: leave it alone
    organization = demo_seed()
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

"""cortex audit verify — prove an organization's audit log is intact (its hash chain recomputes)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import CommandError

from audit.services import verify_chain
from memories.cli import common


def add_parser(sub: Any) -> None:
    audit = sub.add_parser("audit", help="the audit log").add_subparsers(dest="audit_command", required=True)
    verify = audit.add_parser("verify", help="recompute an organization's hash chain; exit 1 when it is broken")
    verify.add_argument("--org", required=True)
    verify.set_defaults(handler=audit_verify)


def audit_verify(command: Any, *, org: str, **_: Any) -> None:
    organization = common.organization(org)
    report = verify_chain(organization)
    if not report.ok:
        raise CommandError(
            f"broken: first broken event id {report.first_broken} in the audit chain of {organization.slug} "
            f"({report.count - 1} events before it verify). That event, or the one before it, was changed "
            "or removed outside Cortex."
        )
    command.stdout.write(f"ok {report.count} events")

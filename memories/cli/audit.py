"""cortex audit verify — prove audit logs are intact (each organization's hash chain recomputes)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import CommandError

from audit.services import ChainReport, verify_and_checkpoint
from memories.cli import common
from memories.selectors.operator import organization_ids_by_slug

NO_ORGANIZATION = "(no organization)"


def add_parser(sub: Any) -> None:
    audit = sub.add_parser("audit", help="the audit log").add_subparsers(dest="audit_command", metavar="command", required=True)
    verify = audit.add_parser("verify", help="recompute hash chains; exit 1 when one is broken")
    which = verify.add_mutually_exclusive_group(required=True)
    which.add_argument("--org", help="one organization's chain")
    which.add_argument(
        "--all",
        dest="every",
        action="store_true",
        help="every organization's chain, and the one of events that belong to none (e.g. rejected tokens)",
    )
    verify.set_defaults(handler=audit_verify)


def _broken(label: str, report: ChainReport) -> str:
    return (
        f"broken: first broken event id {report.first_broken} in the audit chain of {label} "
        f"({report.count - 1} events before it verify): {report.reason or 'an event was changed or removed'}. "
        "That event, or the one before it, was changed or removed outside Cortex."
    )


def audit_verify(command: Any, *, org: str | None = None, every: bool = False, **_: Any) -> None:
    if not every:
        organization = common.operator(org or "").organization
        report = verify_and_checkpoint(organization)
        if not report.ok:
            raise CommandError(_broken(organization.slug, report))
        command.stdout.write(f"ok {report.count} events")
        return
    chains: list[tuple[str, Any]] = list(organization_ids_by_slug())
    chains.append((NO_ORGANIZATION, None))
    broken = []
    for label, organization_id in chains:
        report = verify_and_checkpoint(organization_id)
        if report.ok:
            command.stdout.write(f"ok {report.count} events  {label}")
        else:
            command.stdout.write(_broken(label, report))
            broken.append(label)
    if broken:
        raise CommandError(f"{len(broken)} of {len(chains)} audit chains are broken: {', '.join(broken)}.")

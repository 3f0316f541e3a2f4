"""cortex conflicts — how an organization resolves conflicts, and what is waiting for a person."""

from __future__ import annotations

from typing import Any

from memories.cli import common
from memories.models import Organization
from memories.selectors.operator import open_conflict_count
from memories.services.conflicts import conflict_policy_set


def add_parser(sub: Any) -> None:
    conflicts = sub.add_parser("conflicts", help="conflict policy and queue").add_subparsers(
        dest="conflicts_command", metavar="command", required=True
    )
    policy = conflicts.add_parser("policy", help="show or set an organization's conflict policy (auto or manual)")
    policy.add_argument("--org", required=True, help="organization slug")
    policy.add_argument("policy", nargs="?", choices=Organization.ConflictPolicy.values, help="the new policy; omit to show it")
    policy.set_defaults(handler=policy_command)


def policy_command(command: Any, *, org: str, policy: str | None, **_: Any) -> None:
    operator = common.operator(org)
    found = operator.organization
    if policy is not None:
        found = conflict_policy_set(organization=found, policy=policy, by=operator)
    waiting = open_conflict_count(operator)
    explained = {
        "auto": "duplicates and stale pairs resolve at once; contradictions by authority, then recency",
        "manual": "every conflict waits for a person",
    }[found.conflict_policy]
    command.stdout.write(f"{found.slug}: conflict policy {found.conflict_policy} ({explained}); {waiting} open.")

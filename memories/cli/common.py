"""What CLI commands share: the operator of the organization named on the command line, and
lookups by name through the operator selectors (clear errors for unknown names)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from memories.access import Operator
from memories.models import Membership, Scope
from memories.selectors import operator as lookups


def operator(slug: str) -> Operator:
    """The operator acting on organization `slug` (NotFound naming the fix when it does not exist)."""
    return Operator(lookups.organization_by_slug(slug))


def membership(operator: Operator, email: str) -> Membership:
    return lookups.member_by_email(operator, email)


def scope(operator: Operator, slug: str) -> Scope:
    return lookups.scope_by_slug(operator, slug)


def write_table(command: Any, rows: Sequence[Sequence[str]], *, empty: str) -> None:
    """Rows as left-aligned columns two spaces apart (trailing blanks dropped), or `empty` when none."""
    if not rows:
        command.stdout.write(empty)
        return
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        command.stdout.write("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())

"""cortex org | user | scope | grant | token — tenancy administration from the shell."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime, time
from typing import Any

from memories.cli import common
from memories.models import Membership, Scope
from memories.selectors.operator import member_summaries, organization_summaries, scopes_of, token_by_prefix
from memories.services import tenancy as services


def add_parser(sub: Any) -> None:
    org = sub.add_parser("org", help="organizations").add_subparsers(dest="org_command", metavar="command", required=True)
    create = org.add_parser("create", help="create an organization")
    create.add_argument("slug")
    create.add_argument("--name", default="")
    create.set_defaults(handler=org_create)
    org.add_parser("list", help="list the organizations").set_defaults(handler=org_list)

    user = sub.add_parser("user", help="people").add_subparsers(dest="user_command", metavar="command", required=True)
    add = user.add_parser("add", help="add a person to an organization")
    add.add_argument("email")
    add.add_argument("--org", required=True)
    add.add_argument("--clearance", required=True)
    add.add_argument("--admin", action="store_true")
    add.add_argument("--password")
    add.add_argument("--name", default="")
    add.set_defaults(handler=user_add)
    ulist = user.add_parser("list", help="list an organization's members")
    ulist.add_argument("--org", required=True)
    ulist.set_defaults(handler=user_list)

    scope = sub.add_parser("scope", help="scopes").add_subparsers(dest="scope_command", metavar="command", required=True)
    screate = scope.add_parser("create", help="create a scope")
    screate.add_argument("slug")
    screate.add_argument("--org", required=True)
    screate.add_argument("--visibility", choices=Scope.Visibility.values, default=Scope.Visibility.GRANTED)
    screate.add_argument("--name", default="")
    screate.set_defaults(handler=scope_create)
    slist = scope.add_parser("list", help="list an organization's scopes")
    slist.add_argument("--org", required=True)
    slist.set_defaults(handler=scope_list)

    grant = sub.add_parser("grant", help="give a member access to a scope")
    grant.add_argument("email")
    grant.add_argument("scope")
    grant.add_argument("--org", required=True)
    grant.add_argument("--read-only", action="store_true")
    grant.set_defaults(handler=grant_set)

    token = sub.add_parser("token", help="API tokens").add_subparsers(dest="token_command", metavar="command", required=True)
    tcreate = token.add_parser("create", help="create a token (the secret is printed once, alone on the last line)")
    tcreate.add_argument("email")
    tcreate.add_argument("--org", required=True)
    tcreate.add_argument("--name", default="cli")
    tcreate.add_argument("--scopes", default="")
    tcreate.add_argument("--read-only", action="store_true")
    tcreate.add_argument("--expires", type=_date, help="YYYY-MM-DD (expires at the end of that day, UTC)")
    tcreate.set_defaults(handler=token_create)
    trevoke = token.add_parser("revoke", help="revoke a token by its prefix")
    trevoke.add_argument("prefix")
    trevoke.add_argument("--org", required=True)
    trevoke.set_defaults(handler=token_revoke)


def _date(value: str) -> datetime:
    try:
        day = datetime.strptime(value, "%Y-%m-%d").replace(tzinfo=UTC).date()
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a date in YYYY-MM-DD form") from None
    return datetime.combine(day, time.max, tzinfo=UTC)


def org_create(command: Any, *, slug: str, name: str, **_: Any) -> None:
    org = services.organization_create(slug=slug, name=name)  # audited as the CLI
    command.stdout.write(
        f"Created organization {org.slug} ({org.name}) with scope "
        "public-docs and ladder Contractor < Employee < Manager < Executive."
    )


def org_list(command: Any, **_: Any) -> None:
    rows = [(o.slug, o.name, _count(o.members, "member"), _count(o.scopes, "scope")) for o in organization_summaries()]
    common.write_table(command, rows, empty="No organizations yet. Create one with: cortex org create <slug>")


def user_list(command: Any, *, org: str, **_: Any) -> None:
    rows = [
        (m.email, m.name or "-", m.clearance, m.role, "" if m.active else "deactivated")
        for m in member_summaries(common.operator(org))
    ]
    hint = f"cortex user add <email> --org {org} --clearance <rung>"
    common.write_table(command, rows, empty=f"No members in {org} yet. Add one with: {hint}")


def scope_list(command: Any, *, org: str, **_: Any) -> None:
    rows = [
        (s.slug, s.name, s.visibility, "" if s.members_can_write else "read-only", "retired" if s.retired_at else "")
        for s in scopes_of(common.operator(org))
    ]
    common.write_table(command, rows, empty=f"No scopes in {org}.")


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}{'' if number == 1 else 's'}"


def user_add(
    command: Any, *, email: str, org: str, clearance: str, admin: bool, password: str | None, name: str, **_: Any
) -> None:
    operator = common.operator(org)
    organization = operator.organization
    membership = services.member_add(
        by=operator,
        organization=organization,
        email=email,
        clearance=clearance,
        role=Membership.Role.ADMIN if admin else Membership.Role.MEMBER,
        password=password,
        name=name,
    )
    role = "admin" if membership.is_admin else "member"
    command.stdout.write(f"Added {membership.user.email} to {organization.slug} as {role} with clearance {clearance}.")


def scope_create(command: Any, *, slug: str, org: str, visibility: str, name: str, **_: Any) -> None:
    operator = common.operator(org)
    organization = operator.organization
    scope = services.scope_create(organization=organization, slug=slug, name=name, visibility=visibility, by=operator)
    command.stdout.write(f"Created scope {scope.slug} in {organization.slug} (visibility {scope.visibility}).")


def grant_set(command: Any, *, email: str, scope: str, org: str, read_only: bool, **_: Any) -> None:
    operator = common.operator(org)
    membership = common.membership(operator, email)
    target = common.scope(operator, scope)
    services.grant_set(membership=membership, scope=target, can_write=not read_only, by=operator)
    command.stdout.write(f"Granted {membership.user.email} {'read' if read_only else 'read and write'} access to {target.slug}.")


def token_create(
    command: Any, *, email: str, org: str, name: str, scopes: str, read_only: bool, expires: datetime | None, **_: Any
) -> None:
    operator = common.operator(org)
    organization = operator.organization
    membership = common.membership(operator, email)
    slugs = [s.strip() for s in scopes.split(",") if s.strip()]
    for slug in slugs:
        common.scope(operator, slug)
    token, secret = services.token_create(
        membership=membership, name=name, scope_slugs=slugs, read_only=read_only, expires_at=expires, by=operator
    )
    narrowing = f"scopes {', '.join(slugs)}" if slugs else "all of the member's scopes"
    command.stdout.write(
        f"Created token {token.prefix} ({token.name}) for {membership.user.email} in {organization.slug}: {narrowing}"
        f"{', read-only' if read_only else ''}{', expires ' + expires.date().isoformat() if expires else ''}."
    )
    command.stdout.write("Store this secret now; it is not shown again:")
    command.stdout.write(secret)


def token_revoke(command: Any, *, prefix: str, org: str, **_: Any) -> None:
    operator = common.operator(org)
    token = token_by_prefix(operator, prefix)
    services.token_revoke(token=token, by=operator)
    command.stdout.write(f"Revoked token {token.prefix} ({token.name}) of {token.membership.user.email}.")

"""The operator CLI (`python manage.py cortex ...`): every command, its errors, and no half-written state."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from conftest import ApiClient
from django.core.management import CommandError, call_command
from django.db import connection
from django.test import Client
from django.utils import timezone

from audit.models import AuditEvent
from memories.cli.demo import DEMO_PASSWORD, PEOPLE
from memories.models import ApiToken, ClearanceLevel, Membership, Organization, Scope, ScopeGrant, User
from memories.services import tenancy

ROOT = Path(__file__).resolve().parents[2]
TENANCY_MODELS = (Organization, ClearanceLevel, User, Membership, Scope, ScopeGrant, ApiToken, AuditEvent)


def cortex(*args: str) -> list[str]:
    """Run `manage.py cortex <args>` in-process; its output lines."""
    out = StringIO()
    call_command("cortex", *args, stdout=out)
    return out.getvalue().splitlines()


def counts() -> dict[str, int]:
    return {model.__name__: model.objects.count() for model in TENANCY_MODELS}


def login(email: str, password: str) -> Client:
    client = Client()
    response = client.post("/login/", {"username": email, "password": password})
    assert response.status_code == 302, f"login failed for {email}"
    return client


@pytest.fixture
def cli_acme(db: Any) -> Organization:
    cortex("org", "create", "acme", "--name", "Acme Robotics")
    return Organization.objects.get(slug="acme")


# -- org create ----------------------------------------------------------------------------------
@pytest.mark.django_db
def test_org_create_makes_the_ladder_and_public_docs_and_is_audited_as_cli() -> None:
    lines = cortex("org", "create", "acme", "--name", "Acme Robotics")
    assert "Created organization acme (Acme Robotics)" in lines[-1]
    org = Organization.objects.get(slug="acme")
    assert list(org.clearance_levels.values_list("name", flat=True)) == ["Contractor", "Employee", "Manager", "Executive"]
    assert list(org.scopes.values_list("slug", "visibility")) == [("public-docs", "all_members")]
    event = AuditEvent.objects.get(organization=org, action="organization.create")
    assert event.actor_kind == AuditEvent.ActorKind.CLI


@pytest.mark.django_db
def test_org_create_duplicate_slug_is_an_error(cli_acme: Organization) -> None:
    before = counts()
    with pytest.raises(CommandError, match="An organization with slug 'acme' already exists"):
        cortex("org", "create", "acme", "--name", "Another Acme")
    assert counts() == before
    assert Organization.objects.get(slug="acme").name == "Acme Robotics"


@pytest.mark.django_db
@pytest.mark.parametrize("slug", ["Acme", "acme corp", "ac.me", "acme-", "a" * 51, "acme_corp"])
def test_org_create_bad_slug_is_an_error_and_writes_nothing(slug: str) -> None:
    with pytest.raises(CommandError, match="is not a valid organization slug"):
        cortex("org", "create", slug)
    assert counts() == dict.fromkeys(counts(), 0)


# -- user add -----------------------------------------------------------------------------------
@pytest.mark.django_db
def test_user_add_to_unknown_organization_is_an_error() -> None:
    with pytest.raises(CommandError, match=re.escape("Unknown organization 'nope'. Create it with: cortex org create nope")):
        cortex("user", "add", "ann@example.test", "--org", "nope", "--clearance", "Employee")
    assert not User.objects.exists()


@pytest.mark.django_db
def test_user_add_bad_clearance_lists_the_ladder_and_creates_no_account(cli_acme: Organization) -> None:
    with pytest.raises(
        CommandError,
        match=r"Unknown clearance 'Boss'\. This organization's ladder is: Contractor < Employee < Manager < Executive\.",
    ):
        cortex("user", "add", "ann@example.test", "--org", "acme", "--clearance", "Boss")
    assert not User.objects.filter(email="ann@example.test").exists()


@pytest.mark.django_db
def test_user_add_creates_a_member_with_the_clearance_case_insensitively(cli_acme: Organization) -> None:
    lines = cortex("user", "add", "Ann@Example.test", "--org", "acme", "--clearance", "manager")
    assert lines[-1] == "Added ann@example.test to acme as member with clearance manager."
    member = Membership.objects.get(organization=cli_acme, user__email="ann@example.test")
    assert member.role == Membership.Role.MEMBER
    assert member.clearance_rank == ClearanceLevel.objects.get(organization=cli_acme, name="Manager").rank
    assert not member.user.has_usable_password()


@pytest.mark.django_db
def test_user_add_twice_is_an_error_not_a_duplicate(cli_acme: Organization) -> None:
    cortex("user", "add", "ann@example.test", "--org", "acme", "--clearance", "Employee")
    before = counts()
    with pytest.raises(CommandError, match=re.escape("ann@example.test is already a member of acme")):
        cortex("user", "add", "ANN@example.test", "--org", "acme", "--clearance", "Executive")
    assert counts() == before
    member = Membership.objects.get(organization=cli_acme, user__email="ann@example.test")
    assert member.clearance_rank == 1  # unchanged: still Employee


@pytest.mark.django_db
def test_user_add_admin_flag_makes_an_admin(cli_acme: Organization) -> None:
    lines = cortex("user", "add", "boss@example.test", "--org", "acme", "--clearance", "Executive", "--admin")
    assert "as admin" in lines[-1]
    assert Membership.objects.get(user__email="boss@example.test").role == Membership.Role.ADMIN


@pytest.mark.django_db
def test_user_add_password_lets_them_sign_in(cli_acme: Organization) -> None:
    cortex("user", "add", "ann@example.test", "--org", "acme", "--clearance", "Employee", "--password", "a-long-password-1")
    client = login("ann@example.test", "a-long-password-1")
    me = client.get("/api/me").json()
    assert me["organization"]["slug"] == "acme"
    assert me["clearance"] == "Employee"
    assert Client().post("/login/", {"username": "ann@example.test", "password": "wrong"}).status_code == 200


@pytest.mark.django_db
def test_user_add_to_a_second_organization_reuses_the_account(cli_acme: Organization) -> None:
    cortex("org", "create", "globex")
    cortex("user", "add", "ann@example.test", "--org", "acme", "--clearance", "Employee", "--password", "a-long-password-1")
    cortex("user", "add", "ann@example.test", "--org", "globex", "--clearance", "Contractor")
    assert User.objects.filter(email="ann@example.test").count() == 1
    assert Membership.objects.filter(user__email="ann@example.test").count() == 2
    # Setting a password on someone else's existing account is refused, and writes nothing.
    cortex("org", "create", "initech")
    before = counts()
    with pytest.raises(CommandError, match="already has an account"):
        cortex("user", "add", "ann@example.test", "--org", "initech", "--clearance", "Employee", "--password", "hijack-attempt-1")
    assert counts() == before
    login("ann@example.test", "a-long-password-1")


# -- scope create -------------------------------------------------------------------------------
@pytest.mark.django_db
def test_scope_create_defaults_to_granted_and_honours_visibility(cli_acme: Organization) -> None:
    assert (
        cortex("scope", "create", "engineering", "--org", "acme")[-1] == "Created scope engineering in acme (visibility granted)."
    )
    cortex("scope", "create", "handbook", "--org", "acme", "--visibility", "all_members", "--name", "Team handbook")
    scopes = {s.slug: s for s in Scope.objects.filter(organization=cli_acme)}
    assert scopes["engineering"].visibility == Scope.Visibility.GRANTED
    assert scopes["engineering"].name == "Engineering"
    assert scopes["handbook"].visibility == Scope.Visibility.ALL_MEMBERS
    assert scopes["handbook"].name == "Team handbook"


@pytest.mark.django_db
def test_scope_create_duplicate_slug_is_an_error(cli_acme: Organization) -> None:
    cortex("scope", "create", "engineering", "--org", "acme")
    before = counts()
    with pytest.raises(CommandError, match="Scope 'engineering' already exists in acme"):
        cortex("scope", "create", "engineering", "--org", "acme", "--visibility", "all_members")
    with pytest.raises(CommandError, match="Scope 'public-docs' already exists in acme"):
        cortex("scope", "create", "public-docs", "--org", "acme")
    assert counts() == before


@pytest.mark.django_db
def test_scope_slugs_are_per_organization(cli_acme: Organization) -> None:
    cortex("org", "create", "globex")
    cortex("scope", "create", "engineering", "--org", "acme")
    cortex("scope", "create", "engineering", "--org", "globex")
    assert Scope.objects.filter(slug="engineering").count() == 2


@pytest.mark.django_db
def test_scope_create_errors(cli_acme: Organization) -> None:
    with pytest.raises(CommandError, match="invalid choice: 'public'"):
        cortex("scope", "create", "x", "--org", "acme", "--visibility", "public")
    with pytest.raises(CommandError, match="is not a valid scope slug"):
        cortex("scope", "create", "Bad Slug", "--org", "acme")
    with pytest.raises(CommandError, match="Unknown organization 'nope'"):
        cortex("scope", "create", "x", "--org", "nope")
    assert list(Scope.objects.values_list("slug", flat=True)) == ["public-docs"]


# -- grant --------------------------------------------------------------------------------------
@pytest.fixture
def cli_acme_people(cli_acme: Organization) -> Organization:
    cortex("scope", "create", "engineering", "--org", "acme")
    cortex("scope", "create", "sales", "--org", "acme")
    cortex("user", "add", "ann@example.test", "--org", "acme", "--clearance", "Employee")
    return cli_acme


# -- lists ---------------------------------------------------------------------------------------
@pytest.mark.django_db
def test_org_list_says_how_to_start_then_lists_every_organization_with_its_counts() -> None:
    assert cortex("org", "list") == ["No organizations yet. Create one with: cortex org create <slug>"]
    cortex("org", "create", "globex", "--name", "Globex")
    assert cortex("user", "list", "--org", "globex") == [
        "No members in globex yet. Add one with: cortex user add <email> --org globex --clearance <rung>"
    ]
    cortex("org", "create", "acme", "--name", "Acme Robotics")
    cortex("user", "add", "ann@example.test", "--org", "acme", "--clearance", "Employee")
    cortex("user", "add", "bo@example.test", "--org", "acme", "--clearance", "Manager")
    cortex("scope", "create", "sales", "--org", "acme")
    Membership.objects.filter(user__email="bo@example.test").update(deactivated_at=timezone.now())
    assert cortex("org", "list") == [
        "acme    Acme Robotics  1 member   2 scopes",
        "globex  Globex         0 members  1 scope",
    ]


@pytest.mark.django_db
def test_user_and_scope_lists_show_one_organization_and_nothing_of_another(cli_acme_people: Organization) -> None:
    cortex("org", "create", "globex")
    cortex("user", "add", "gil@globex.test", "--org", "globex", "--clearance", "Executive", "--admin", "--name", "Gil Bates")
    cortex("scope", "create", "secret-plans", "--org", "globex")
    cortex("user", "add", "cy@example.test", "--org", "acme", "--clearance", "Contractor", "--admin", "--name", "Cy Young")
    tenancy.scope_retire(scope=Scope.objects.get(organization=cli_acme_people, slug="sales"))
    Scope.objects.filter(organization=cli_acme_people, slug="engineering").update(members_can_write=False)
    Membership.objects.filter(user__email="ann@example.test").update(deactivated_at=timezone.now())

    assert cortex("user", "list", "--org", "acme") == [
        "ann@example.test  -         Employee    member  deactivated",
        "cy@example.test   Cy Young  Contractor  admin",
    ]
    assert cortex("scope", "list", "--org", "acme") == [
        "engineering  Engineering  granted      read-only",
        "public-docs  Public docs  all_members",
        "sales        Sales        granted                 retired",
    ]
    assert cortex("user", "list", "--org", "globex") == ["gil@globex.test  Gil Bates  Executive  admin"]
    assert "secret-plans" in "\n".join(cortex("scope", "list", "--org", "globex"))
    for command in ("user", "scope"):
        with pytest.raises(CommandError, match=re.escape("Unknown organization 'nope'. Create it with: cortex org create nope")):
            cortex(command, "list", "--org", "nope")


@pytest.mark.django_db
def test_grant_gives_read_and_write_or_read_only(cli_acme_people: Organization) -> None:
    assert (
        cortex("grant", "ann@example.test", "engineering", "--org", "acme")[-1]
        == "Granted ann@example.test read and write access to engineering."
    )
    assert (
        cortex("grant", "ann@example.test", "sales", "--org", "acme", "--read-only")[-1]
        == "Granted ann@example.test read access to sales."
    )
    grants = dict(ScopeGrant.objects.filter(membership__user__email="ann@example.test").values_list("scope__slug", "can_write"))
    assert grants == {"engineering": True, "sales": False}
    # Granting again changes the grant; it never duplicates it.
    cortex("grant", "ann@example.test", "engineering", "--org", "acme", "--read-only")
    assert ScopeGrant.objects.filter(scope__slug="engineering").count() == 1
    assert ScopeGrant.objects.get(scope__slug="engineering").can_write is False


@pytest.mark.django_db
def test_grant_unknown_user_or_scope_is_an_error(cli_acme_people: Organization) -> None:
    cortex("org", "create", "globex")
    cortex("user", "add", "outsider@globex.test", "--org", "globex", "--clearance", "Executive")
    before = counts()
    with pytest.raises(CommandError, match=re.escape("nobody@example.test is not a member of acme")):
        cortex("grant", "nobody@example.test", "engineering", "--org", "acme")
    with pytest.raises(CommandError, match=re.escape("outsider@globex.test is not a member of acme")):
        cortex("grant", "outsider@globex.test", "engineering", "--org", "acme")
    with pytest.raises(CommandError, match="Unknown scope 'marketing' in acme"):
        cortex("grant", "ann@example.test", "marketing", "--org", "acme")
    assert counts() == before
    cortex("scope", "create", "globex-only", "--org", "globex")
    before = counts()
    with pytest.raises(CommandError, match="Unknown scope 'globex-only' in acme"):
        cortex("grant", "ann@example.test", "globex-only", "--org", "acme")
    assert counts() == before


# -- token create / revoke ---------------------------------------------------------------------
@pytest.mark.django_db
def test_token_create_prints_the_secret_alone_on_its_last_line_and_it_works(cli_acme_people: Organization) -> None:
    lines = cortex("token", "create", "ann@example.test", "--org", "acme", "--name", "laptop")
    secret = lines[-1]
    assert secret == secret.strip() and " " not in secret
    assert secret.startswith("ctx_")
    assert "not shown again" in lines[-2]
    token = ApiToken.objects.get(membership__user__email="ann@example.test")
    assert token.name == "laptop"
    assert secret.split("_")[1] == token.prefix
    me = ApiClient(secret).get("/api/me")
    assert me.status_code == 200
    body = me.json()
    assert body["user"]["email"] == "ann@example.test"
    assert body["organization"]["slug"] == "acme"
    assert body["token"]["prefix"] == token.prefix
    assert body["token"]["read_only"] is False
    # The secret is printed once and stored only as a hash: not in the row, not in the audit log.
    assert secret not in str(ApiToken.objects.filter(pk=token.pk).values().first())
    assert not any(secret in str(e.details) for e in AuditEvent.objects.all())


@pytest.mark.django_db
def test_token_create_scopes_narrow_and_read_only(cli_acme_people: Organization) -> None:
    cortex("grant", "ann@example.test", "engineering", "--org", "acme")
    cortex("grant", "ann@example.test", "sales", "--org", "acme")
    narrowed = cortex("token", "create", "ann@example.test", "--org", "acme", "--scopes", "engineering, public-docs")[-1]
    scopes = ApiClient(narrowed).get("/api/scopes").json()["results"]
    assert [(s["slug"], s["can_write"]) for s in scopes] == [("engineering", True), ("public-docs", True)]
    read_only = cortex("token", "create", "ann@example.test", "--org", "acme", "--read-only")[-1]
    me = ApiClient(read_only).get("/api/me").json()
    assert me["token"]["read_only"] is True
    scopes = ApiClient(read_only).get("/api/scopes").json()["results"]
    assert {s["slug"] for s in scopes} == {"engineering", "sales", "public-docs"}
    assert not any(s["can_write"] for s in scopes)


@pytest.mark.django_db
def test_token_create_cannot_widen_beyond_the_membership(cli_acme_people: Organization) -> None:
    # ann holds no grant on sales: a token cannot name it, and nothing is created.
    before = counts()
    with pytest.raises(CommandError, match="Unknown scope 'sales'"):
        cortex("token", "create", "ann@example.test", "--org", "acme", "--scopes", "public-docs,sales")
    with pytest.raises(CommandError, match="Unknown scope 'nope' in acme"):
        cortex("token", "create", "ann@example.test", "--org", "acme", "--scopes", "nope")
    assert counts() == before


@pytest.mark.django_db
def test_token_create_expires_at_the_end_of_the_given_day(cli_acme_people: Organization) -> None:
    day = (timezone.now() + timedelta(days=3)).date()
    lines = cortex("token", "create", "ann@example.test", "--org", "acme", "--expires", day.isoformat())
    assert f"expires {day.isoformat()}" in lines[0]
    token = ApiToken.objects.get(membership__user__email="ann@example.test")
    assert token.expires_at is not None
    assert token.expires_at.astimezone(UTC).date() == day
    assert token.expires_at.astimezone(UTC) > datetime.combine(day, datetime.min.time(), tzinfo=UTC) + timedelta(
        hours=23, minutes=59
    )
    assert ApiClient(lines[-1]).get("/api/me").status_code == 200
    ApiToken.objects.filter(pk=token.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    assert ApiClient(lines[-1]).get("/api/me").status_code == 401


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("2026-13-01", "is not a date in YYYY-MM-DD form"),
        ("tomorrow", "is not a date in YYYY-MM-DD form"),
        ("2001-01-01", "The expiry must be in the future"),
    ],
)
def test_token_create_bad_expiry_is_an_error(cli_acme_people: Organization, value: str, message: str) -> None:
    with pytest.raises(CommandError, match=message):
        cortex("token", "create", "ann@example.test", "--org", "acme", "--expires", value)
    assert not ApiToken.objects.exists()


@pytest.mark.django_db
def test_token_create_for_someone_outside_the_organization_is_an_error(cli_acme_people: Organization) -> None:
    cortex("org", "create", "globex")
    cortex("user", "add", "outsider@globex.test", "--org", "globex", "--clearance", "Executive")
    with pytest.raises(CommandError, match=re.escape("outsider@globex.test is not a member of acme")):
        cortex("token", "create", "outsider@globex.test", "--org", "acme")
    assert not ApiToken.objects.exists()


@pytest.mark.django_db
def test_token_revoke_stops_the_token(cli_acme_people: Organization) -> None:
    secret = cortex("token", "create", "ann@example.test", "--org", "acme")[-1]
    prefix = secret.split("_")[1]
    assert cortex("token", "revoke", prefix, "--org", "acme")[-1] == f"Revoked token {prefix} (cli) of ann@example.test."
    assert ApiClient(secret).get("/api/me").status_code == 401
    with pytest.raises(CommandError, match=f"Token {prefix} is already revoked"):
        cortex("token", "revoke", prefix, "--org", "acme")


@pytest.mark.django_db
def test_token_revoke_unknown_prefix_or_another_organizations_token_is_not_found(cli_acme_people: Organization) -> None:
    cortex("org", "create", "globex")
    cortex("user", "add", "gus@globex.test", "--org", "globex", "--clearance", "Employee")
    globex_secret = cortex("token", "create", "gus@globex.test", "--org", "globex")[-1]
    globex_prefix = globex_secret.split("_")[1]
    with pytest.raises(CommandError, match="No token with prefix 'deadbeef' in acme"):
        cortex("token", "revoke", "deadbeef", "--org", "acme")
    # Answered exactly like a missing token: the other organization's token does not exist here.
    with pytest.raises(CommandError, match=f"No token with prefix '{globex_prefix}' in acme"):
        cortex("token", "revoke", globex_prefix, "--org", "acme")
    assert ApiToken.objects.get(prefix=globex_prefix).revoked_at is None
    assert ApiClient(globex_secret).get("/api/me").status_code == 200


# -- demo --------------------------------------------------------------------------------------
@pytest.mark.django_db
def test_demo_is_idempotent_and_prints_credentials_each_time() -> None:
    first = cortex("demo")
    after_first = counts()
    second = cortex("demo")
    assert counts() == after_first
    # The first run also writes the knowledge base (tests/memories/test_demo.py); the rest is the same.
    assert [line for line in first if not line.startswith("Demo knowledge written")] == second
    text = "\n".join(first)
    for email, _name, clearance, _admin in PEOPLE:
        assert email in text
        assert clearance in text
    assert DEMO_PASSWORD in text
    assert after_first["Organization"] == 2  # Acme and Globex
    assert Membership.objects.filter(organization__slug="acme").count() == len(PEOPLE)
    assert Membership.objects.get(organization__slug="globex", user__email="ada@acme.test").role == Membership.Role.ADMIN
    for email, *_ in PEOPLE:
        login(email, DEMO_PASSWORD)


@pytest.mark.django_db
def test_demo_first_start_leaves_a_real_installation_alone(cli_acme: Organization) -> None:
    Organization.objects.filter(slug="acme").update(slug="acme-real")
    before = counts()
    assert cortex("demo", "--first-start") == []
    assert counts() == before


@pytest.mark.django_db
def test_a_failure_midway_through_demo_leaves_no_partial_rows() -> None:
    # An "acme" whose ladder has no Executive: demo creates its scopes, then fails adding Ada.
    tenancy.organization_create(slug="acme", name="Acme", ladder=("Intern", "Staff"))
    before = counts()
    with pytest.raises(CommandError, match="Unknown clearance 'Executive'"):
        cortex("demo")
    assert counts() == before
    assert list(Scope.objects.filter(organization__slug="acme").values_list("slug", flat=True)) == ["public-docs"]
    assert not User.objects.exists()


# -- the real command line ----------------------------------------------------------------------
def _database_url_of_test_db() -> str:
    db = connection.settings_dict
    user = db["USER"] or "postgres"
    auth = f"{user}:{db['PASSWORD']}" if db.get("PASSWORD") else user
    if str(db["HOST"]).startswith("/"):
        return f"postgresql://{auth}@/{db['NAME']}?host={db['HOST']}"
    return f"postgresql://{auth}@{db['HOST']}:{db['PORT'] or 5432}/{db['NAME']}"


def _manage(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DATABASE_URL": _database_url_of_test_db(), "DJANGO_SETTINGS_MODULE": "cortex_site.settings"}
    return subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), "cortex", *args], env=env, cwd=ROOT, capture_output=True, text=True, timeout=120
    )


@pytest.mark.django_db(transaction=True)
def test_the_cli_as_a_real_process_exit_codes_and_sentences(
    make_org: Callable[..., Organization], make_member: Callable[..., Membership]
) -> None:
    org = make_org("realco")
    member = make_member(org, "Manager", email="rita@realco.test")

    created = _manage("token", "create", "rita@realco.test", "--org", "realco", "--name", "script")
    assert created.returncode == 0, created.stderr
    secret = created.stdout.splitlines()[-1]
    assert secret.startswith("ctx_")
    assert ApiClient(secret).get("/api/me").json()["user"]["email"] == member.user.email

    unknown_org = _manage("token", "create", "rita@realco.test", "--org", "nope")
    assert unknown_org.returncode == 1
    assert "Unknown organization 'nope'" in unknown_org.stderr
    assert "Traceback" not in unknown_org.stderr
    assert unknown_org.stdout == ""

    bad_date = _manage("token", "create", "rita@realco.test", "--org", "realco", "--expires", "31/12/2030")
    assert bad_date.returncode != 0
    assert "'31/12/2030' is not a date in YYYY-MM-DD form" in bad_date.stderr
    assert "Traceback" not in bad_date.stderr

    assert ApiToken.objects.filter(membership=member).count() == 1

    verified = _manage("audit", "verify", "--org", "realco")
    assert verified.returncode == 0, verified.stderr
    assert verified.stdout.strip() == f"ok {AuditEvent.objects.filter(organization=org).count()} events"

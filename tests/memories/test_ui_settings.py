"""Settings in the browser: my tokens (secret shown once), connecting an agent, and the admin pages."""

from __future__ import annotations

import re
from typing import Any

import pytest
from support import signed_in

from memories.models import ApiToken, Invite, Membership, Scope, ScopeGrant
from memories.services.tenancy import token_authenticate, token_create

pytestmark = pytest.mark.django_db


def secret_on(html: str) -> str:
    match = re.search(r'id="new-secret" type="text" value="([^"]+)"', html)
    assert match, "the new secret is shown"
    return match.group(1)


# -- tokens -----------------------------------------------------------------------------------------------


def test_creating_a_token_shows_the_secret_once_with_a_copy_button(acme: dict[str, Any]) -> None:
    client = signed_in(acme["employee"])
    response = client.post(
        "/settings/tokens/", {"name": "CI import", "scopes": ["engineering"], "read_only": "on", "expires": "2099-01-31"}
    )
    assert response.status_code == 201
    assert response["Cache-Control"] == "no-store"
    html = response.content.decode()
    secret = secret_on(html)
    assert 'data-copy-target="#new-secret"' in html
    token = token_authenticate(secret)
    assert token is not None and token.name == "CI import" and token.read_only
    assert list(token.scopes.values_list("slug", flat=True)) == ["engineering"]
    assert token.expires_at is not None and token.expires_at.year == 2099
    # Listed afterwards with its prefix, never the secret again.
    listing = client.get("/settings/").content.decode()
    assert "CI import" in listing and f"ctx_{token.prefix}_…" in listing and secret not in listing
    assert "Read-only" in listing and "never" in listing  # last used


def test_token_form_errors_keep_the_input(acme: dict[str, Any]) -> None:
    response = signed_in(acme["employee"]).post("/settings/tokens/", {"name": "Old", "expires": "2001-01-01"})
    assert response.status_code == 400
    html = response.content.decode()
    assert 'id="id_expires_error"' in html and "future" in html
    assert 'value="Old"' in html
    assert not ApiToken.objects.exists()


def test_token_scopes_offer_only_readable_scopes(acme: dict[str, Any]) -> None:
    html = signed_in(acme["contractor"]).get("/settings/").content.decode()
    offered = re.findall(r'name="scopes" value="([^"]+)"', html)
    assert offered == ["engineering", "handbook", "public-docs"]
    response = signed_in(acme["contractor"]).post("/settings/tokens/", {"name": "sneaky", "scopes": ["sales"]})
    assert response.status_code == 400 and not ApiToken.objects.exists()


def test_revoking_my_token_cuts_it_off(acme: dict[str, Any]) -> None:
    token, secret = token_create(membership=acme["employee"], name="laptop")
    client = signed_in(acme["employee"])
    html = client.get("/settings/").content.decode()
    assert f'action="/settings/tokens/{token.pk}/revoke/"' in html and "data-confirm=" in html
    response = client.post(f"/settings/tokens/{token.pk}/revoke/", follow=True)
    assert response.status_code == 200 and "revoked" in response.content.decode()
    assert token_authenticate(secret) is None
    assert "Revoked" in client.get("/settings/").content.decode()


def test_someone_elses_token_is_not_found(acme: dict[str, Any], outsider: Membership) -> None:
    token, secret = token_create(membership=acme["employee"], name="mine")
    for other in (acme["manager"], acme["exec"], outsider):
        assert signed_in(other).post(f"/settings/tokens/{token.pk}/revoke/").status_code == 404
    assert signed_in(acme["manager"]).post("/settings/tokens/not-a-uuid/revoke/").status_code == 404
    assert token_authenticate(secret) is not None
    assert "mine" not in signed_in(acme["manager"]).get("/settings/").content.decode()


# -- connect an agent ---------------------------------------------------------------------------------------


def test_connect_an_agent_shows_the_mcp_url_and_the_readme_config(acme: dict[str, Any], settings: Any) -> None:
    settings.CORTEX_BASE_URL = "https://cortex.acme.test"
    settings.CORTEX_BASE_URL_EXPLICIT = True
    html = signed_in(acme["employee"]).get("/settings/?tab=agent").content.decode()
    assert 'value="https://cortex.acme.test/mcp/"' in html
    assert "claude mcp add --transport http cortex https://cortex.acme.test/mcp/" in html
    assert "&quot;mcpServers&quot;" in html and "mcp-remote" in html
    assert "Bearer ${CORTEX_TOKEN}" in html


def test_connect_an_agent_names_the_host_cortex_is_really_served_on(acme: dict[str, Any], settings: Any) -> None:
    settings.CORTEX_BASE_URL_EXPLICIT = False  # no public URL configured: the request's own host and port
    html = signed_in(acme["employee"]).get("/settings/?tab=agent", HTTP_HOST="127.0.0.1:8123").content.decode()
    assert 'value="http://127.0.0.1:8123/mcp/"' in html
    assert ":8000" not in html


def test_connect_an_agent_explains_oauth_for_each_client(acme: dict[str, Any], settings: Any) -> None:
    settings.CORTEX_BASE_URL = "https://cortex.acme.test"
    settings.CORTEX_BASE_URL_EXPLICIT = True
    html = signed_in(acme["employee"]).get("/settings/?tab=agent").content.decode()
    assert "Sign in with OAuth" in html
    for client in ("Claude.ai and Claude Desktop", "Claude Code", "VS Code", "Cursor"):
        assert client in html
    assert "claude mcp add --transport http cortex https://cortex.acme.test/mcp/</pre>" in html
    assert "&quot;servers&quot;" in html  # VS Code's mcp.json shape


def test_one_click_agent_token_fills_the_config_in(acme: dict[str, Any]) -> None:
    response = signed_in(acme["employee"]).post("/settings/agent/", {"agent": "Claude Desktop", "read_only": "on"})
    assert response.status_code == 201
    html = response.content.decode()
    secret = secret_on(html)
    assert html.count(secret) >= 4  # the secret field and the three snippets
    assert "${CORTEX_TOKEN}" not in html.split("<pre", 1)[1]
    token = token_authenticate(secret)
    assert token is not None and token.name == "Agent: Claude Desktop" and token.read_only


# -- admin pages ---------------------------------------------------------------------------------------------


def test_members_and_scopes_tabs_are_for_admins_only(acme: dict[str, Any]) -> None:
    member = signed_in(acme["manager"])
    html = member.get("/settings/").content.decode()
    assert "?tab=members" not in html and "?tab=scopes" not in html
    assert "Invite a member" not in member.get("/settings/?tab=members").content.decode()
    for path, data in (
        ("/settings/invites/", {"email": "x@example.test", "clearance": "Employee", "role": "member"}),
        (f"/settings/members/{acme['contractor'].pk}/active/", {"active": "0"}),
        ("/settings/scopes/sales/retire/", {"retired": "1"}),
        (
            f"/settings/members/{acme['contractor'].pk}/",
            {f"m{acme['contractor'].pk}-clearance": "Manager", f"m{acme['contractor'].pk}-role": "admin"},
        ),
        (f"/settings/members/{acme['contractor'].pk}/remove/", {}),
        ("/settings/scopes/", {"slug": "legal", "visibility": "granted"}),
        ("/settings/scopes/sales/", {"visibility": "all_members"}),
        ("/settings/grants/", {"member": acme["manager"].pk, "scope": "engineering", "access": "write"}),
        ("/settings/grants/revoke/", {"member": acme["employee"].pk, "scope": "engineering"}),
    ):
        assert member.post(path, data).status_code == 403, path
    assert not Membership.objects.filter(user__email="x@example.test").exists()
    assert not Invite.objects.exists()
    assert not Scope.objects.filter(slug="legal").exists()
    assert Scope.objects.get(organization=acme["org"], slug="sales").retired_at is None
    assert Membership.objects.get(pk=acme["contractor"].pk).deactivated_at is None
    assert Membership.objects.get(pk=acme["contractor"].pk).role == "member"


def test_admin_member_errors_are_inline(acme: dict[str, Any]) -> None:
    response = signed_in(acme["exec"]).post(
        "/settings/invites/", {"email": acme["employee"].user.email.upper(), "clearance": "Employee", "role": "member"}
    )
    assert response.status_code == 409
    html = response.content.decode()
    assert 'id="id_email_error"' in html and "already a member" in html


def test_admin_below_executive_cannot_grant_above_their_clearance(acme: dict[str, Any], make_member: Any) -> None:
    manager_admin = make_member(acme["org"], "Manager", admin=True)
    client = signed_in(manager_admin)
    html = client.get("/settings/?tab=members").content.decode()
    assert "above your clearance" in html  # the Executive's row is not editable here
    response = client.post("/settings/invites/", {"email": "boss@example.test", "clearance": "Executive", "role": "member"})
    assert response.status_code == 400
    assert not Invite.objects.filter(email="boss@example.test").exists()


def test_admin_updates_and_removes_members(acme: dict[str, Any]) -> None:
    admin = signed_in(acme["exec"])
    pk = acme["contractor"].pk
    assert admin.post(f"/settings/members/{pk}/", {f"m{pk}-clearance": "Employee", f"m{pk}-role": "admin"}).status_code == 302
    updated = Membership.objects.get(pk=pk)
    assert updated.clearance_rank == 1 and updated.role == "admin"
    assert admin.post(f"/settings/members/{pk}/remove/").status_code == 302
    assert not Membership.objects.filter(pk=pk).exists()


def test_the_last_admin_cannot_demote_themselves(acme: dict[str, Any]) -> None:
    pk = acme["exec"].pk
    response = signed_in(acme["exec"]).post(
        f"/settings/members/{pk}/", {f"m{pk}-clearance": "Executive", f"m{pk}-role": "member"}, follow=True
    )
    assert "at least one admin" in response.content.decode()
    assert Membership.objects.get(pk=pk).role == "admin"


def test_admin_creates_a_scope_and_grants_and_revokes_access(acme: dict[str, Any]) -> None:
    admin = signed_in(acme["exec"])
    assert admin.post("/settings/scopes/", {"slug": "legal", "name": "Legal", "visibility": "granted"}).status_code == 302
    legal = Scope.objects.get(organization=acme["org"], slug="legal")
    assert legal.visibility == "granted"
    assert admin.post("/settings/grants/", {"member": acme["manager"].pk, "scope": "legal", "access": "read"}).status_code == 302
    grant = ScopeGrant.objects.get(membership=acme["manager"], scope=legal)
    assert grant.can_write is False
    html = admin.get("/settings/?tab=scopes").content.decode()
    assert "legal" in html and acme["manager"].user.email in html
    assert admin.post("/settings/grants/revoke/", {"member": acme["manager"].pk, "scope": "legal"}).status_code == 302
    assert not ScopeGrant.objects.filter(pk=grant.pk).exists()
    assert (
        admin.post(
            f"/settings/scopes/{legal.slug}/", {f"s{legal.pk}-visibility": "all_members", f"s{legal.pk}-members_can_write": ""}
        ).status_code
        == 302
    )
    legal.refresh_from_db()
    assert legal.visibility == "all_members" and legal.members_can_write is False


def test_admin_scope_errors_are_inline(acme: dict[str, Any]) -> None:
    response = signed_in(acme["exec"]).post("/settings/scopes/", {"slug": "Not A Slug", "visibility": "granted"})
    assert response.status_code == 400
    assert 'id="id_slug_error"' in response.content.decode()
    response = signed_in(acme["exec"]).post("/settings/scopes/", {"slug": "sales", "visibility": "granted"})
    assert "already exists" in response.content.decode()


def test_admins_cannot_reach_another_organizations_people_or_scopes(acme: dict[str, Any], outsider: Membership) -> None:
    foreign_admin = signed_in(outsider)
    pk = acme["contractor"].pk
    assert (
        foreign_admin.post(f"/settings/members/{pk}/", {f"m{pk}-clearance": "Executive", f"m{pk}-role": "admin"}).status_code
        == 404
    )
    assert foreign_admin.post(f"/settings/members/{pk}/remove/").status_code == 404
    assert foreign_admin.post("/settings/scopes/sales/", {"visibility": "all_members"}).status_code == 404
    assert foreign_admin.post("/settings/grants/", {"member": pk, "scope": "public-docs", "access": "write"}).status_code == 400
    assert (
        foreign_admin.post("/settings/grants/revoke/", {"member": acme["employee"].pk, "scope": "engineering"}).status_code == 404
    )
    html = foreign_admin.get("/settings/?tab=members").content.decode()
    assert acme["contractor"].user.email not in html
    assert Membership.objects.filter(pk=pk, role="member").exists()


def test_settings_forms_carry_csrf(acme: dict[str, Any]) -> None:
    client = signed_in(acme["exec"])
    for tab in ("tokens", "agent", "account", "members", "scopes"):
        html = client.get(f"/settings/?tab={tab}").content.decode()
        forms = re.findall(r"<form\b[^>]*method=\"post\"[^>]*>.*?</form>", html, re.DOTALL)
        assert forms, tab
        assert all("csrfmiddlewaretoken" in form for form in forms), tab

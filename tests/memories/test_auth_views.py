"""Signing in and out, switching organization, and where a login may send you.

Templates are being restyled elsewhere: these tests assert on status codes, redirects, the
session, audit events and stable text (organization names), never on markup.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest
from django.test import Client

from audit.models import AuditEvent
from memories.models import Membership, Organization

PASSWORD = "correct-horse-battery-9"


@pytest.fixture
def two_orgs(make_org: Callable[..., Organization], make_member: Callable[..., Membership]) -> dict[str, Any]:
    """Ann belongs to Acme (Employee) and Beta (Manager); Gus belongs to Gamma only."""
    acme = make_org("acme-co", "Acme Company")
    beta = make_org("beta-co", "Beta Company")
    gamma = make_org("gamma-co", "Gamma Company")
    ann_acme = make_member(acme, "Employee", email="ann@example.test", password=PASSWORD)
    make_member(beta, "Manager", email="ann@example.test", password=None)
    gus = make_member(gamma, "Executive", email="gus@gamma.test", password=PASSWORD, admin=True)
    return {"acme": acme, "beta": beta, "gamma": gamma, "ann": ann_acme.user, "gus": gus.user}


def _signed_in(email: str, password: str = PASSWORD) -> Client:
    client = Client()
    response = client.post("/login/", {"username": email, "password": password})
    assert response.status_code == 302, response.status_code
    return client


def _per_render_tokens_removed(response: Any) -> str:
    text = response.content.decode().replace(response["X-Request-ID"], "")
    return re.sub(r"\b[A-Za-z0-9]{64}\b", "", text)


def _audit_text() -> str:
    return "\n".join(str(row) for row in AuditEvent.objects.values())


# -- login ----------------------------------------------------------------------------------
@pytest.mark.django_db
def test_login_page_asks_for_email_and_password(client: Client) -> None:
    response = client.get("/login/")
    assert response.status_code == 200
    content = response.content.decode()
    assert 'name="username"' in content
    assert 'name="password"' in content
    assert 'name="csrfmiddlewaretoken"' in content


@pytest.mark.django_db
def test_good_credentials_sign_in_and_are_audited_without_the_password(client: Client, two_orgs: dict[str, Any]) -> None:
    response = client.post("/login/", {"username": "ann@example.test", "password": PASSWORD})
    assert response.status_code == 302
    assert response["Location"] == "/"
    assert client.get("/").status_code == 200
    me = client.get("/api/me").json()
    assert me["user"]["email"] == "ann@example.test"
    event = AuditEvent.objects.get(action="auth.login")
    assert event.outcome == AuditEvent.Outcome.OK
    assert event.actor_user_id == two_orgs["ann"].pk
    assert event.organization_id in {two_orgs["acme"].pk, two_orgs["beta"].pk}
    assert PASSWORD not in _audit_text()


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("email", "password"),
    [("ann@example.test", "wrong-password-1"), ("nobody@example.test", PASSWORD), ("ANN@example.test ", "")],
)
def test_bad_credentials_show_the_form_error_and_are_audited_as_denied(
    client: Client, two_orgs: dict[str, Any], email: str, password: str
) -> None:
    response = client.post("/login/", {"username": email, "password": password})
    assert response.status_code == 200
    form = response.context["form"]
    assert form.errors
    assert "_auth_user_id" not in client.session
    assert client.get("/").status_code == 302  # still signed out
    event = AuditEvent.objects.get(action="auth.login_failed")
    assert event.outcome == AuditEvent.Outcome.DENIED
    assert event.organization_id is None  # nothing about which organization (if any) the address belongs to
    assert event.actor_label == email
    if password:
        assert password not in _audit_text()


@pytest.mark.django_db
def test_wrong_password_and_unknown_account_look_the_same(client: Client, two_orgs: dict[str, Any]) -> None:
    wrong = client.post("/login/", {"username": "ann@example.test", "password": "wrong-password-1"})
    unknown = client.post("/login/", {"username": "nobody@example.test", "password": "wrong-password-1"})
    assert wrong.status_code == unknown.status_code == 200
    assert wrong.context["form"].errors == unknown.context["form"].errors


@pytest.mark.django_db
def test_a_deactivated_person_cannot_sign_in(client: Client, two_orgs: dict[str, Any]) -> None:
    two_orgs["ann"].is_active = False
    two_orgs["ann"].save(update_fields=["is_active"])
    response = client.post("/login/", {"username": "ann@example.test", "password": PASSWORD})
    assert response.status_code == 200
    assert "_auth_user_id" not in client.session


@pytest.mark.django_db
def test_login_requires_the_csrf_token(two_orgs: dict[str, Any]) -> None:
    strict = Client(enforce_csrf_checks=True)
    assert strict.post("/login/", {"username": "ann@example.test", "password": PASSWORD}).status_code == 403
    strict.get("/login/")
    token = strict.cookies["csrftoken"].value
    response = strict.post("/login/", {"username": "ann@example.test", "password": PASSWORD, "csrfmiddlewaretoken": token})
    assert response.status_code == 302


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("next_url", "expected"),
    [
        ("/api/me", "/api/me"),
        ("https://evil.example/phish", "/"),
        ("//evil.example/phish", "/"),
        ("http://testserver.evil.example/", "/"),
        ("javascript:alert(1)", "/"),
    ],
)
def test_login_follows_only_local_next_urls(client: Client, two_orgs: dict[str, Any], next_url: str, expected: str) -> None:
    response = client.post(f"/login/?next={next_url}", {"username": "ann@example.test", "password": PASSWORD, "next": next_url})
    assert response.status_code == 302
    assert response["Location"] == expected


@pytest.mark.django_db
def test_signed_in_people_visiting_login_go_home(two_orgs: dict[str, Any]) -> None:
    client = _signed_in("ann@example.test")
    response = client.get("/login/")
    assert response.status_code == 302
    assert response["Location"] == "/"


# -- logout -----------------------------------------------------------------------------------
@pytest.mark.django_db
def test_logout_is_a_post_that_ends_the_session(two_orgs: dict[str, Any]) -> None:
    client = _signed_in("ann@example.test")
    assert client.get("/logout/").status_code == 405  # a link or an image cannot sign you out
    assert client.get("/").status_code == 200
    response = client.post("/logout/")
    assert response.status_code == 302
    assert response["Location"] == "/login/"
    assert client.get("/").status_code == 302
    assert client.get("/api/me").status_code == 401
    event = AuditEvent.objects.get(action="auth.logout")
    assert event.actor_user_id == two_orgs["ann"].pk


@pytest.mark.django_db
def test_logout_when_signed_out_is_harmless(client: Client, db: Any) -> None:
    response = client.post("/logout/")
    assert response.status_code == 302
    assert not AuditEvent.objects.filter(action="auth.logout").exists()


# -- home -------------------------------------------------------------------------------------
@pytest.mark.django_db
def test_home_requires_login(client: Client) -> None:
    response = client.get("/")
    assert response.status_code == 302
    assert response["Location"] == "/login/?next=/"


@pytest.mark.django_db
def test_home_shows_my_organization_and_nothing_of_others(two_orgs: dict[str, Any]) -> None:
    ann = _signed_in("ann@example.test")
    page = ann.get("/").content.decode()
    assert "Acme Company" in page
    assert "Gamma Company" not in page  # not hers: not even in the switcher
    gus = _signed_in("gus@gamma.test")
    page = gus.get("/").content.decode()
    assert "Gamma Company" in page
    assert "Acme Company" not in page
    assert "Beta Company" not in page


@pytest.mark.django_db
def test_a_person_in_no_organization_sees_no_organization(
    make_org: Callable[..., Organization], make_member: Callable[..., Membership]
) -> None:
    left = make_member(make_org("left-co", "Left Company"), email="leaver@example.test", password=PASSWORD)
    left.delete()
    client = _signed_in("leaver@example.test")
    response = client.get("/")
    assert response.status_code == 403
    assert "Left Company" not in response.content.decode()
    assert client.get("/api/me").status_code == 403


# -- organization switcher ------------------------------------------------------------------------
@pytest.mark.django_db
def test_switching_to_one_of_my_organizations_changes_the_session(two_orgs: dict[str, Any]) -> None:
    client = _signed_in("ann@example.test")
    me = client.get("/api/me").json()
    assert me["organization"]["slug"] == "acme-co"  # first by name
    assert me["clearance"] == "Employee"
    response = client.post("/org/switch", {"organization": "beta-co", "next": "/"})
    assert response.status_code == 302
    assert response["Location"] == "/"
    me = client.get("/api/me").json()
    assert me["organization"] == {"slug": "beta-co", "name": "Beta Company"}
    assert me["clearance"] == "Manager"  # the membership's clearance in that organization
    assert "Beta Company" in client.get("/").content.decode()
    event = AuditEvent.objects.get(action="auth.switch_organization")
    assert event.organization_id == two_orgs["beta"].pk
    # It sticks across requests and can be switched back.
    client.post("/org/switch", {"organization": "acme-co"})
    assert client.get("/api/me").json()["organization"]["slug"] == "acme-co"


@pytest.mark.django_db
@pytest.mark.parametrize("slug", ["gamma-co", "no-such-org", ""])
def test_switching_to_an_organization_i_do_not_belong_to_is_404_and_changes_nothing(two_orgs: dict[str, Any], slug: str) -> None:
    client = _signed_in("ann@example.test")
    client.post("/org/switch", {"organization": "beta-co"})
    response = client.post("/org/switch", {"organization": slug})
    assert response.status_code == 404
    assert "Gamma Company" not in response.content.decode()
    assert client.get("/api/me").json()["organization"]["slug"] == "beta-co"
    assert not AuditEvent.objects.filter(action="auth.switch_organization", organization=two_orgs["gamma"]).exists()


@pytest.mark.django_db
def test_a_foreign_organization_and_a_missing_one_look_the_same(two_orgs: dict[str, Any]) -> None:
    client = _signed_in("ann@example.test")
    foreign = client.post("/org/switch", {"organization": "gamma-co"})
    missing = client.post("/org/switch", {"organization": "no-such-org"})
    assert foreign.status_code == missing.status_code == 404
    # The same page, once what differs on every render (request id, masked CSRF token) is set aside.
    assert _per_render_tokens_removed(foreign) == _per_render_tokens_removed(missing)


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("next_url", "expected"), [("/api/me", "/api/me"), ("https://evil.example/", "/"), ("//evil.example/", "/")]
)
def test_switch_follows_only_local_next_urls(two_orgs: dict[str, Any], next_url: str, expected: str) -> None:
    client = _signed_in("ann@example.test")
    response = client.post("/org/switch", {"organization": "beta-co", "next": next_url})
    assert response.status_code == 302
    assert response["Location"] == expected


@pytest.mark.django_db
def test_switch_needs_a_signed_in_post_with_csrf(two_orgs: dict[str, Any]) -> None:
    anonymous = Client()
    response = anonymous.post("/org/switch", {"organization": "acme-co"})
    assert response.status_code == 302
    assert response["Location"].startswith("/login/")
    client = _signed_in("ann@example.test")
    assert client.get("/org/switch").status_code == 405
    strict = Client(enforce_csrf_checks=True)
    strict.cookies = client.cookies
    assert strict.post("/org/switch", {"organization": "beta-co"}).status_code == 403
    assert client.get("/api/me").json()["organization"]["slug"] == "acme-co"

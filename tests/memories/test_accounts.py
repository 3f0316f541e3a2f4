"""Accounts a team can run: invites, passwords (validated, changed, reset), case-insensitive sign-in,
sign-in throttling, signing out everywhere, deactivating members, renaming and retiring scopes."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

import pytest
from django.core import mail
from django.test import Client
from django.utils import timezone
from support import principal, remember, signed_in

from audit.models import AuditEvent
from cortex_site.errors import PermissionDenied, ValidationFailed
from memories.models import ApiToken, Invite, Membership, Memory, Scope, ScopeGrant
from memories.selectors.memories import visible_memories
from memories.services import accounts, tenancy

pytestmark = pytest.mark.django_db

GOOD_PASSWORD = "plum-orbit-lantern-42"


def _link_in_last_mail() -> str:
    match = re.search(r"http://\S+/invite/([A-Za-z0-9_-]+)/", str(mail.outbox[-1].body))
    assert match, mail.outbox[-1].body
    return f"/invite/{match.group(1)}/"


@pytest.fixture
def invite(django_capture_on_commit_callbacks: Any) -> Any:
    """`invite(client, email, **fields)`: post the invite form; its email goes out as the commit happens."""

    def send(client: Client, email: str, **extra: Any) -> Any:
        data = {"email": email, "clearance": "Employee", "role": "member", **extra}
        with django_capture_on_commit_callbacks(execute=True):
            return client.post("/settings/invites/", data)

    return send


# -- invites ------------------------------------------------------------------------------------------------
def test_an_invitee_sets_their_own_password_and_lands_with_the_chosen_access(invite: Any, acme: dict[str, Any]) -> None:
    response = invite(signed_in(acme["exec"]), "New.Hire@Example.test", read_scopes=["sales"], write_scopes=["engineering"])
    assert response.status_code == 302
    assert mail.outbox[-1].to == ["new.hire@example.test"]
    link = _link_in_last_mail()
    assert not Membership.objects.filter(user__email="new.hire@example.test").exists()  # nothing until accepted

    newcomer = Client()
    page = newcomer.get(link)
    assert page.status_code == 200 and "Acme Robotics" in page.content.decode()
    assert page["Cache-Control"] == "no-store"
    weak = newcomer.post(link, {"password": "123", "password_again": "123"})
    assert weak.status_code == 400 and "at least 12 characters" in weak.content.decode()
    assert not Membership.objects.filter(user__email="new.hire@example.test").exists()

    accepted = newcomer.post(link, {"name": "New Hire", "password": GOOD_PASSWORD, "password_again": GOOD_PASSWORD})
    assert accepted.status_code == 302
    membership = Membership.objects.get(user__email="new.hire@example.test", organization=acme["org"])
    assert membership.clearance_rank == 1 and membership.role == "member"
    grants = dict(ScopeGrant.objects.filter(membership=membership).values_list("scope__slug", "can_write"))
    assert grants == {"sales": False, "engineering": True}
    assert newcomer.get("/").status_code == 200  # signed in at once
    assert Client().login(username="NEW.HIRE@example.test", password=GOOD_PASSWORD)
    actions = list(AuditEvent.objects.filter(organization=acme["org"]).values_list("action", flat=True))
    assert "invite.create" in actions and "invite.accept" in actions
    assert GOOD_PASSWORD not in str(list(AuditEvent.objects.values()))


def test_an_invite_link_works_once(invite: Any, acme: dict[str, Any]) -> None:
    invite(signed_in(acme["exec"]), "once@example.test")
    link = _link_in_last_mail()
    assert Client().post(link, {"password": GOOD_PASSWORD, "password_again": GOOD_PASSWORD}).status_code == 302
    again = Client().post(link, {"password": GOOD_PASSWORD + "x", "password_again": GOOD_PASSWORD + "x"})
    assert again.status_code == 404
    assert Client().get(link).status_code == 404
    assert Membership.objects.filter(user__email="once@example.test").count() == 1


def test_an_expired_or_revoked_invite_link_does_not_work(invite: Any, acme: dict[str, Any]) -> None:
    admin = signed_in(acme["exec"])
    invite(admin, "late@example.test")
    late = _link_in_last_mail()
    Invite.objects.filter(email="late@example.test").update(expires_at=timezone.now() - timedelta(seconds=1))
    assert Client().post(late, {"password": GOOD_PASSWORD, "password_again": GOOD_PASSWORD}).status_code == 404

    invite(admin, "changed-mind@example.test")
    revoked = _link_in_last_mail()
    invite = Invite.objects.get(email="changed-mind@example.test")
    assert admin.post(f"/settings/invites/{invite.pk}/revoke/").status_code == 302
    assert Client().get(revoked).status_code == 404
    assert not Membership.objects.filter(user__email__in=["late@example.test", "changed-mind@example.test"]).exists()


def test_a_new_invite_replaces_the_pending_one(invite: Any, acme: dict[str, Any]) -> None:
    admin = signed_in(acme["exec"])
    invite(admin, "twice@example.test")
    first = _link_in_last_mail()
    invite(admin, "twice@example.test", clearance="Manager")
    second = _link_in_last_mail()
    assert Client().get(first).status_code == 404
    assert Client().post(second, {"password": GOOD_PASSWORD, "password_again": GOOD_PASSWORD}).status_code == 302
    assert Membership.objects.get(user__email="twice@example.test").clearance_rank == 2


def test_inviting_an_account_from_elsewhere_attaches_nothing_until_its_owner_accepts(
    invite: Any, acme: dict[str, Any], outsider: Membership
) -> None:
    admin = signed_in(acme["exec"])
    known = invite(admin, outsider.user.email.upper())
    unknown = invite(admin, "nobody-yet@example.test")
    assert known.status_code == unknown.status_code == 302 and known["Location"] == unknown["Location"]
    assert not Membership.objects.filter(user=outsider.user, organization=acme["org"]).exists()
    invite_mail = next(m for m in mail.outbox if m.to == [outsider.user.email])
    link = re.search(r"/invite/[A-Za-z0-9_-]+/", str(invite_mail.body)).group(0)  # type: ignore[union-attr]
    assert "Sign in as" in Client().get(link).content.decode()
    refused = Client().post(link, {"password": GOOD_PASSWORD, "password_again": GOOD_PASSWORD})
    assert refused.status_code == 403  # an existing account's password is never set through an invite
    assert not Membership.objects.filter(user=outsider.user, organization=acme["org"]).exists()
    assert signed_in(acme["manager"]).post(link).status_code == 403  # somebody else signed in
    joined = signed_in(outsider).post(link)
    assert joined.status_code == 302
    assert Membership.objects.filter(user=outsider.user, organization=acme["org"], clearance_rank=1).exists()


def test_invite_service_messages_do_not_depend_on_other_organizations(
    invite: Any, acme: dict[str, Any], outsider: Membership
) -> None:
    admin = signed_in(acme["exec"])
    messages = []
    for email in (outsider.user.email, "fresh@example.test"):
        response = invite(admin, email)
        page = admin.get(response["Location"])
        messages.append([str(m).replace(email, "<email>") for m in page.context["messages"]])
    assert messages[0] == messages[1] and messages[0]


def test_only_admins_invite_and_only_their_own_invites(invite: Any, acme: dict[str, Any], outsider: Membership) -> None:
    assert invite(signed_in(acme["manager"]), "x@example.test").status_code == 403
    invite(signed_in(acme["exec"]), "mine@example.test")
    invite = Invite.objects.get(email="mine@example.test")
    assert signed_in(outsider).post(f"/settings/invites/{invite.pk}/revoke/").status_code == 404
    assert signed_in(acme["manager"]).post(f"/settings/invites/{invite.pk}/revoke/").status_code == 403
    assert Invite.objects.get(pk=invite.pk).revoked_at is None
    assert "mine@example.test" not in signed_in(outsider).get("/settings/?tab=members").content.decode()


def test_admins_invite_only_up_to_their_rung(acme: dict[str, Any], make_member: Any) -> None:
    manager_admin = make_member(acme["org"], "Manager", admin=True)
    with pytest.raises(PermissionDenied) as refused:
        accounts.invite_create(
            organization=acme["org"], email="boss@example.test", clearance="Executive", by=principal(manager_admin)
        )
    assert refused.value.error_code == "CLEARANCE_ABOVE_OWN"
    assert not Invite.objects.exists() and not mail.outbox


# -- passwords ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("password", "problem"),
    [
        ("short-1", "at least 12"),
        ("password1234", "too common"),
        ("rosalind.franklin", "too similar"),
        ("840393029348", "entirely numeric"),
    ],
)
def test_passwords_are_validated(acme: dict[str, Any], password: str, problem: str) -> None:
    with pytest.raises(ValidationFailed) as refused:
        tenancy.member_add(
            organization=acme["org"], email="rosalind.franklin@example.test", clearance="Employee", password=password
        )
    assert refused.value.error_code == "WEAK_PASSWORD" and problem in refused.value.message
    assert not Membership.objects.filter(user__email="rosalind.franklin@example.test").exists()


def test_sign_in_ignores_the_case_of_the_email(acme: dict[str, Any]) -> None:
    email = acme["employee"].user.email
    response = Client().post("/login/", {"username": email.upper(), "password": "pw-for-tests-1"})
    assert response.status_code == 302


def test_changing_my_password_signs_out_my_other_sessions(acme: dict[str, Any]) -> None:
    email = acme["employee"].user.email
    here, elsewhere = Client(), Client()
    for client in (here, elsewhere):
        assert client.post("/login/", {"username": email, "password": "pw-for-tests-1"}).status_code == 302
    wrong = here.post(
        "/settings/password/", {"old_password": "nope", "new_password1": GOOD_PASSWORD, "new_password2": GOOD_PASSWORD}
    )
    assert wrong.status_code == 400
    weak = here.post("/settings/password/", {"old_password": "pw-for-tests-1", "new_password1": "123", "new_password2": "123"})
    assert weak.status_code == 400
    done = here.post(
        "/settings/password/", {"old_password": "pw-for-tests-1", "new_password1": GOOD_PASSWORD, "new_password2": GOOD_PASSWORD}
    )
    assert done.status_code == 302
    assert here.get("/").status_code == 200
    assert elsewhere.get("/").status_code == 302  # to the sign-in page
    assert Client().login(username=email, password=GOOD_PASSWORD)
    assert AuditEvent.objects.filter(action="auth.password_change", actor_user_id=acme["employee"].user.pk).count() == 1


def test_password_reset_by_email_works_once_and_says_nothing_about_unknown_addresses(acme: dict[str, Any]) -> None:
    email = acme["employee"].user.email
    known = Client().post("/password-reset/", {"email": email.upper()})
    unknown = Client().post("/password-reset/", {"email": "nobody@example.test"})
    assert known.status_code == unknown.status_code == 302 and known["Location"] == unknown["Location"]
    assert len(mail.outbox) == 1 and mail.outbox[0].to == [email]
    match = re.search(r"http://127\.0\.0\.1:8000(/password-reset/[^/]+/[^/]+/)", str(mail.outbox[0].body))
    assert match, mail.outbox[0].body
    client = Client()
    form_page = client.get(match.group(1), follow=True)
    assert form_page.status_code == 200 and "new_password1" in form_page.content.decode()
    set_url = form_page.redirect_chain[-1][0]
    weak = client.post(set_url, {"new_password1": "123", "new_password2": "123"})
    assert weak.status_code == 200 and "at least 12" in weak.content.decode()
    assert client.post(set_url, {"new_password1": GOOD_PASSWORD, "new_password2": GOOD_PASSWORD}).status_code == 302
    assert Client().login(username=email, password=GOOD_PASSWORD)
    reused = Client().get(match.group(1), follow=True)
    assert "invalid, already used or expired" in reused.content.decode()
    assert AuditEvent.objects.filter(action="auth.password_reset").count() == 1


def test_password_reset_links_expire(acme: dict[str, Any], settings: Any) -> None:
    from django.contrib.auth.tokens import default_token_generator
    from django.utils.encoding import force_bytes
    from django.utils.http import urlsafe_base64_encode

    user = acme["employee"].user
    token = default_token_generator.make_token(user)
    url = f"/password-reset/{urlsafe_base64_encode(force_bytes(user.pk))}/{token}/"
    settings.PASSWORD_RESET_TIMEOUT = -1  # any link made before now is past its lifetime
    assert "invalid, already used or expired" in Client().get(url, follow=True).content.decode()


# -- throttling ------------------------------------------------------------------------------------------------
def test_failed_sign_ins_are_throttled_per_account_before_they_are_audited(acme: dict[str, Any], settings: Any) -> None:
    settings.CORTEX_LOGIN_FAILURES_PER_ACCOUNT = 3
    email = acme["employee"].user.email
    for _ in range(3):
        assert Client().post("/login/", {"username": email, "password": "wrong-guess-000"}).status_code == 200
    blocked = Client().post("/login/", {"username": email.upper(), "password": "pw-for-tests-1"})  # even the right one
    assert blocked.status_code == 429 and int(blocked["Retry-After"]) > 0
    assert "Too many failed attempts" in blocked.content.decode()
    for _ in range(10):
        assert Client().post("/login/", {"username": email, "password": "wrong-guess-000"}).status_code == 429
    assert AuditEvent.objects.filter(action="auth.login_failed").count() == 3
    assert AuditEvent.objects.filter(action="auth.login_throttled").count() == 1
    # Another account from the same address is not locked out by this one.
    other = Client().post("/login/", {"username": acme["manager"].user.email, "password": "pw-for-tests-1"})
    assert other.status_code == 302


def test_failed_sign_ins_are_throttled_per_address(acme: dict[str, Any], settings: Any) -> None:
    settings.CORTEX_LOGIN_FAILURES_PER_ADDRESS = 4
    for n in range(4):
        assert Client().post("/login/", {"username": f"guess{n}@example.test", "password": "x-guess-x"}).status_code == 200
    blocked = Client().post("/login/", {"username": acme["manager"].user.email, "password": "pw-for-tests-1"})
    assert blocked.status_code == 429 and blocked["Retry-After"]


def test_bad_tokens_are_throttled_per_address_before_they_are_audited(api: Any, settings: Any) -> None:
    from conftest import ApiClient

    settings.CORTEX_LOGIN_FAILURES_PER_ADDRESS = 3
    guesser = ApiClient("ctx_deadbeef_not-a-real-secret")
    assert [guesser.get("/api/me").status_code for _ in range(3)] == [401, 401, 401]
    throttled = guesser.get("/api/me")
    assert throttled.status_code == 429 and throttled.json()["error_code"] == "RATE_LIMITED" and throttled["Retry-After"]
    for _ in range(5):
        guesser.get("/api/me")
    assert AuditEvent.objects.filter(action="auth.token_rejected").count() == 3
    assert AuditEvent.objects.filter(action="auth.token_throttled").count() == 1


# -- sessions and deactivation -----------------------------------------------------------------------------------
def test_sign_out_everywhere_ends_every_session(acme: dict[str, Any]) -> None:
    email = acme["employee"].user.email
    here, elsewhere = Client(), Client()
    for client in (here, elsewhere):
        client.post("/login/", {"username": email, "password": "pw-for-tests-1"})
        assert client.get("/").status_code == 200
    assert here.post("/settings/sign-out-everywhere/").status_code == 302
    assert here.get("/").status_code == 302 and elsewhere.get("/").status_code == 302
    assert Client().post("/login/", {"username": email, "password": "pw-for-tests-1"}).status_code == 302  # password unchanged
    assert AuditEvent.objects.filter(action="auth.sign_out_everywhere").count() == 1


def test_deactivating_a_member_revokes_tokens_ends_sessions_and_keeps_memories(acme: dict[str, Any], api: Any) -> None:
    employee = acme["employee"]
    memory = remember(employee, "The staging database is rebuilt every Sunday night.", scope="engineering")
    client = api(employee)
    session = signed_in(employee)
    assert client.get("/api/me").status_code == 200 and session.get("/").status_code == 200

    admin = signed_in(acme["exec"])
    assert admin.post(f"/settings/members/{employee.pk}/active/", {"active": "0"}).status_code == 302
    assert client.get("/api/me").status_code == 401
    assert not ApiToken.objects.filter(membership=employee, revoked_at=None).exists()
    assert session.get("/").status_code == 302  # their only organization: signed out
    kept = Memory.objects.get(pk=memory.pk)
    assert kept.status == "active" and kept.author_id == employee.user_id
    assert memory.pk in set(visible_memories(principal(acme["manager"])).values_list("pk", flat=True))
    assert "Deactivated" in admin.get("/settings/?tab=members").content.decode()

    assert admin.post(f"/settings/members/{employee.pk}/active/", {"active": "1"}).status_code == 302
    assert Client().post("/login/", {"username": employee.user.email, "password": "pw-for-tests-1"}).status_code == 302
    actions = set(AuditEvent.objects.filter(organization=acme["org"]).values_list("action", flat=True))
    assert {"member.deactivate", "member.reactivate"} <= actions


def test_deactivation_follows_the_rung_rule_and_keeps_an_admin(acme: dict[str, Any], make_member: Any) -> None:
    manager_admin = make_member(acme["org"], "Manager", admin=True)
    response = signed_in(manager_admin).post(f"/settings/members/{acme['exec'].pk}/active/", {"active": "0"})
    assert response.status_code == 403
    tenancy.member_remove(membership=manager_admin)
    response = signed_in(acme["exec"]).post(f"/settings/members/{acme['exec'].pk}/active/", {"active": "0"})
    assert response.status_code == 409
    assert Membership.objects.get(pk=acme["exec"].pk).deactivated_at is None


# -- scopes ------------------------------------------------------------------------------------------------
def test_a_retired_scope_takes_no_writes_and_stays_readable(acme: dict[str, Any], api: Any) -> None:
    memory = remember(acme["employee"], "Deploys need two approvals.", scope="engineering")
    admin = signed_in(acme["exec"])
    assert admin.post("/settings/scopes/engineering/retire/", {"retired": "1"}).status_code == 302
    refused = api(acme["employee"]).post("/api/memories", {"content": "Another engineering note.", "scope": "engineering"})
    assert refused.status_code == 403 and refused.json()["error_code"] == "SCOPE_NOT_WRITABLE"
    assert api(acme["employee"]).get(f"/api/memories/{memory.pk}").status_code == 200
    assert api(acme["contractor"]).get(f"/api/memories/{memory.pk}").status_code == 200  # same read rule as before
    assert "Retired" in admin.get("/settings/?tab=scopes").content.decode()
    assert admin.post("/settings/scopes/public-docs/retire/", {"retired": "1"}).status_code == 400
    assert admin.post("/settings/scopes/engineering/retire/", {"retired": "0"}).status_code == 302
    assert (
        api(acme["employee"]).post("/api/memories", {"content": "Back in business.", "scope": "engineering"}).status_code == 201
    )


def test_admins_rename_a_scope_and_its_slug_stays(acme: dict[str, Any]) -> None:
    scope = Scope.objects.get(organization=acme["org"], slug="sales")
    response = signed_in(acme["exec"]).post(
        "/settings/scopes/sales/",
        {f"s{scope.pk}-name": "Revenue", f"s{scope.pk}-visibility": "granted", f"s{scope.pk}-members_can_write": "on"},
    )
    assert response.status_code == 302
    scope.refresh_from_db()
    assert scope.name == "Revenue" and scope.slug == "sales"
    assert AuditEvent.objects.filter(action="scope.update", target_id="sales").exists()


def test_bad_mcp_tokens_share_the_per_address_budget(acme: dict[str, Any], settings: Any, make_token: Any) -> None:
    from audit.context import bound
    from memories.mcp.auth import verify_api_token

    settings.CORTEX_LOGIN_FAILURES_PER_ADDRESS = 2
    good = make_token(acme["employee"])
    with bound(request_id="mcp-guess", client_ip="198.51.100.5"):
        assert verify_api_token("ctx_deadbeef_guess-1") is None
        assert verify_api_token("ctx_deadbeef_guess-2") is None
        assert verify_api_token(good) is None  # the address is over budget: even a good token waits
        assert verify_api_token("ctx_deadbeef_guess-3") is None
    assert AuditEvent.objects.filter(action="auth.token_rejected").count() == 2
    with bound(request_id="mcp-other", client_ip="198.51.100.6"):
        assert verify_api_token(good) is not None  # another address is not affected

"""Admins act within their own rung: no change to, or removal of, a member above their clearance,
and no clearance granted above it — in the service, the settings pages and what the pages offer."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from support import principal, signed_in

from cortex_site.errors import PermissionDenied
from memories.models import ApiToken, Membership, Organization, Scope, ScopeGrant
from memories.services import tenancy

pytestmark = pytest.mark.django_db


@pytest.fixture
def ladder(
    make_org: Callable[..., Organization], make_member: Callable[..., Membership], make_scope: Callable[..., Scope]
) -> dict[str, Any]:
    """Admins at Manager and Executive, and a member at every rung."""
    org = make_org("rungs", "Rungs Inc")
    make_scope(org, "finance")
    people = {
        "manager_admin": make_member(org, "Manager", admin=True),
        "exec_admin": make_member(org, "Executive", admin=True),
        "exec": make_member(org, "Executive", grants={"finance": True}),
        "manager": make_member(org, "Manager", grants={"finance": True}),
        "contractor": make_member(org, "Contractor", grants={"finance": True}),
    }
    return {"org": org, **people}


# (admin, target, allowed)
RUNG_CASES = [
    ("manager_admin", "exec", False),
    ("manager_admin", "exec_admin", False),
    ("manager_admin", "manager", True),
    ("manager_admin", "contractor", True),
    ("exec_admin", "exec", True),
    ("exec_admin", "manager_admin", True),
    ("exec_admin", "contractor", True),
]


def _change(action: str, by: Any, target: Membership, org: Organization) -> None:
    finance = Scope.objects.get(organization=org, slug="finance")
    if action == "demote":
        tenancy.member_update(membership=target, clearance="Contractor", by=by)
    elif action == "role":
        tenancy.member_update(membership=target, role=Membership.Role.ADMIN, by=by)
    elif action == "remove":
        tenancy.member_remove(membership=target, by=by)
    elif action == "grant":
        tenancy.grant_set(membership=target, scope=finance, can_write=False, by=by)
    elif action == "revoke_grant":
        ScopeGrant.objects.get_or_create(membership=target, scope=finance, organization=finance.organization)
        tenancy.grant_revoke(membership=target, scope=finance, by=by)
    elif action == "revoke_token":
        token, _secret = tenancy.token_create(membership=target, name="theirs")
        tenancy.token_revoke(token=token, by=by)
    else:  # pragma: no cover - a typo in the table
        raise AssertionError(action)


def _state(target: Membership) -> tuple[Any, ...]:
    exists = Membership.objects.filter(pk=target.pk).first()
    if exists is None:
        return ("removed",)
    grants = tuple(ScopeGrant.objects.filter(membership=target).values_list("scope__slug", "can_write").order_by("scope__slug"))
    revoked = ApiToken.objects.filter(membership=target, revoked_at__isnull=False).count()
    return (exists.clearance_rank, exists.role, grants, revoked)


@pytest.mark.parametrize("action", ["demote", "role", "remove", "grant", "revoke_grant", "revoke_token"])
@pytest.mark.parametrize(("admin", "target", "allowed"), RUNG_CASES)
def test_admins_change_only_members_within_their_rung(
    ladder: dict[str, Any], admin: str, target: str, allowed: bool, action: str
) -> None:
    by = principal(ladder[admin])
    membership = ladder[target]
    if allowed:
        _change(action, by, membership, ladder["org"])
        return
    # The token (for revoke_token) and grant (for revoke_grant) are set up before the refusal, so the
    # state is read afterwards against what the setup alone would have left.
    with pytest.raises(PermissionDenied) as refused:
        _change(action, by, membership, ladder["org"])
    assert refused.value.error_code == "MEMBER_ABOVE_OWN_CLEARANCE"
    assert refused.value.status == 403
    assert "Executive" in refused.value.message and "Manager" in refused.value.message
    assert Membership.objects.get(pk=membership.pk).clearance_rank == membership.clearance_rank
    assert Membership.objects.get(pk=membership.pk).role == membership.role
    assert not ApiToken.objects.filter(membership=membership, revoked_at__isnull=False).exists()


@pytest.mark.parametrize(
    ("admin", "rung", "allowed"),
    [("manager_admin", "Executive", False), ("manager_admin", "Manager", True), ("exec_admin", "Executive", True)],
)
def test_admins_grant_clearance_up_to_their_own(ladder: dict[str, Any], admin: str, rung: str, allowed: bool) -> None:
    by = principal(ladder[admin])
    if allowed:
        assert tenancy.member_update(membership=ladder["contractor"], clearance=rung, by=by).clearance_rank > 0
        return
    with pytest.raises(PermissionDenied) as refused:
        tenancy.member_update(membership=ladder["contractor"], clearance=rung, by=by)
    assert refused.value.error_code == "CLEARANCE_ABOVE_OWN"
    assert Membership.objects.get(pk=ladder["contractor"].pk).clearance_rank == 0


def test_settings_page_refuses_demoting_an_executive_with_403_and_the_reason(ladder: dict[str, Any]) -> None:
    client = signed_in(ladder["manager_admin"])
    target = ladder["exec_admin"]
    before = _state(target)
    response = client.post(
        f"/settings/members/{target.pk}/", {f"m{target.pk}-clearance": "Contractor", f"m{target.pk}-role": "member"}
    )
    assert response.status_code == 403
    assert "above your Manager" in response.content.decode()
    assert _state(target) == before
    response = client.post(f"/settings/members/{target.pk}/remove/")
    assert response.status_code == 403 and _state(target) == before


def test_settings_page_offers_no_change_or_removal_above_the_admins_rung(ladder: dict[str, Any]) -> None:
    html = signed_in(ladder["manager_admin"]).get("/settings/?tab=members").content.decode()
    for above in ("exec", "exec_admin"):
        pk = ladder[above].pk
        assert f'action="/settings/members/{pk}/"' not in html
        assert f'action="/settings/members/{pk}/remove/"' not in html
    for within in ("manager", "contractor"):
        pk = ladder[within].pk
        assert f'action="/settings/members/{pk}/"' in html
        assert f'action="/settings/members/{pk}/remove/"' in html
    assert 'value="Executive"' not in html  # no rung above the admin's own is offered
    grants_html = signed_in(ladder["manager_admin"]).get("/settings/?tab=scopes").content.decode()
    assert f'value="{ladder["exec"].pk}"' not in grants_html
    assert f'value="{ladder["contractor"].pk}"' in grants_html


def test_an_executive_admin_may_do_what_the_manager_admin_may_not(ladder: dict[str, Any]) -> None:
    client = signed_in(ladder["exec_admin"])
    target = ladder["exec"]
    response = client.post(
        f"/settings/members/{target.pk}/", {f"m{target.pk}-clearance": "Manager", f"m{target.pk}-role": "member"}
    )
    assert response.status_code == 302
    assert Membership.objects.get(pk=target.pk).clearance_rank == 2


def test_outsider_admin_cannot_touch_members(ladder: dict[str, Any], outsider: Membership) -> None:
    client = signed_in(outsider)
    target = ladder["contractor"]
    assert client.post(f"/settings/members/{target.pk}/remove/").status_code == 404
    assert Membership.objects.filter(pk=target.pk).exists()

"""A memory link opened while another organization is active: when the person may read it in the
organization that holds it, the page offers to switch; otherwise it is the same 404 as for a
missing memory, naming nothing."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pytest
from support import remember, signed_in

from memories.models import Membership, Organization, Scope
from memories.services import tenancy


@pytest.fixture
def two_orgs(
    make_org: Callable[..., Organization], make_scope: Callable[..., Any], make_member: Callable[..., Membership]
) -> dict[str, Any]:
    alpha, beta = make_org("alpha", "Alpha Corp"), make_org("beta", "Beta Labs")
    make_scope(beta, "research")
    writer = make_member(beta, "Executive", grants={"research": True})
    both = make_member(alpha, "Manager", email="both@example.test")
    # The same person in Beta, with a grant on research and Manager clearance there.
    in_beta = tenancy.member_add(organization=beta, email="both@example.test", clearance="Manager", role=Membership.Role.MEMBER)
    tenancy.grant_set(membership=in_beta, scope=Scope.objects.get(organization=beta, slug="research"), can_write=False)
    low = make_member(alpha, "Employee", email="low@example.test")
    tenancy.member_add(organization=beta, email="low@example.test", clearance="Contractor", role=Membership.Role.MEMBER)
    outsider = make_member(alpha, "Executive", admin=True)
    readable = remember(writer, "Beta's lab moves to building C in March.", scope="research", clearance_min="Manager")
    return {"both": both, "low": low, "outsider": outsider, "memory": readable, "beta": beta}


def test_a_member_of_the_holding_organization_is_offered_to_switch_and_lands_on_the_memory(two_orgs: dict[str, Any]) -> None:
    client = signed_in(two_orgs["both"])  # Alpha Corp is active (first by name)
    url = f"/memories/{two_orgs['memory'].pk}/"
    page = client.get(url)
    assert page.status_code == 404  # not in Alpha: the address still answers "not here"
    text = page.content.decode()
    assert "This memory is in Beta Labs" in text
    assert 'name="organization" value="beta"' in text and f'name="next" value="{url}"' in text
    assert "building C" not in text  # nothing of the memory before switching
    switched = client.post("/org/switch", {"organization": "beta", "next": url})
    assert switched.status_code == 302 and switched["Location"] == url
    opened = client.get(url)
    assert opened.status_code == 200 and "building C" in opened.content.decode()


@pytest.mark.parametrize("who", ["low", "outsider"])
def test_someone_who_may_not_read_it_there_gets_the_plain_404(two_orgs: dict[str, Any], who: str) -> None:
    # "low" is in Beta but below the memory's clearance; "outsider" is not in Beta at all.
    page = signed_in(two_orgs[who]).get(f"/memories/{two_orgs['memory'].pk}/")
    missing = signed_in(two_orgs[who]).get(f"/memories/{uuid.uuid4()}/")
    assert page.status_code == missing.status_code == 404
    for response in (page, missing):
        text = response.content.decode()
        assert "This memory is in" not in text and "Switch to" not in text
        assert "We couldn’t find that page" in text
        if who == "outsider":
            assert "Beta Labs" not in text  # (Low sees Beta in the top bar's switcher: they belong to it)

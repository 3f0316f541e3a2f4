"""Probes an outside evaluator ran beyond the leak suite's tables (tests/hardening/leaks/): people
deactivated in one organization while active in another (or in none), reaching memories through
the organization switcher, a link from the other organization, and the OAuth consent page.

A deactivated membership must act like no membership at all: nothing of its organization is named,
offered or opened, and no new way in (an agent's OAuth grant) can be made for it.
"""

from __future__ import annotations

import base64
import hashlib
import secrets
from typing import Any
from urllib.parse import urlencode

import pytest
from django.test import Client
from oauth2_provider.models import get_application_model
from support import principal, remember

from memories.mcp.auth import mcp_resource_url
from memories.models import ApiToken, Membership, OAuthGrant
from memories.services import accounts

pytestmark = pytest.mark.django_db

REDIRECT = "http://127.0.0.1:33418/callback"
# Invented words, so an answer that names the organization or the memory is found whatever the page's wording.
ACME_NAME = "Zqvelori Robotics"
SECRET_TITLE = "Zqmarune launch window"


@pytest.fixture
def people(make_org: Any, make_scope: Any, make_member: Any) -> dict[str, Any]:
    """Acme, where a person was deactivated; Globex, where the same person is still an active member;
    and a second person whose only membership (in Acme) was deactivated."""
    acme = make_org("probe-acme", ACME_NAME)
    make_scope(acme, "engineering")
    admin = make_member(acme, "Executive", admin=True, grants={"engineering": True})
    dual = make_member(acme, "Manager", email="dual@probe.test", grants={"engineering": True})
    gone = make_member(acme, "Manager", email="gone@probe.test", grants={"engineering": True})
    globex = make_org("probe-globex", "Globex")
    make_member(globex, "Employee", email="dual@probe.test", password=None)
    memory = remember(admin, "The launch window opens on the 14th.", title=SECRET_TITLE, scope="engineering")
    for membership in (dual, gone):
        accounts.member_deactivate(membership=membership, by=principal(admin))
    return {"acme": acme, "admin": admin, "dual": dual, "gone": gone, "memory": memory}


def _browser(membership: Membership) -> Client:
    client = Client()
    client.force_login(membership.user)
    return client


# -- the browser: a link, the switcher -----------------------------------------------------------------------
def test_a_link_to_a_memory_of_an_organization_one_was_deactivated_from_is_the_404_of_a_missing_one(
    people: dict[str, Any],
) -> None:
    browser = _browser(people["dual"])  # signed in; the active organization is Globex
    hidden = browser.get(f"/memories/{people['memory'].pk}/")
    missing = browser.get("/memories/00000000-0000-0000-0000-00000000beef/")
    assert hidden.status_code == missing.status_code == 404
    page = hidden.content.decode()
    assert ACME_NAME not in page
    assert "Switch to" not in page
    assert hidden.templates[0].name == missing.templates[0].name


def test_the_organization_switcher_does_not_offer_an_organization_one_was_deactivated_from(people: dict[str, Any]) -> None:
    page = _browser(people["dual"]).get("/")
    assert page.status_code == 200
    assert ACME_NAME not in page.content.decode()


def test_switching_to_an_organization_one_was_deactivated_from_is_refused(people: dict[str, Any]) -> None:
    browser = _browser(people["dual"])
    answer = browser.post("/org/switch", {"organization": "probe-acme"})
    assert answer.status_code == 404
    assert SECRET_TITLE not in browser.get("/memories/").content.decode()


# -- OAuth: a deactivated membership grants an agent nothing ---------------------------------------------------
def _application() -> Any:
    return get_application_model().objects.create(
        name="Probe agent",
        client_type="public",
        authorization_grant_type="authorization-code",
        redirect_uris=REDIRECT,
        skip_authorization=False,
    )


def _authorize_path(application: Any) -> str:
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    query = {
        "response_type": "code",
        "client_id": application.client_id,
        "redirect_uri": REDIRECT,
        "state": "st-1",
        "code_challenge": challenge,
        "code_challenge_method": "S256",
        "resource": mcp_resource_url(),
        "scope": "mcp",
    }
    return "/oauth/authorize/?" + urlencode(query)


def _consent_to(browser: Client, path: str, membership: Membership) -> Any:
    """Allow the agent into `membership`'s organization, every scope of it, as the consent form posts it."""
    page = browser.get(path)
    form = page.context["form"] if page.context and "form" in page.context else None
    data: dict[str, Any] = {}
    if form is not None:
        data = {name: value for name, value in form.initial.items() if value is not None and name != "scopes"}
    key = str(membership.pk)
    data.update(allow="true", expires="30", organization=key, scopes=[f"{key}:engineering", f"{key}:public-docs"])
    return browser.post(path, data)


@pytest.mark.parametrize("who", ["dual", "gone"])
def test_a_deactivated_member_cannot_consent_an_agent_into_that_organization(people: dict[str, Any], who: str) -> None:
    membership = people[who]
    browser = _browser(membership)
    path = _authorize_path(_application())

    offered = browser.get(path).content.decode()
    answer = _consent_to(browser, path, membership)

    assert "code=" not in answer.get("Location", ""), answer.get("Location")
    assert not OAuthGrant.objects.filter(token__membership=membership).exists()
    assert not ApiToken.objects.filter(membership=membership, revoked_at=None).exists()
    assert ACME_NAME not in offered


# -- writes on someone else's knowledge ------------------------------------------------------------------------
def test_a_writer_below_the_authors_rung_cannot_open_a_memory_to_lower_clearances_or_expire_it(
    acme: dict[str, Any], api: Any
) -> None:
    # The Employee writes engineering but holds less authority than the Executive who wrote this: a new
    # version from them is only a proposal, and the page offers no Edit details. PATCH must not do more.
    memory = remember(acme["exec"], "The offsite is in Lisbon.", scope="engineering", clearance_min="Employee", title="Offsite")
    writer = api(acme["employee"])
    assert writer.post(f"/api/memories/{memory.pk}/supersede", {"content": "The offsite is in Porto."}).status_code == 202

    for change in ({"clearance_min": "Contractor"}, {"valid_until": "2025-01-02T00:00:00Z"}):
        answer = writer.patch(f"/api/memories/{memory.pk}", change)
        assert answer.status_code == 403, (change, answer.content[:300])
        assert answer.json()["error_code"] == "MEMORY_NOT_WRITABLE"
    memory.refresh_from_db()
    assert (memory.clearance_rank, memory.valid_until) == (1, None)
    assert api(acme["contractor"]).get(f"/api/memories/{memory.pk}").status_code == 404
    # Tags stay open to the scope's writers, and the author's own rung may change all of it.
    assert writer.patch(f"/api/memories/{memory.pk}", {"tags": ["offsite"]}).status_code == 200
    assert api(acme["exec"]).patch(f"/api/memories/{memory.pk}", {"clearance_min": "Contractor"}).status_code == 200

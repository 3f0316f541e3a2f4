"""What an outside pass over the browser pages with bad and hostile input found: each answer a page
that says what went wrong (or the shell's 404), never a 500, and nothing changed by a refusal.

NULs reach a page through its path or a form's body (the query string's are dropped before any view
reads them); PostgreSQL refuses them in any text it compares, so a view that hands one to a query
unguarded answers 500 instead of "not found".
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from audit.models import AuditEvent
from memories.models import Conflict, Memory, Organization, Scope, ScopeGrant
from memories.services.memories import MemoryDraft, memory_create

pytestmark = pytest.mark.django_db

LIMIT_100 = "The public API rate limit is 100 requests per minute per API key."
LIMIT_250 = "The public API rate limit is 250 requests per minute per API key."


def browser(membership: Any) -> Client:
    """A signed-in session answering a crash as the server would (a 500 page) instead of raising it."""
    client = Client(raise_request_exception=False)
    client.force_login(membership.user)
    return client


def test_the_audit_log_ignores_an_older_than_position_written_in_superscript_digits(acme: dict[str, Any]) -> None:
    # "²".isdigit() is true, int("²") is not a number: the page must treat it like any other garbage position.
    response = browser(acme["exec"]).get("/audit/?before=%C2%B2")
    assert response.status_code == 200
    assert "organization.create" in response.content.decode()


@pytest.mark.parametrize("path", ["/settings/scopes/%00/", "/settings/scopes/%00/retire/", "/settings/scopes/eng%00ineering/"])
def test_a_scope_address_holding_a_nul_is_not_found(acme: dict[str, Any], path: str) -> None:
    before = list(Scope.objects.values_list("slug", "name", "visibility", "retired_at"))
    response = browser(acme["exec"]).post(path, {"retired": "1", "visibility": "all_members"})
    assert response.status_code == 404
    assert "Error 404" in response.content.decode()
    assert list(Scope.objects.values_list("slug", "name", "visibility", "retired_at")) == before


def test_revoking_a_grant_on_a_scope_name_holding_a_nul_changes_nothing(acme: dict[str, Any]) -> None:
    grants = ScopeGrant.objects.count()
    response = browser(acme["exec"]).post(
        "/settings/grants/revoke/", {"member": str(acme["employee"].pk), "scope": "engi\x00neering"}
    )
    assert response.status_code == 404
    assert "Error 404" in response.content.decode()
    assert ScopeGrant.objects.count() == grants


def test_a_meeting_brief_whose_ticked_decision_nests_too_deep_is_a_400_with_a_message(acme: dict[str, Any]) -> None:
    response = browser(acme["employee"]).post(
        "/briefs/new/",
        {
            "title": "Sync",
            "scope": "public-docs",
            "clearance_min": "Contractor",
            "summary": "We met.",
            "decision": ["[" * 100_000 + "]" * 100_000],
        },
    )
    assert response.status_code == 400
    assert "A ticked decision could not be read" in response.content.decode()
    assert not Memory.objects.exists()


def test_signing_in_with_a_nul_in_the_email_is_refused_on_the_page_and_audited(acme: dict[str, Any]) -> None:
    response = Client(raise_request_exception=False).post("/login/", {"username": "ann\x00@acme.test", "password": "x\x00y"})
    assert response.status_code == 200
    assert 'name="username"' in response.content.decode()
    assert AuditEvent.objects.filter(action="auth.login_failed", actor_label="ann@acme.test").exists()


def test_switching_to_an_organization_named_with_a_nul_is_not_found(acme: dict[str, Any]) -> None:
    client = browser(acme["employee"])
    response = client.post("/org/switch", {"organization": "ac\x00me", "next": "/memories/"})
    assert response.status_code == 404
    assert "Error 404" in response.content.decode()
    assert client.get("/").status_code == 200  # still signed in to acme


def _open_conflict(acme: dict[str, Any], principal_of: Any, capture: Any) -> Conflict:
    """Two memories on one subject that disagree, under the manual policy: one open conflict."""
    Organization.objects.filter(pk=acme["org"].pk).update(conflict_policy="manual")
    for membership, content, days in ((acme["manager"], LIMIT_100, 9), (acme["employee"], LIMIT_250, 0)):
        with capture(execute=True):
            memory_create(
                principal=principal_of(membership),
                draft=MemoryDraft(
                    content=content, title="Public API rate limit", valid_from=timezone.now() - timedelta(days=days)
                ),
            )
    return Conflict.objects.get()


def test_reopening_a_conflict_with_a_nul_in_the_note_reopens_it(
    acme: dict[str, Any], principal_of: Any, django_capture_on_commit_callbacks: Any
) -> None:
    conflict = _open_conflict(acme, principal_of, django_capture_on_commit_callbacks)
    client = browser(acme["manager"])
    assert client.post(f"/conflicts/{conflict.pk}/resolve/", {"resolution": "keep_both"}).status_code == 302
    response = client.post(f"/conflicts/{conflict.pk}/reopen/", {"note": "on second\x00 thought"})
    assert response.status_code == 302
    conflict.refresh_from_db()
    assert (conflict.status, conflict.resolution_note) == ("open", "on second thought")


def test_a_resolve_refused_for_its_note_says_so_not_to_choose_a_resolution(
    acme: dict[str, Any], principal_of: Any, django_capture_on_commit_callbacks: Any
) -> None:
    conflict = _open_conflict(acme, principal_of, django_capture_on_commit_callbacks)
    client = browser(acme["manager"])

    page = client.post(f"/conflicts/{conflict.pk}/resolve/", {"resolution": "keep_both", "note": "x" * 2001}, follow=True)

    text = page.content.decode()
    assert "Note: Ensure this value has at most 2000 characters" in text and "Choose keep new" not in text
    conflict.refresh_from_db()
    assert conflict.status == "open"


def test_a_form_sent_without_its_csrf_token_gets_the_shells_page_saying_nothing_was_saved(acme: dict[str, Any]) -> None:
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(acme["employee"].user)
    response = strict.post("/memories/new/", {"content": "no token", "scope": "engineering", "clearance_min": "Employee"})
    page = response.content.decode()
    assert response.status_code == 403
    assert "This form has expired" in page and "Nothing was saved" in page
    assert "CSRF verification failed" not in page and "DEBUG=True" not in page
    assert not Memory.objects.exists()

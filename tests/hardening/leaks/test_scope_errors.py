"""A scope the writer cannot read looks exactly like one that does not exist — whoever chose it.

Named by the writer, chosen by the organization's source rule, or by the token's default scope,
an unreadable scope answers 404 UNKNOWN_SCOPE with the same envelope as a missing one and never
names it; the built-in GitHub → engineering rule skips an engineering the writer cannot see, as it
does in an organization without one. Nothing is written.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from oauth2_provider.models import get_application_model
from support import assert_envelope, principal

from cortex_site.errors import NotFound, PermissionDenied
from memories.access import Principal
from memories.mcp.auth import mcp_resource_url
from memories.models import ApiToken, Membership, Memory, Organization, Scope, SourceScopeRule
from memories.services import tenancy
from memories.services.memories import MemoryDraft, memory_create
from memories.services.oauth import oauth_grant_create

pytestmark = pytest.mark.django_db


def _shape(body: dict[str, Any]) -> tuple[str, frozenset[str]]:
    return body["error_code"], frozenset(body["details"])


def test_a_source_rule_pointing_at_an_unreadable_scope_answers_like_an_unknown_scope(acme: dict[str, Any], api: Any) -> None:
    SourceScopeRule.objects.create(
        organization=acme["org"], source="Notion", scope=Scope.objects.get(organization=acme["org"], slug="sales")
    )
    client = api(acme["employee"])  # reads engineering, not sales
    unknown = assert_envelope(client.post("/api/memories", {"content": "a note", "scope": "nope"}), 404, "UNKNOWN_SCOPE")
    by_rule = assert_envelope(client.post("/api/memories", {"content": "a page", "source": "Notion"}), 404, "UNKNOWN_SCOPE")
    assert _shape(by_rule) == _shape(unknown)
    assert "sales" not in by_rule["message"] and "sales" not in str(by_rule["details"])
    assert not Memory.objects.filter(organization=acme["org"]).exists()
    # Someone who reads sales but cannot write it is told so, by name: the scope is theirs to know.
    readable = api(acme["manager"]).post("/api/memories", {"content": "a page", "source": "Notion", "scope": "handbook"})
    assert_envelope(readable, 403, "SCOPE_NOT_WRITABLE")


def test_a_token_default_scope_that_is_no_longer_readable_answers_like_an_unknown_scope(acme: dict[str, Any]) -> None:
    employee = acme["employee"]
    sales = Scope.objects.get(organization=acme["org"], slug="sales")
    tenancy.grant_set(membership=employee, scope=sales, can_write=True)
    application = get_application_model().objects.create(
        name="Agent", client_type="public", authorization_grant_type="authorization-code", redirect_uris="http://127.0.0.1:1/cb"
    )
    grant = oauth_grant_create(
        membership=employee,
        application=application,
        resource=mcp_resource_url(),
        scope_slugs=None,
        read_only=False,
        expires_at=None,
        default_scope_slug="sales",
    )
    tenancy.grant_revoke(membership=employee, scope=sales)
    token = ApiToken.objects.select_related("default_scope").get(pk=grant.token_id)
    acting = Principal(Membership.objects.select_related("organization", "user").get(pk=employee.pk), token)
    with pytest.raises(NotFound) as refused:
        memory_create(principal=acting, draft=MemoryDraft(content="where does this go?"))
    assert refused.value.error_code == "UNKNOWN_SCOPE"
    assert "sales" not in refused.value.message and "sales" not in str(refused.value.details)
    assert not Memory.objects.filter(organization=acme["org"]).exists()


def test_the_github_rule_skips_an_engineering_scope_the_writer_cannot_see(
    acme: dict[str, Any], make_org: Callable[..., Organization], make_member: Callable[..., Membership]
) -> None:
    # No grant on engineering: GitHub memories land where they would in an organization without one.
    no_grant = make_member(acme["org"], "Executive")
    elsewhere = make_member(make_org("initech"), "Executive")
    seen = [
        memory_create(principal=principal(m), draft=MemoryDraft(content="merged PR: retries", source="GitHub"))
        for m in (no_grant, elsewhere)
    ]
    assert [(r.memory.scope.slug, r.scope_resolution) for r in seen] == [("public-docs", "default")] * 2
    # A writer who reads engineering but may not write it is still refused rather than moved (rules never widen).
    with pytest.raises(PermissionDenied) as not_writable:
        memory_create(principal=principal(acme["contractor"]), draft=MemoryDraft(content="merged PR: more", source="GitHub"))
    assert not_writable.value.error_code == "SCOPE_NOT_WRITABLE"

"""The organization_id backfill (memories 0015 → 0016 → 0017) on rows written before it existed."""

from __future__ import annotations

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from oauth2_provider.models import Application

BEFORE = [("memories", "0014_authority_redaction_hold"), ("connectors", "0001_initial")]

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def test_grants_tokens_token_scopes_and_oauth_grants_take_their_parents_organization() -> None:
    executor = MigrationExecutor(connection)
    latest = executor.loader.graph.leaf_nodes()
    executor.migrate(BEFORE)
    old = executor.loader.project_state(BEFORE).apps
    organization = old.get_model("memories", "Organization")
    user = old.get_model("memories", "User").objects.create(email="old@example.test", name="Old")
    rows = {}
    for slug in ("acme", "globex"):  # two tenants, so a fill from the wrong parent would show
        org = organization.objects.create(slug=slug, name=slug)
        scope = old.get_model("memories", "Scope").objects.create(organization=org, slug="eng", name="eng")
        membership = old.get_model("memories", "Membership").objects.create(user=user, organization=org, clearance_rank=1)
        grant = old.get_model("memories", "ScopeGrant").objects.create(membership=membership, scope=scope)
        token = old.get_model("memories", "ApiToken").objects.create(
            membership=membership, name="t", prefix=f"{slug[:4]}0001", secret_hash="0" * 64
        )
        token.scopes.add(scope)
        # django-oauth-toolkit's tables were not migrated back: its current model is the one the database holds.
        application = Application.objects.create(
            name=slug, client_type="public", authorization_grant_type="authorization-code", redirect_uris=""
        )
        oauth = old.get_model("memories", "OAuthGrant").objects.create(token=token, application_id=application.id, resource="r")
        rows[slug] = (org.id, grant.id, token.id, oauth.id)

    executor.loader.build_graph()
    executor.migrate(latest)

    new = executor.loader.project_state(latest).apps
    for org_id, grant_id, token_id, oauth_id in rows.values():
        assert new.get_model("memories", "ScopeGrant").objects.get(id=grant_id).organization_id == org_id
        assert new.get_model("memories", "ApiToken").objects.get(id=token_id).organization_id == org_id
        assert [s.organization_id for s in new.get_model("memories", "ApiTokenScope").objects.filter(apitoken_id=token_id)] == [
            org_id
        ]
        assert new.get_model("memories", "OAuthGrant").objects.get(id=oauth_id).organization_id == org_id
    connection.check_constraints()

"""Citus plan, step 2 of 3: fill the new organization_id columns from each row's parent."""

from typing import Any

from django.db import migrations
from django.db.models import OuterRef, Subquery


def fill(apps: Any, schema_editor: Any) -> None:
    membership = apps.get_model("memories", "Membership")
    token = apps.get_model("memories", "ApiToken")
    org_of_membership = Subquery(membership.objects.filter(pk=OuterRef("membership_id")).values("organization_id")[:1])
    org_of_token = Subquery(token.objects.filter(pk=OuterRef("apitoken_id")).values("organization_id")[:1])
    apps.get_model("memories", "ScopeGrant").objects.filter(organization__isnull=True).update(organization_id=org_of_membership)
    token.objects.filter(organization__isnull=True).update(organization_id=org_of_membership)
    # Tokens first: their scopes and OAuth grants take the token's organization.
    apps.get_model("memories", "ApiTokenScope").objects.filter(organization__isnull=True).update(organization_id=org_of_token)
    apps.get_model("memories", "OAuthGrant").objects.filter(organization__isnull=True).update(
        organization_id=Subquery(token.objects.filter(pk=OuterRef("token_id")).values("organization_id")[:1])
    )


class Migration(migrations.Migration):
    dependencies = [
        ("memories", "0015_scale_tenant_columns"),
    ]

    operations = [migrations.RunPython(fill, migrations.RunPython.noop)]

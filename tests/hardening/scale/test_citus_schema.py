"""The schema is ready for Citus, distributed by organization (docs/scaling.md), for every model
there is and every model anyone adds: a new table must either carry organization_id with its
keys, or be named below as global, with the reason.

Citus requires, for tables distributed by a column: the column on every row (NOT NULL), every
unique constraint including it, and foreign keys between distributed tables including it on
both sides. Primary keys become (organization_id, id) at the cut-over itself (docs/scaling.md).
"""

from __future__ import annotations

from typing import Any

import pytest
from django.apps import apps
from django.db import IntegrityError, connection, models, transaction

from memories.models import Scope, ScopeGrant

# Tables not distributed by organization: Citus reference tables (copied to every node) or left
# on the coordinator. Nothing in them belongs to a single tenant.
GLOBAL_TABLES: dict[str, str] = {
    "memories.organization": "the tenant itself: distributed by its own id, co-located with every tenant table",
    "memories.user": "a person may belong to several organizations",
    "memories.user_groups": "Django's permission groups of a user (unused by Cortex's access model)",
    "memories.user_user_permissions": "Django's permissions of a user (unused by Cortex's access model)",
    "memories.embeddingsignature": "which embedding model filled the whole store",
    "admin.logentry": "Django admin's own log (operators, not tenants)",
    "auth.permission": "Django's permission catalogue",
    "auth.group": "Django's permission groups",
    "auth.group_permissions": "Django's permission groups",
    "contenttypes.contenttype": "Django's model catalogue",
    "sessions.session": "a browser session belongs to a person, who may switch organizations",
    "oauth2_provider.application": "an OAuth client (e.g. Claude.ai) is registered once for every organization",
    "oauth2_provider.grant": "django-oauth-toolkit's authorization codes; Cortex's per-organization grant is OAuthGrant",
    "oauth2_provider.accesstoken": "django-oauth-toolkit's tokens, looked up by checksum before any organization is known",
    "oauth2_provider.refreshtoken": "django-oauth-toolkit's tokens, looked up by checksum before any organization is known",
    "oauth2_provider.idtoken": "django-oauth-toolkit's OpenID tokens (unused)",
    "oauth2_provider.devicegrant": "django-oauth-toolkit's device flow (unused)",
}

# Tenant tables whose organization may be empty, with why.
NULLABLE_ORGANIZATION: dict[str, str] = {
    "audit.auditevent": "events that belong to no organization (a rejected token) form their own chain; "
    "at the cut-over they move to a coordinator-local table (docs/scaling.md)",
    "audit.auditcheckpoint": "checkpoints of that organization-less chain",
}

# Unique columns that stay globally unique: looked up before the organization is known, and a
# duplicate would make the lookup ambiguous. At the cut-over they become (organization_id, column)
# with uniqueness kept by their randomness and the creating service's check (docs/scaling.md).
GLOBALLY_UNIQUE: dict[tuple[str, str], str] = {
    ("memories.apitoken", "prefix"): "authentication finds a bearer token by its prefix",
    ("memories.invite", "secret_hash"): "an invitation link is found by its secret",
    ("audit.auditevent", "hash"): "the chain hash of an event, unique across all chains",
    ("memories.oauthgrant", "token"): "one grant per token (a one-to-one key)",
}


def _label(model: type[models.Model]) -> str:
    return model._meta.label_lower


def tenant_models() -> list[type[models.Model]]:
    return [m for m in apps.get_models(include_auto_created=True) if _label(m) not in GLOBAL_TABLES]


def _organization_field(model: type[models.Model]) -> models.Field | None:
    for field in model._meta.local_fields:
        if field.name == "organization":
            return field
    return None


def test_every_table_is_either_global_or_carries_its_organization() -> None:
    missing, nullable = [], []
    for model in tenant_models():
        field = _organization_field(model)
        target = field.related_model if field is not None else None
        if field is None or not isinstance(target, type) or _label(target) != "memories.organization":
            missing.append(_label(model))
        elif field.null and _label(model) not in NULLABLE_ORGANIZATION:
            nullable.append(_label(model))
    assert missing == [], f"add organization (and a backfill migration) or list the table in GLOBAL_TABLES: {missing}"
    assert nullable == [], f"organization must be NOT NULL: {nullable}"
    known = {_label(m) for m in apps.get_models(include_auto_created=True)}
    assert set(GLOBAL_TABLES) <= known, "a global table listed here no longer exists"


def _unique_sets(model: type[models.Model]) -> list[tuple[str, set[str]]]:
    found: list[tuple[str, set[str]]] = []
    for field in model._meta.local_fields:
        if field.unique and not field.primary_key:
            found.append((field.name, {field.name}))
    for together in model._meta.unique_together:
        found.append(("unique_together", set(together)))
    for constraint in model._meta.constraints:
        if isinstance(constraint, models.UniqueConstraint):
            names = set(constraint.fields)
            for expression in constraint.expressions:
                names |= {ref.name for ref in _field_refs(expression)}
            found.append((constraint.name, names))
    return found


def _field_refs(expression: Any) -> list[Any]:
    if isinstance(expression, models.F):
        return [expression]
    return [ref for child in expression.get_source_expressions() for ref in _field_refs(child)]


def test_every_unique_constraint_of_a_tenant_table_includes_the_organization() -> None:
    offending = []
    for model in tenant_models():
        for name, fields in _unique_sets(model):
            if "organization" in fields or (_label(model), name) in GLOBALLY_UNIQUE:
                continue
            offending.append(f"{_label(model)}: {name} {sorted(fields)}")
    assert offending == [], offending


def _tenant_foreign_keys() -> list[tuple[str, str, str]]:
    tenant = {_label(m) for m in tenant_models()}
    keys = []
    for model in tenant_models():
        for field in model._meta.local_fields:
            target = field.related_model
            if field.name != "organization" and isinstance(target, type) and _label(target) in tenant:
                keys.append((model._meta.db_table, str(field.column), target._meta.db_table))
    return keys


@pytest.mark.django_db
def test_every_foreign_key_between_tenant_tables_also_holds_with_the_organization() -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            """
            SELECT src.relname, array_agg(a.attname ORDER BY k.ord), dst.relname,
                   array_agg(fa.attname ORDER BY k.ord)
              FROM pg_constraint c
              JOIN pg_class src ON src.oid = c.conrelid
              JOIN pg_class dst ON dst.oid = c.confrelid
              CROSS JOIN LATERAL unnest(c.conkey, c.confkey) WITH ORDINALITY AS k(col, fcol, ord)
              JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = k.col
              JOIN pg_attribute fa ON fa.attrelid = c.confrelid AND fa.attnum = k.fcol
             WHERE c.contype = 'f'
             GROUP BY c.oid, src.relname, dst.relname
            """
        )
        composite = {
            (src, cols[1], dst)
            for src, cols, dst, fcols in cursor.fetchall()
            if len(cols) == 2 and cols[0] == "organization_id" and fcols == ["organization_id", "id"]
        }
    keys = _tenant_foreign_keys()
    assert len(keys) > 20
    missing = [key for key in keys if key not in composite]
    assert missing == [], f"add cortex_site.tenant_keys.same_organization_key(...) in a migration for {missing}"


@pytest.mark.django_db
def test_a_row_pointing_at_another_organizations_row_is_refused(make_org: Any, make_member: Any) -> None:
    ours, theirs = make_org(), make_org()
    member = make_member(ours)
    foreign_scope = Scope.objects.get(organization=theirs, slug="public-docs")
    with pytest.raises(IntegrityError, match="scopegrant_scope_same_org"), transaction.atomic():
        ScopeGrant.objects.create(organization=ours, membership=member, scope=foreign_scope)
        connection.check_constraints()


@pytest.mark.django_db
def test_services_fill_the_organization_of_grants_tokens_and_their_scopes(
    make_org: Any, make_member: Any, make_scope: Any, make_token: Any
) -> None:
    from memories.models import ApiToken, ApiTokenScope

    org = make_org()
    make_scope(org, "engineering")
    member = make_member(org, grants={"engineering": True})
    make_token(member, scope_slugs=["engineering"])
    assert ScopeGrant.objects.get(membership=member).organization_id == org.id
    token = ApiToken.objects.get(membership=member)
    assert token.organization_id == org.id
    assert [row.organization_id for row in ApiTokenScope.objects.filter(apitoken=token)] == [org.id]
    connection.check_constraints()

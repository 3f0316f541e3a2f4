"""Citus plan: every foreign key between two tenant tables of this app also holds with the organization."""

from django.db import migrations

from cortex_site.tenant_keys import same_organization_key

KEYS = [
    ("memories_scopegrant", "membership_id", "memories_membership"),
    ("memories_scopegrant", "scope_id", "memories_scope"),
    ("memories_apitoken", "membership_id", "memories_membership"),
    ("memories_apitoken", "default_scope_id", "memories_scope"),
    ("memories_apitoken_scopes", "apitoken_id", "memories_apitoken"),
    ("memories_apitoken_scopes", "scope_id", "memories_scope"),
    ("memories_memory", "scope_id", "memories_scope"),
    ("memories_memory", "supersedes_id", "memories_memory"),
    ("memories_memory", "superseded_by_id", "memories_memory"),
    ("memories_memorychunk", "memory_id", "memories_memory"),
    ("memories_memorychunk", "scope_id", "memories_scope"),
    ("memories_sourcescoperule", "scope_id", "memories_scope"),
    ("memories_conflict", "new_memory_id", "memories_memory"),
    ("memories_conflict", "existing_memory_id", "memories_memory"),
    ("memories_entitymention", "entity_id", "memories_entity"),
    ("memories_entitymention", "memory_id", "memories_memory"),
    ("memories_relation", "source_id", "memories_entity"),
    ("memories_relation", "target_id", "memories_entity"),
    ("memories_relation", "memory_id", "memories_memory"),
    ("memories_oauthgrant", "token_id", "memories_apitoken"),
    ("memories_redactionrequest", "memory_id", "memories_memory"),
    ("memories_redactionhold", "memory_id", "memories_memory"),
]


class Migration(migrations.Migration):
    dependencies = [
        ("memories", "0017_scale_tenant_keys"),
    ]

    operations = [same_organization_key(*key) for key in KEYS]

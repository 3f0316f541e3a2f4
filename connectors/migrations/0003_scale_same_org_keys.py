"""Citus plan: every foreign key between two tenant tables of this app also holds with the organization."""

from django.db import migrations

from cortex_site.tenant_keys import same_organization_key

KEYS = [
    ("connectors_connector", "scope_id", "memories_scope"),
    ("connectors_connector", "installed_by_id", "memories_membership"),
    ("connectors_syncrun", "connector_id", "connectors_connector"),
    ("connectors_checkpoint", "connector_id", "connectors_connector"),
    ("connectors_delivery", "connector_id", "connectors_connector"),
    ("connectors_connectoritem", "connector_id", "connectors_connector"),
    ("connectors_connectoritem", "memory_id", "memories_memory"),
]


class Migration(migrations.Migration):
    dependencies = [
        ("connectors", "0002_scale_tenant_keys"),
        ("memories", "0018_scale_same_org_keys"),
    ]

    operations = [same_organization_key(*key) for key in KEYS]

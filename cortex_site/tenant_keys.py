"""Same-organization foreign keys: the tenant-aware form of a foreign key, for migrations.

Django's foreign keys reference `id` alone. Between two tenant tables Cortex adds a second,
composite key — (organization_id, <column>) → (organization_id, id) — so a row can never point
at another organization's row (a chunk of another tenant's memory, a grant on another tenant's
scope), and so the tables are ready for Citus, which accepts foreign keys between distributed
tables only when they include the distribution column (docs/scaling.md). The target needs a
unique (organization, id) constraint, declared on its model.

Deferred to commit like Django's own keys; a NULL column (an optional key) is not checked.
"""

from __future__ import annotations

from django.db import migrations


def constraint_name(table: str, column: str) -> str:
    model = table.split("_", 1)[1]
    return f"{model}_{column.removesuffix('_id')}_same_org"[:63]


def same_organization_key(table: str, column: str, target_table: str) -> migrations.RunSQL:
    name = constraint_name(table, column)
    return migrations.RunSQL(
        f'ALTER TABLE "{table}" ADD CONSTRAINT "{name}" FOREIGN KEY ("organization_id", "{column}") '
        f'REFERENCES "{target_table}" ("organization_id", "id") DEFERRABLE INITIALLY DEFERRED',
        f'ALTER TABLE "{table}" DROP CONSTRAINT "{name}"',
    )

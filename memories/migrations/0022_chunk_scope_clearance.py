"""MemoryChunk: one index on (scope, clearance_rank) in place of the scope's own.

A reader's lexical candidates are the full-text matches intersected with the rows their read rule
lets through; with the scope alone indexed, a narrow reader's intersection took every row of the
scope and threw away those above their clearance one by one from the table (docs/benchmarks.md).
The new index leads with the scope, so the foreign key keeps an index. Built concurrently (this
migration is not atomic) before the old one is dropped.
"""

import django.db.models.deletion
from django.contrib.postgres.operations import AddIndexConcurrently
from django.db import migrations, models


class Migration(migrations.Migration):
    atomic = False

    dependencies = [("memories", "0021_term_counts")]

    operations = [
        AddIndexConcurrently(
            model_name="memorychunk",
            index=models.Index(fields=["scope", "clearance_rank"], name="chunk_scope_clearance"),
        ),
        migrations.AlterField(
            model_name="memorychunk",
            name="scope",
            field=models.ForeignKey(
                db_index=False, on_delete=django.db.models.deletion.PROTECT, related_name="+", to="memories.scope"
            ),
        ),
    ]

"""The recall vocabulary (memories_recallterm): every lexeme of the organization's chunks, kept in step by
statement-level triggers on memories_memorychunk (one INSERT … SELECT per writing statement, whatever
path wrote the chunks). Typo tolerance looks one-edit spellings of a query word up in it."""

import django.db.models.deletion
from django.db import migrations, models

# Sorted inserts, DO NOTHING on conflict: existing words are never locked or rewritten, so concurrent
# writers only ever wait on each other for a brand-new word, and always in the same order.
TRIGGER = """
CREATE FUNCTION memories_recallterm_collect() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO memories_recallterm (organization_id, lexeme)
    SELECT DISTINCT n.organization_id, word
      FROM new_rows AS n, unnest(tsvector_to_array(n.search_vector)) AS word
     WHERE n.search_vector IS NOT NULL AND length(word) BETWEEN 3 AND 40
     ORDER BY 1, 2
    ON CONFLICT (organization_id, lexeme) DO NOTHING;
    RETURN NULL;
END $$;
CREATE TRIGGER memories_recallterm_on_insert AFTER INSERT ON memories_memorychunk
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION memories_recallterm_collect();
CREATE TRIGGER memories_recallterm_on_update AFTER UPDATE ON memories_memorychunk
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION memories_recallterm_collect();
INSERT INTO memories_recallterm (organization_id, lexeme)
SELECT DISTINCT c.organization_id, word
  FROM memories_memorychunk AS c, unnest(tsvector_to_array(c.search_vector)) AS word
 WHERE c.search_vector IS NOT NULL AND length(word) BETWEEN 3 AND 40
ON CONFLICT (organization_id, lexeme) DO NOTHING;
"""

DROP = """
DROP TRIGGER IF EXISTS memories_recallterm_on_update ON memories_memorychunk;
DROP TRIGGER IF EXISTS memories_recallterm_on_insert ON memories_memorychunk;
DROP FUNCTION IF EXISTS memories_recallterm_collect();
"""


class Migration(migrations.Migration):
    dependencies = [
        ("memories", "0005_token_narrowed"),
    ]

    operations = [
        migrations.CreateModel(
            name="RecallTerm",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("lexeme", models.TextField()),
                (
                    "organization",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, related_name="+", to="memories.organization"
                    ),
                ),
            ],
            options={
                "constraints": [models.UniqueConstraint(fields=("organization", "lexeme"), name="recall_term_unique")],
            },
        ),
        migrations.RunSQL(TRIGGER, DROP),
    ]

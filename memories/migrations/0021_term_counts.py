"""Recall's term statistics kept at write time (memories_termcount) instead of counted per query, and the
typo vocabulary read from them: memories_recallterm and its triggers go.

Statement-level triggers on memories_memorychunk append, for every statement that inserts, updates or
deletes chunks, how many active chunks each (organization, scope, clearance rank) cell gained or lost
per lexeme — the empty lexeme for the chunks themselves. An update that changes none of the counted
columns (a re-embedding) appends nothing."""

import importlib

import django.db.models.deletion
from django.db import migrations, models

# A chunk counts in its cell while it is active; each of its distinct lexemes once, and '' once.
TRIGGER = """
CREATE FUNCTION memories_termcount_collect() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO memories_termcount (organization_id, scope_id, clearance_rank, lexeme, chunks, compacted)
        SELECT n.organization_id, n.scope_id, n.clearance_rank, word, count(*), false
          FROM new_rows AS n, unnest(array_prepend('', tsvector_to_array(n.search_vector))) AS word
         WHERE n.status = 'active'
         GROUP BY 1, 2, 3, 4;
    ELSIF TG_OP = 'DELETE' THEN
        INSERT INTO memories_termcount (organization_id, scope_id, clearance_rank, lexeme, chunks, compacted)
        SELECT o.organization_id, o.scope_id, o.clearance_rank, word, -count(*), false
          FROM old_rows AS o, unnest(array_prepend('', tsvector_to_array(o.search_vector))) AS word
         WHERE o.status = 'active'
         GROUP BY 1, 2, 3, 4;
    ELSE
        INSERT INTO memories_termcount (organization_id, scope_id, clearance_rank, lexeme, chunks, compacted)
        SELECT side.organization_id, side.scope_id, side.clearance_rank, word, sum(side.sign), false
          FROM old_rows AS o JOIN new_rows AS n ON n.id = o.id
               CROSS JOIN LATERAL (
                   VALUES (o.organization_id, o.scope_id, o.clearance_rank, o.status, o.search_vector, -1),
                          (n.organization_id, n.scope_id, n.clearance_rank, n.status, n.search_vector, 1)
               ) AS side(organization_id, scope_id, clearance_rank, status, search_vector, sign),
               unnest(array_prepend('', tsvector_to_array(side.search_vector))) AS word
         WHERE side.status = 'active'
           AND (o.organization_id, o.scope_id, o.clearance_rank, o.status, o.search_vector)
               IS DISTINCT FROM (n.organization_id, n.scope_id, n.clearance_rank, n.status, n.search_vector)
         GROUP BY 1, 2, 3, 4
        HAVING sum(side.sign) <> 0;
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER memories_termcount_on_insert AFTER INSERT ON memories_memorychunk
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION memories_termcount_collect();
CREATE TRIGGER memories_termcount_on_update AFTER UPDATE ON memories_memorychunk
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION memories_termcount_collect();
CREATE TRIGGER memories_termcount_on_delete AFTER DELETE ON memories_memorychunk
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION memories_termcount_collect();
INSERT INTO memories_termcount (organization_id, scope_id, clearance_rank, lexeme, chunks, compacted)
SELECT c.organization_id, c.scope_id, c.clearance_rank, word, count(*), true
  FROM memories_memorychunk AS c, unnest(array_prepend('', tsvector_to_array(c.search_vector))) AS word
 WHERE c.status = 'active'
 GROUP BY 1, 2, 3, 4;
"""

DROP = """
DROP TRIGGER IF EXISTS memories_termcount_on_delete ON memories_memorychunk;
DROP TRIGGER IF EXISTS memories_termcount_on_update ON memories_memorychunk;
DROP TRIGGER IF EXISTS memories_termcount_on_insert ON memories_memorychunk;
DROP FUNCTION IF EXISTS memories_termcount_collect();
"""

vocabulary = importlib.import_module("memories.migrations.0006_recall_vocabulary")


class Migration(migrations.Migration):
    dependencies = [
        ("memories", "0020_digest_membership_email"),
    ]

    operations = [
        migrations.RunSQL(vocabulary.DROP, vocabulary.TRIGGER),
        migrations.CreateModel(
            name="TermCount",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("clearance_rank", models.PositiveSmallIntegerField()),
                ("lexeme", models.TextField()),
                ("chunks", models.IntegerField()),
                ("compacted", models.BooleanField(default=False)),
                (
                    "organization",
                    models.ForeignKey(
                        db_constraint=False,
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="+",
                        to="memories.organization",
                    ),
                ),
                ("scope_id", models.BigIntegerField()),
            ],
        ),
        migrations.DeleteModel(
            name="RecallTerm",
        ),
        migrations.AddIndex(
            model_name="termcount",
            index=models.Index(
                fields=["organization", "lexeme", "scope_id", "clearance_rank"], include=("chunks",), name="term_count_lookup"
            ),
        ),
        migrations.AddIndex(
            model_name="termcount",
            index=models.Index(condition=models.Q(("compacted", False)), fields=["id"], name="term_count_pending"),
        ),
        migrations.RunSQL(TRIGGER, DROP),
    ]

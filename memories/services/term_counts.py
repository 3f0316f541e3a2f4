"""Compaction of recall's term counts (memories_termcount).

The chunk triggers append one row per (cell, lexeme) for every statement that changes chunks, so
writers never wait on each other for a shared counter. Readers sum a key's rows, which stays right
however many there are, but grows slower with them: `term_counts_compact` folds each recently
appended key's rows into one (beat runs it every minute, in bounded batches).
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db import connection, transaction

# One compaction at a time: two folding the same key at once could each wait for the other's rows.
_LOCK_KEY = 7302_0002


@dataclass(frozen=True)
class Compaction:
    folded: int  # appended rows whose keys were folded
    more: bool  # the batch was full: appended rows may remain


def term_counts_compact(*, batch_size: int) -> Compaction:
    """Fold the keys of up to `batch_size` appended rows (oldest first) into one row each, in one
    transaction; a key whose rows sum to 0 is deleted. Readers see the rows before or after, never a
    mix, and a row a writer appends meanwhile is not in this snapshot: it stays, and its delta with
    it. Running it again folds nothing more. Skipped (0) while another compaction runs."""
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_xact_lock(%s)", [_LOCK_KEY])
        if not cursor.fetchone()[0]:
            return Compaction(folded=0, more=False)
        cursor.execute(
            """
            WITH appended AS MATERIALIZED (
                SELECT organization_id, scope_id, clearance_rank, lexeme FROM memories_termcount
                 WHERE NOT compacted ORDER BY id LIMIT %s
            ), folded AS (
                DELETE FROM memories_termcount AS t
                 USING (SELECT DISTINCT * FROM appended) AS k
                 WHERE t.organization_id = k.organization_id AND t.lexeme = k.lexeme
                   AND t.scope_id = k.scope_id AND t.clearance_rank = k.clearance_rank
                RETURNING t.organization_id, t.scope_id, t.clearance_rank, t.lexeme, t.chunks
            ), written AS (
                INSERT INTO memories_termcount (organization_id, scope_id, clearance_rank, lexeme, chunks, compacted)
                SELECT organization_id, scope_id, clearance_rank, lexeme, sum(chunks), true FROM folded
                 GROUP BY 1, 2, 3, 4 HAVING sum(chunks) <> 0
                RETURNING 1
            )
            SELECT (SELECT count(*) FROM appended), (SELECT count(*) FROM written)
            """,
            [batch_size],
        )
        appended, _written = cursor.fetchone()
    return Compaction(folded=appended, more=appended == batch_size)

"""Recall's statements, prepared once per database session and planned once.

PostgreSQL parsed and planned recall's statements on every query: for the candidates' statement
(memories/retrieval/sql.py, `retrieve`) ~1–2 ms of a Contractor's 10–15 ms at 100k memories, for the
term statistics 0.3 ms of planning for 0.1 ms of work (docs/benchmarks.md). `fetch` runs such a
statement with PREPARE / EXECUTE and a generic plan: its caller writes into the text what the planner
could tailor to a query's values (the reader's organization, scopes and clearance, the limits), so
each reader's form is planned once; the values left as parameters (a query's vector and terms, the
moment) never told the planner anything.

The names prepared on each session are kept here, by the session's connection object: a new
connection starts with none, and one this process is not sure of is cleared (DEALLOCATE ALL) first.
`DB_PREPARED_STATEMENTS=0` sends the statements whole instead: a transaction pooler (PgBouncer in
transaction mode) gives each transaction whichever server session is free, where they are not.
"""

from __future__ import annotations

import hashlib
import re
import threading
import weakref
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

from django.conf import settings
from django.db import DatabaseError

# Forms kept per session; the least recently used is dropped beyond this (each holds its plan).
PREPARED_KEPT = 200
# An EXECUTE of a statement the session does not hold, or a PREPARE of one it does: its statements
# were dropped or made behind this process's back (a DEALLOCATE ALL, a transaction pooler).
_LOST_STATEMENT = frozenset({"26000", "42P05"})
_PLACEHOLDER = re.compile(r"%([%s])")

_names: weakref.WeakKeyDictionary[Any, OrderedDict[str, None]] = weakref.WeakKeyDictionary()
_lock = threading.Lock()


def fetch(
    connection: Any, statement: str, params: Sequence[Any], *, planner_settings: str = "", prepare: bool = True
) -> list[tuple[Any, ...]]:
    """The rows of `statement` (`%s` placeholders, `params` in order) on `connection`, after
    `planner_settings` (SET LOCAL statements) in the same message: as the session's prepared statement
    with a generic plan, unless `prepare` is false or DB_PREPARED_STATEMENTS is off. A prepared statement
    the session lost is prepared again once — unless a transaction is open, which the failed EXECUTE
    aborted: that call fails, and the next one prepares again."""
    settings_part = f"{planner_settings}; " if planner_settings else ""
    with connection.cursor() as cursor:
        if not (prepare and settings.DB_PREPARED_STATEMENTS):
            cursor.execute(f"{settings_part}{statement}", params)
            return rows_after_settings(cursor)
        try:
            return _execute(cursor, connection, settings_part, statement, params)
        except DatabaseError as error:
            lost = getattr(error.__cause__, "sqlstate", None) in _LOST_STATEMENT
            if not lost or not connection.get_autocommit():
                raise
        return _execute(cursor, connection, settings_part, statement, params)  # the session was cleared: once more


def _execute(cursor: Any, connection: Any, settings_part: str, statement: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
    try:
        cursor.execute(
            f"{settings_part}SET LOCAL plan_cache_mode = force_generic_plan; {_commands(connection, statement)}", params
        )
        return rows_after_settings(cursor)
    except DatabaseError:
        # Whether the message's PREPARE ran before it failed is not known: start the session afresh.
        _forget(connection.connection)
        raise


def rows_after_settings(cursor: Any) -> list[tuple[Any, ...]]:
    """The rows of the last statement of a message that began with SET LOCAL (or other) statements."""
    while cursor.description is None and cursor.nextset():
        pass  # a statement without rows (SET LOCAL, PREPARE): on to the next result
    return cursor.fetchall()


def _commands(connection: Any, statement: str) -> str:
    """The commands that run `statement` as the session's prepared statement: EXECUTE, after a PREPARE
    the first time, and after a DEALLOCATE of the least recently used when the session holds
    PREPARED_KEPT. Its name is a digest of its text: a form is prepared once per session."""
    count = 0

    def number(match: re.Match[str]) -> str:
        nonlocal count
        if match.group(1) == "%":
            return "%%"  # the whole message still goes through the cursor's parameter formatting
        count += 1
        return f"${count}"

    numbered = _PLACEHOLDER.sub(number, statement)
    name = "cortex_" + hashlib.blake2b(numbered.encode(), digest_size=10).hexdigest()
    connection.ensure_connection()
    commands = []
    with _lock:
        names = _names.get(connection.connection)
        if names is None:
            names = _names[connection.connection] = OrderedDict()
            commands.append("DEALLOCATE ALL")
        if name in names:
            names.move_to_end(name)
        else:
            names[name] = None
            commands.append(f"PREPARE {name} AS {numbered}")
            if len(names) > PREPARED_KEPT:
                commands.insert(0, f"DEALLOCATE {names.popitem(last=False)[0]}")
    commands.append(f"EXECUTE {name}({', '.join(['%s'] * count)})" if count else f"EXECUTE {name}")
    return "; ".join(commands)


def _forget(session: Any) -> None:
    if session is None:  # the connection is gone already, and its statements with it
        return
    with _lock:
        _names.pop(session, None)

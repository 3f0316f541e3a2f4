"""Recall's statements prepared once per database session and run with a generic plan (memories/retrieval/prepared.py):
the same answers as the statements sent whole, a PREPARE only the first time a session meets a form of one, and
recall still answering when the session's statements are gone — dropped behind its back, a new connection, more
forms than a session keeps — or when DB_PREPARED_STATEMENTS turns preparing off."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection, transaction
from django.db.utils import ProgrammingError
from django.test.utils import CaptureQueriesContext
from support import principal, remember

from memories.access import Principal
from memories.models import Memory
from memories.retrieval import prepared
from memories.selectors.recall import RecallQuery, recall

# Autocommit, as a request runs recall (a plain django_db test would run it inside a transaction).
pytestmark = pytest.mark.django_db(transaction=True)

FACTS = [
    "The robot fleet firmware ships on Tuesdays after the canary run.",
    "Our CI pipeline runs the integration suite on every merge to main.",
    "Kubernetes nodes are patched monthly by the platform team.",
    "The on-call rotation hands over every Monday at ten.",
    "Database backups are verified weekly by restoring them to staging.",
]
QUESTION = "when does the firmware ship"
OTHER_FORM = "database backups restore staging verified weekly"  # more terms: another form of the statement


@pytest.fixture
def reader(acme: dict[str, Any]) -> Principal:
    for text in FACTS:
        remember(acme["employee"], text, scope="engineering", clearance_min="Contractor")
    return principal(acme["employee"])


def _answers(reader: Principal, text: str = QUESTION) -> tuple[list[tuple[str, float]], list[str]]:
    """The hits (memory id, score) of a recall and the SQL messages it sent."""
    with CaptureQueriesContext(connection) as captured:
        hits = recall(reader, RecallQuery(text, limit=5), audit=False).hits
    return [(str(hit.memory.pk), hit.score) for hit in hits], [query["sql"] for query in captured.captured_queries]


def _retrieving(messages: list[str]) -> str:
    """The message that read the candidates (the one that sets the vector search's breadth)."""
    [message] = [m for m in messages if "hnsw.ef_search" in m]
    return message


def test_the_same_answers_as_the_statement_sent_whole(reader: Principal, settings: Any) -> None:
    settings.DB_PREPARED_STATEMENTS = False
    whole, messages = _answers(reader)
    assert "EXECUTE" not in _retrieving(messages)
    assert "firmware" in _retrieving(messages)
    settings.DB_PREPARED_STATEMENTS = True
    for _ in range(3):  # prepared, then executed with its generic plan
        prepared, messages = _answers(reader)
        assert "EXECUTE cortex_" in _retrieving(messages)
        assert prepared == whole
    assert whole[0][0] == str(Memory.objects.get(content=FACTS[0]).pk)


def test_a_form_is_prepared_once_per_session(reader: Principal) -> None:
    _hits, first = _answers(reader)
    _hits, second = _answers(reader)
    _hits, other = _answers(reader, OTHER_FORM)
    assert "PREPARE cortex_" in _retrieving(first)
    assert "PREPARE" not in _retrieving(second)
    assert "PREPARE cortex_" in _retrieving(other)


def test_statements_dropped_behind_its_back_are_prepared_again(reader: Principal) -> None:
    _answers(reader)  # prepares
    before, usual = _answers(reader)
    with connection.cursor() as cursor:
        cursor.execute("DEALLOCATE ALL")
    after, messages = _answers(reader)
    assert after == before
    # The first EXECUTE failed; its retry cleared the session and prepared again, and so did the rest.
    executed = [m for m in messages if "EXECUTE cortex_" in m]
    assert len(executed) == len([m for m in usual if "EXECUTE cortex_" in m]) + 1
    assert "PREPARE" not in executed[0]
    assert "DEALLOCATE ALL" in executed[1] and "PREPARE cortex_" in executed[1]
    assert "PREPARE cortex_" in _retrieving(messages)
    _hits, messages = _answers(reader)
    assert not [m for m in messages if "PREPARE" in m]


def test_inside_a_transaction_a_lost_statement_fails_that_recall_only(reader: Principal) -> None:
    before, _messages = _answers(reader)
    with connection.cursor() as cursor:
        cursor.execute("DEALLOCATE ALL")
    # The caller's transaction is aborted by the failed EXECUTE, so there is no retry inside it.
    with pytest.raises(ProgrammingError, match="does not exist"), transaction.atomic():
        recall(reader, RecallQuery(QUESTION, limit=5), audit=False)
    with transaction.atomic():
        assert recall(reader, RecallQuery(QUESTION, limit=5), audit=False).hits
    after, _messages = _answers(reader)
    assert after == before


def test_a_new_connection_prepares_again(reader: Principal) -> None:
    before, _messages = _answers(reader)
    connection.close()
    after, messages = _answers(reader)
    assert after == before
    assert "PREPARE cortex_" in _retrieving(messages)


def test_the_least_recently_used_form_is_dropped(reader: Principal, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(prepared, "PREPARED_KEPT", 1)
    first, _messages = _answers(reader)
    _hits, messages = _answers(reader, OTHER_FORM)
    assert "DEALLOCATE cortex_" in _retrieving(messages)
    again, messages = _answers(reader)
    assert again == first
    assert "PREPARE cortex_" in _retrieving(messages)


def test_a_reader_never_runs_another_readers_form(acme: dict[str, Any], reader: Principal) -> None:
    """The read rule's integers are in the prepared text: a Contractor's recall never executes the statement an
    Employee prepared (it would read at the Employee's clearance), on the same session."""
    remember(acme["employee"], "The firmware signing key rotates yearly.", scope="engineering", clearance_min="Employee")
    employee, _messages = _answers(reader)
    seen, messages = _answers(principal(acme["contractor"]))
    assert "PREPARE cortex_" in _retrieving(messages)
    ids = {memory_id for memory_id, _score in seen}
    signing = str(Memory.objects.get(content__startswith="The firmware signing").pk)
    assert signing in {memory_id for memory_id, _score in employee}
    assert signing not in ids
    assert str(Memory.objects.get(content=FACTS[0]).pk) in ids


def test_the_exact_path_is_never_a_prepared_plan(reader: Principal) -> None:
    """recall(exact=True) forbids the index scan with a planner setting, which a plan made once would ignore."""
    indexed, _messages = _answers(reader)
    with CaptureQueriesContext(connection) as captured:
        exact = recall(reader, RecallQuery(QUESTION, limit=5), audit=False, exact=True).hits
    [message] = [query["sql"] for query in captured.captured_queries if "enable_indexscan = off" in query["sql"]]
    assert "EXECUTE" not in message
    assert "firmware" in message
    assert [str(hit.memory.pk) for hit in exact] == [memory_id for memory_id, _score in indexed]

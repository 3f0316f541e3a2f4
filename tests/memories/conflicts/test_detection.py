"""Conflict detection after a write, and the organization's policy resolving what it finds."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from audit.models import AuditEvent
from memories.llm import LLMUnavailable
from memories.llm.fake import ScriptedLLM
from memories.models import Conflict, Memory, Organization
from memories.services import conflicts as conflict_services
from memories.services.conflicts import detection
from memories.services.memories import memory_redact
from memories.tasks import after_memory_write

LIMIT_100 = "The public API rate limit is 100 requests per minute per API key."
LIMIT_250 = "The public API rate limit is 250 requests per minute per API key."


def days_ago(days: int) -> Any:
    return timezone.now() - timedelta(days=days)


def only_conflict() -> Conflict:
    conflicts = list(Conflict.objects.select_related("new_memory", "existing_memory"))
    assert len(conflicts) == 1, conflicts
    return conflicts[0]


def test_a_lower_clearance_contradiction_loses_to_the_higher_authority_and_is_kept_as_dissent(
    acme: dict[str, Any], write: Any
) -> None:
    manager_says = write(acme["manager"], LIMIT_100, title="Public API rate limit", valid_from=days_ago(30))
    employee_says = write(acme["employee"], LIMIT_250, title="Public API rate limit")

    conflict = only_conflict()
    assert (conflict.kind, conflict.classifier) == ("contradiction", "heuristic")
    assert conflict.new_memory_id == employee_says.pk and conflict.existing_memory_id == manager_says.pk
    assert "100" in conflict.explanation and "250" in conflict.explanation
    assert (conflict.status, conflict.resolution, conflict.resolved_by_policy) == ("resolved", "keep_existing", "authority")
    assert "Manager" in conflict.resolution_note and "Employee" in conflict.resolution_note
    employee_says.refresh_from_db()
    manager_says.refresh_from_db()
    assert employee_says.status == Memory.Status.SUPERSEDED and employee_says.superseded_by_id == manager_says.pk
    assert manager_says.status == Memory.Status.ACTIVE
    assert conflict.dissent is not None
    assert conflict.dissent["memory_id"] == str(employee_says.pk)
    assert conflict.dissent["claim"] == LIMIT_250
    assert conflict.dissent["author_clearance"] == "Employee"
    actions = list(AuditEvent.objects.filter(organization=acme["org"], actor_kind="system").values_list("action", flat=True))
    assert {"conflict.detect", "conflict.resolve", "memory.supersede"} <= set(actions)


def test_equal_authority_is_decided_by_recency_and_the_winner_links_back(
    acme: dict[str, Any], make_member: Any, write: Any
) -> None:
    other_employee = make_member(acme["org"], "Employee")
    older = write(acme["employee"], LIMIT_100, title="Public API rate limit", valid_from=days_ago(30))
    newer = write(other_employee, LIMIT_250, title="Public API rate limit")

    conflict = only_conflict()
    assert (conflict.resolution, conflict.resolved_by_policy) == ("keep_new", "recency")
    older.refresh_from_db()
    newer.refresh_from_db()
    assert older.status == "superseded" and older.superseded_by_id == newer.pk
    assert newer.supersedes_id == older.pk
    assert older.external_id == ""  # kept as it was (none here); a connector item keeps its id when it loses


def test_identical_content_from_a_second_source_is_a_duplicate_decided_without_any_model(
    acme: dict[str, Any], write: Any, monkeypatch: Any
) -> None:
    llm = ScriptedLLM([])  # any call would fail the test: identical content needs no model
    monkeypatch.setattr(detection, "get_llm", lambda: llm)
    text = "Checkout latency spiked to 4s for 20 minutes because the Redis primary failed over."
    first = write(acme["employee"], text, title="Incident 2291", source="Notion", scope="engineering")
    second = write(acme["employee"], text, title="Incident 2291", source="Google Drive")  # public-docs

    conflict = only_conflict()
    assert (conflict.kind, conflict.classifier, conflict.similarity) == ("duplicate", "content_hash", 1.0)
    assert "Notion" in conflict.explanation and "Google Drive" in conflict.explanation
    # The copy everyone can read stays; the one in the granted scope is superseded by it.
    assert conflict.resolution == "keep_new"
    first.refresh_from_db()
    assert first.superseded_by_id == second.pk
    assert llm.calls == []


def test_a_near_identical_duplicate_keeps_the_first_record(acme: dict[str, Any], write: Any, make_member: Any) -> None:
    # Both authors hold the same rung (a higher one's copy would win instead: see the next test).
    peer = make_member(acme["org"], "Employee")
    first = write(
        acme["employee"],
        "The office Wi-Fi password rotates on the first Monday of each month.",
        title="Office Wi-Fi",
        source="Slack",
    )
    second = write(
        peer,
        "The office Wi-Fi password rotates on the first Monday of every month.",
        title="Office Wi-Fi",
        source="Gmail",
    )

    conflict = only_conflict()
    assert (conflict.kind, conflict.resolution, conflict.resolved_by_policy) == ("duplicate", "keep_existing", "duplicate")
    second.refresh_from_db()
    assert second.status == "superseded" and second.superseded_by_id == first.pk
    assert conflict.dissent is not None and conflict.dissent["source"] == "Gmail"


def test_a_duplicate_is_never_kept_against_a_higher_authors_copy(acme: dict[str, Any], write: Any) -> None:
    first = write(acme["employee"], "Visitors sign in at the front desk on arrival.", title="Visitors", source="Slack")
    second = write(acme["manager"], "Visitors sign in at the front desk upon arrival.", title="Visitors", source="Gmail")

    conflict = only_conflict()
    # The Employee's earlier copy could not supersede the Manager's by hand, so the Manager's stays.
    assert (conflict.kind, conflict.resolution) == ("duplicate", "keep_new")
    first.refresh_from_db()
    second.refresh_from_db()
    assert first.status == "superseded" and second.status == "active"


ZENDESK_PAGE = (
    "All customer tickets live in Zendesk. Email to support and the web form both create tickets; "
    "phone calls are logged by hand with the phone macro. Jira links go in the internal note."
)
FRESHDESK_NEWS = (
    "We're live on Freshdesk as of this morning. Zendesk is read-only until the end of the month for history, "
    "then archived to Drive. Support email now routes to Freshdesk; macros were migrated."
)


@pytest.mark.parametrize("announcement_first", [False, True], ids=["announcement-later", "announcement-stored-first"])
def test_an_announced_move_away_from_what_an_older_memory_is_about_supersedes_it_below_the_similarity_threshold(
    acme: dict[str, Any], write: Any, announcement_first: bool, use_embedder: Any
) -> None:
    use_embedder("local")  # the real model: how related the two read is the point (cosine ~0.6)

    def page() -> Memory:
        return write(
            acme["employee"],
            ZENDESK_PAGE,
            title="Support tooling: where tickets live",
            tags=["support", "zendesk"],
            valid_from=days_ago(500),
        )

    def news() -> Memory:
        return write(
            acme["employee"],
            FRESHDESK_NEWS,
            title="Support has moved from Zendesk to Freshdesk",
            tags=["support", "freshdesk"],
            valid_from=days_ago(80),
        )

    # An import can store the older page after the announcement: detection finds the pair either way.
    if announcement_first:
        newer, older = news(), page()
    else:
        older, newer = page(), news()

    conflict = only_conflict()
    assert (conflict.kind, conflict.classifier, conflict.resolved_by_policy) == ("stale", "heuristic", "stale")
    assert conflict.similarity < conflict_services.SIMILARITY_THRESHOLD  # not a near neighbour: found by the statement
    assert "moved from Zendesk to Freshdesk" in conflict.explanation
    older.refresh_from_db()
    assert (older.status, older.superseded_by_id) == (Memory.Status.SUPERSEDED, newer.pk)


def test_an_announced_move_of_something_else_leaves_the_tools_page_alone(
    acme: dict[str, Any], write: Any, use_embedder: Any
) -> None:
    use_embedder("local")
    database = write(
        acme["employee"],
        "Fleet Console's database is the pg-fc Patroni cluster running Postgres 13.8, with PgBouncer in front.",
        title="Fleet Console database: current setup",
        tags=["postgres", "database"],
        valid_from=days_ago(200),
    )
    write(
        acme["employee"],
        "Moves Django session storage for Fleet Console from the pg-fc Postgres database to the Redis cluster.",
        title="Move Fleet Console sessions from Postgres to Redis",
    )

    assert not Conflict.objects.exists()
    database.refresh_from_db()
    assert database.status == Memory.Status.ACTIVE


def test_manual_policy_queues_every_conflict_and_changes_no_memory(acme: dict[str, Any], write: Any) -> None:
    Organization.objects.filter(pk=acme["org"].pk).update(conflict_policy=Organization.ConflictPolicy.MANUAL)
    a = write(acme["manager"], LIMIT_100, title="Public API rate limit", valid_from=days_ago(3))
    b = write(acme["employee"], LIMIT_250, title="Public API rate limit")

    conflict = only_conflict()
    assert (conflict.status, conflict.resolution, conflict.dissent) == ("open", "", None)
    assert set(Memory.objects.filter(pk__in=[a.pk, b.pk]).values_list("status", flat=True)) == {"active"}


def test_related_but_compatible_memories_are_candidates_but_not_conflicts(acme: dict[str, Any], write: Any) -> None:
    write(acme["employee"], "In staging the database connection pool size is 10.", title="Database connection pool")
    newer = write(acme["employee"], "In production the database connection pool size is 50.", title="Database connection pool")

    assert conflict_services.conflict_candidates(newer), "the pair is similar enough to be compared"
    assert not Conflict.objects.exists()


def test_a_memory_whose_validity_ended_is_stale_and_gives_way(acme: dict[str, Any], write: Any) -> None:
    old = write(acme["employee"], "Staging deploys are frozen until the database migration finishes.", title="Staging deploys",
                valid_from=days_ago(10), valid_until=days_ago(1))  # fmt: skip
    new = write(
        acme["employee"], "Staging deploys are no longer frozen: the database migration finished.", title="Staging deploys"
    )

    conflict = only_conflict()
    assert (conflict.kind, conflict.resolution, conflict.resolved_by_policy) == ("stale", "keep_new", "stale")
    old.refresh_from_db()
    assert old.superseded_by_id == new.pk


def test_memories_of_another_organization_are_never_compared(acme: dict[str, Any], outsider: Any, write: Any) -> None:
    write(outsider, LIMIT_100, title="Public API rate limit")
    write(acme["employee"], LIMIT_250, title="Public API rate limit")
    assert not Conflict.objects.exists()


def test_a_winner_that_fewer_people_can_read_does_not_silently_replace_a_public_memory(acme: dict[str, Any], write: Any) -> None:
    public = write(acme["employee"], LIMIT_100, title="Public API rate limit", valid_from=days_ago(5))
    write(acme["manager"], LIMIT_250, title="Public API rate limit", scope="engineering")

    conflict = only_conflict()
    assert conflict.status == "open"
    assert "fewer people" in conflict.resolution_note
    public.refresh_from_db()
    assert public.status == "active"


def test_running_the_post_write_task_again_changes_nothing(acme: dict[str, Any], write: Any) -> None:
    write(acme["manager"], LIMIT_100, title="Public API rate limit", valid_from=days_ago(30))
    new = write(acme["employee"], LIMIT_250, title="Public API rate limit")
    snapshot = (
        list(Conflict.objects.values()),
        list(Memory.objects.order_by("pk").values("pk", "status", "superseded_by")),
        AuditEvent.objects.count(),
    )

    for memory in Memory.objects.all():
        after_memory_write.apply(args=(str(memory.pk),)).get(disable_sync_subtasks=False)
    after_memory_write.apply(args=(str(new.pk),)).get(disable_sync_subtasks=False)

    assert (
        list(Conflict.objects.values()),
        list(Memory.objects.order_by("pk").values("pk", "status", "superseded_by")),
        AuditEvent.objects.count(),
    ) == snapshot


def test_redacting_a_memory_removes_its_words_from_conflicts(acme: dict[str, Any], write: Any, principal_of: Any) -> None:
    write(acme["manager"], LIMIT_100, title="Public API rate limit", valid_from=days_ago(30))
    loser = write(acme["employee"], LIMIT_250, title="Public API rate limit")

    memory_redact(principal=principal_of(acme["exec"]), memory_id=loser.pk, reason="wrong figure, leaked internal plan")

    conflict = only_conflict()
    assert "250" not in str(conflict.dissent) and "250" not in conflict.explanation
    assert conflict.dissent == {"memory_id": str(loser.pk), "redacted": True}


# -- with an LLM ----------------------------------------------------------------------------------
def judgement(verdict: str, confidence: float, *, outdated: str = "neither", same_subject: bool = True) -> dict[str, Any]:
    return {
        "reasoning": "Both give the public API rate limit per key; one says 100, the other 250.",
        "same_subject": same_subject,
        "verdict": verdict,
        "outdated": outdated,
        "confidence": confidence,
        "explanation": "The two memories give different rate limits for the same API.",
    }


@pytest.fixture
def scripted(monkeypatch: Any) -> Any:
    def install(*responses: Any) -> ScriptedLLM:
        llm = ScriptedLLM(list(responses), name="anthropic", model="claude-test")
        monkeypatch.setattr(detection, "get_llm", lambda: llm)
        return llm

    return install


def test_the_llm_judgement_reasons_first_and_is_recorded_with_its_model(acme: dict[str, Any], write: Any, scripted: Any) -> None:
    llm = scripted(judgement("contradiction", 0.93))
    write(acme["manager"], LIMIT_100, title="Public API rate limit", valid_from=days_ago(30))
    write(acme["employee"], LIMIT_250, title="Public API rate limit")

    conflict = only_conflict()
    assert (conflict.kind, conflict.classifier, conflict.confidence) == ("contradiction", "anthropic:claude-test", 0.93)
    assert conflict.explanation == "The two memories give different rate limits for the same API."
    assert conflict.status == "resolved"
    schema = llm.calls[0].json_schema
    assert list(schema["properties"])[:3] == ["reasoning", "same_subject", "verdict"]
    assert LIMIT_100 in llm.calls[0] and LIMIT_250 in llm.calls[0]


def test_a_low_confidence_llm_contradiction_goes_to_the_manual_queue(acme: dict[str, Any], write: Any, scripted: Any) -> None:
    scripted(judgement("contradiction", 0.55))
    a = write(acme["manager"], LIMIT_100, title="Public API rate limit", valid_from=days_ago(30))
    b = write(acme["employee"], LIMIT_250, title="Public API rate limit")

    conflict = only_conflict()
    assert conflict.status == "open" and "unsure" in conflict.resolution_note
    assert set(Memory.objects.filter(pk__in=[a.pk, b.pk]).values_list("status", flat=True)) == {"active"}


def test_an_llm_saying_different_subjects_records_nothing(acme: dict[str, Any], write: Any, scripted: Any) -> None:
    scripted(judgement("contradiction", 0.9, same_subject=False))
    write(acme["manager"], LIMIT_100, title="Public API rate limit")
    write(acme["employee"], LIMIT_250, title="Public API rate limit")
    assert not Conflict.objects.exists()


@pytest.mark.parametrize(
    "failure", [LLMUnavailable("anthropic timed out", retryable=True), '{"verdict": "maybe"}', "not json at all"]
)
def test_an_llm_that_times_out_or_answers_junk_falls_back_to_the_heuristic_and_says_so(
    acme: dict[str, Any], write: Any, scripted: Any, failure: Any
) -> None:
    scripted(failure)
    write(acme["manager"], LIMIT_100, title="Public API rate limit", valid_from=days_ago(30))
    write(acme["employee"], LIMIT_250, title="Public API rate limit")

    conflict = only_conflict()
    assert (conflict.kind, conflict.classifier) == ("contradiction", "heuristic")
    assert "anthropic:claude-test" in conflict.explanation and "the heuristic decided" in conflict.explanation

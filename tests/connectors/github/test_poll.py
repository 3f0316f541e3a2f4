"""GitHub poll mode through the sync framework: PyGithub against the loopback stub, cursor
continuation across runs, the per-run cap, replays, rate limits and a revoked token.

The listed pull requests are the recorded merged PR (fixtures/pull_request__closed_merged.json)
with only number, title and times changed, so each run has several PRs to page through.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import pytest
from github_webhooks import github_json
from support.stub_server import Received, StubResponse, StubServer

from audit.models import AuditEvent
from connectors.models import Connector, SyncRun
from connectors.services import backoff
from connectors.services.sync import sync_run_page, sync_start
from memories.models import Memory

pytestmark = pytest.mark.django_db

REPO = "robvanderleek/create-issue-branch"
LIST_PATH = f"/repos/{REPO}/pulls"
BODIES = [
    "Move the nightly export job from cron to the Celery beat schedule.",
    "Teach the branch name generator about emoji in issue titles.",
    "Drop Node 12 from the test matrix; it reached end of life.",
    "Document the configuration file format with three examples.",
    "Retry GitHub API calls on 502 with exponential backoff.",
    "Add a dark theme to the settings page, following the system.",
    "Fix the off-by-one in pagination of the installations list.",
]


def pr(number: int, merged_at: datetime) -> dict[str, Any]:
    pull = copy.deepcopy(github_json("pull_request__closed_merged.json")["pull_request"])
    stamp = merged_at.strftime("%Y-%m-%dT%H:%M:%SZ")
    pull.update(
        number=number,
        title=f"Change {number}",
        # Distinct words per PR: near-identical bodies would be (rightly) folded by conflict detection.
        body=BODIES[number % len(BODIES)],
        url=f"https://api.github.com/repos/{REPO}/pulls/{number}",
        html_url=f"https://github.com/{REPO}/pull/{number}",
        merged_at=stamp,
        closed_at=stamp,
        updated_at=stamp,
    )
    return pull


class FakeRepo:
    """The stub's answers for one repository: the closed-PR list, each PR, and its files."""

    def __init__(self, stub: StubServer) -> None:
        self.pulls: dict[int, dict[str, Any]] = {}
        stub.route("GET", LIST_PATH, self.list_answer)
        stub.route("GET", rf"{LIST_PATH}/\d+", self.pull_answer)
        stub.route("GET", rf"{LIST_PATH}/\d+/files", StubResponse(json=[]))

    def add(self, *pulls: dict[str, Any]) -> None:
        for pull in pulls:
            self.pulls[pull["number"]] = pull

    def list_answer(self, request: Received) -> StubResponse:
        ordered = sorted(self.pulls.values(), key=lambda p: p["updated_at"], reverse=True)
        return StubResponse(json=ordered)

    def pull_answer(self, request: Received) -> StubResponse:
        match = re.search(r"/(\d+)$", request.path)
        pull = self.pulls.get(int(match.group(1))) if match else None
        return StubResponse(json=pull) if pull else StubResponse(status=404, json={"message": "Not Found"})


@pytest.fixture
def repo(stub_server: StubServer) -> FakeRepo:
    return FakeRepo(stub_server)


@pytest.fixture
def run_sync(django_capture_on_commit_callbacks: Any) -> Callable[..., SyncRun]:
    """Start a run and let its page chain run (eager tasks) to the end."""

    def run(connector: Connector, trigger: str = SyncRun.Trigger.MANUAL) -> SyncRun:
        with django_capture_on_commit_callbacks(execute=True):
            result = sync_start(connector=connector, trigger=trigger)
        result.run.refresh_from_db()
        return result.run

    return run


def _titles(connector: Connector) -> list[str]:
    return sorted(
        Memory.objects.filter(organization_id=connector.organization_id, source="GitHub", status="active").values_list(
            "title", flat=True
        )
    )


def test_poll_pages_through_merged_prs_with_the_cap_and_continues_from_the_checkpoint(
    acme: dict[str, Any], make_github: Callable[..., Connector], repo: FakeRepo, run_sync: Callable[..., SyncRun], settings: Any
) -> None:
    settings.CORTEX_CONNECTOR_PAGE_SIZE = 2
    connector = make_github(acme["exec"], mode="poll", per_run_cap=3, first_run_days=2)
    now = datetime.now().astimezone()
    repo.add(*(pr(n, now - timedelta(hours=10 - n)) for n in range(1, 6)), pr(99, now - timedelta(days=5)))

    first = run_sync(connector)
    assert first.status == SyncRun.Status.SUCCEEDED, first.error
    assert (first.items_created, first.pages_done, first.progress_done, first.progress_total) == (3, 2, 3, 5)
    assert _titles(connector) == ["Change 1", "Change 2", "Change 3"]  # oldest first; #99 is before the window
    cursor = first.checkpoint_after[f"repo:{REPO}"]["merged_since"]
    assert cursor.startswith((now - timedelta(hours=7)).strftime("%Y-%m-%dT%H"))

    second = run_sync(connector)
    assert second.status == SyncRun.Status.SUCCEEDED
    assert second.checkpoint_before == first.checkpoint_after
    assert (second.items_created, second.items_skipped) == (2, 0)
    assert _titles(connector) == [f"Change {n}" for n in range(1, 6)]

    # Nothing new at the source: a third run writes nothing, and the cursor moved up to about now.
    third = run_sync(connector)
    assert (third.status, third.items_created, third.items_updated) == (SyncRun.Status.SUCCEEDED, 0, 0)
    assert Memory.objects.filter(source="GitHub").count() == 5

    # A PR merged later arrives on the next run.
    repo.add(pr(6, datetime.now().astimezone()))
    fourth = run_sync(connector)
    assert fourth.items_created == 1 and "Change 6" in _titles(connector)
    connector.refresh_from_db()
    assert connector.last_synced_at is not None and connector.next_sync_at is not None
    assert connector.next_sync_at > connector.last_synced_at


def test_a_second_trigger_while_a_run_is_alive_is_recorded_as_skipped(
    acme: dict[str, Any], make_github: Callable[..., Connector], repo: FakeRepo
) -> None:
    connector = make_github(acme["exec"], mode="poll")
    first = sync_start(connector=connector, trigger=SyncRun.Trigger.SCHEDULE)  # its page is not run (no commit)
    second = sync_start(connector=connector, trigger=SyncRun.Trigger.MANUAL)
    assert second.skipped and second.running == first.run
    assert second.run.status == SyncRun.Status.SKIPPED and str(first.run.pk) in second.run.error
    assert AuditEvent.objects.filter(action="connector.sync_skip", target_id=str(second.run.pk)).exists()
    assert SyncRun.objects.filter(connector=connector, status__in=["queued", "running"]).count() == 1


def test_a_dead_run_is_taken_over_and_the_next_run_resumes_from_its_checkpoint(
    acme: dict[str, Any],
    make_github: Callable[..., Connector],
    repo: FakeRepo,
    run_sync: Callable[..., SyncRun],
    settings: Any,
    stub_server: StubServer,
) -> None:
    settings.CORTEX_CONNECTOR_PAGE_SIZE = 2
    connector = make_github(acme["exec"], mode="poll", first_run_days=2)
    now = datetime.now().astimezone()
    repo.add(*(pr(n, now - timedelta(hours=10 - n)) for n in range(1, 6)))

    # The worker runs one page (two PRs, committed with their checkpoint) and dies before the next.
    started = sync_start(connector=connector, trigger=SyncRun.Trigger.SCHEDULE).run
    outcome = sync_run_page(run_id=started.pk, page=0)
    assert outcome.next_page == 1
    assert _titles(connector) == ["Change 1", "Change 2"]
    # A redelivered task for the page already done does nothing.
    assert sync_run_page(run_id=started.pk, page=0).next_page is None
    assert Memory.objects.filter(source="GitHub").count() == 2

    # While its lease runs, nothing else starts; once it expires, the run counts as dead.
    assert sync_start(connector=connector, trigger=SyncRun.Trigger.SCHEDULE).skipped
    SyncRun.objects.filter(pk=started.pk).update(
        heartbeat_at=now - timedelta(seconds=settings.CORTEX_CONNECTOR_LEASE_SECONDS + 5)
    )
    resumed = run_sync(connector, SyncRun.Trigger.SCHEDULE)

    started.refresh_from_db()
    assert started.status == SyncRun.Status.FAILED and "stopped" in started.error
    assert resumed.status == SyncRun.Status.SUCCEEDED
    assert resumed.checkpoint_before == started.checkpoint_after or resumed.checkpoint_before[f"repo:{REPO}"]
    # Nothing lost, nothing doubled: exactly the five PRs, each once.
    assert _titles(connector) == [f"Change {n}" for n in range(1, 6)]
    assert Memory.objects.filter(source="GitHub").count() == 5
    # The late page of the dead run, should its task still arrive, does nothing.
    assert sync_run_page(run_id=started.pk, page=1).next_page is None
    assert Memory.objects.filter(source="GitHub").count() == 5


def test_a_429_with_retry_after_is_shared_and_honoured(
    acme: dict[str, Any], make_github: Callable[..., Connector], repo: FakeRepo, stub_server: StubServer
) -> None:
    connector = make_github(acme["exec"], mode="poll", first_run_days=1)
    repo.add(pr(1, datetime.now().astimezone() - timedelta(hours=1)))
    stub_server.route(
        "GET",
        LIST_PATH,
        StubResponse(status=429, json={"message": "Too many requests"}, headers={"Retry-After": "7"}),
        repo.list_answer,
    )
    run = sync_start(connector=connector, trigger=SyncRun.Trigger.MANUAL).run

    outcome = sync_run_page(run_id=run.pk, page=0)
    assert outcome.retry_after == 7
    assert 5 < backoff.remaining(connector.pk) <= 7
    run.refresh_from_db()
    assert (run.status == SyncRun.Status.RUNNING and "rate limit" in run.error.lower()) or "slow down" in run.error
    calls = len(stub_server.requests_to(LIST_PATH))

    # Any worker of this connector waits: the source is not called during the shared backoff.
    again = sync_run_page(run_id=run.pk, page=0, attempt=1)
    assert again.retry_after is not None and again.retry_after > 5
    assert len(stub_server.requests_to(LIST_PATH)) == calls

    backoff.clear(connector.pk)  # the wait is over
    assert sync_run_page(run_id=run.pk, page=0, attempt=2).next_page is None
    run.refresh_from_db()
    assert (run.status, run.items_created) == (SyncRun.Status.SUCCEEDED, 1)


def test_a_revoked_token_puts_the_connector_in_error_with_a_sentence_and_no_retry(
    acme: dict[str, Any], make_github: Callable[..., Connector], stub_server: StubServer, run_sync: Callable[..., SyncRun]
) -> None:
    connector = make_github(acme["exec"], mode="poll")
    stub_server.route("GET", LIST_PATH, StubResponse(status=401, json={"message": "Bad credentials"}))

    run = run_sync(connector)

    assert run.status == SyncRun.Status.FAILED
    connector.refresh_from_db()
    assert connector.status == Connector.Status.ERROR
    assert "revoked" in connector.last_error and "rotate" in connector.last_error
    assert "ghp_" not in connector.last_error and "ghp_" not in run.error
    assert len(stub_server.requests_to(LIST_PATH)) == 1  # no retry loop
    event = AuditEvent.objects.get(action="connector.error", target_id=str(connector.pk))
    assert event.outcome == "error" and event.actor_kind == AuditEvent.ActorKind.CONNECTOR


def test_a_server_error_is_retried_then_the_run_fails_keeping_the_checkpoint(
    acme: dict[str, Any], make_github: Callable[..., Connector], stub_server: StubServer
) -> None:
    connector = make_github(acme["exec"], mode="poll")
    stub_server.route("GET", LIST_PATH, StubResponse(status=502, json={"message": "Bad gateway"}))
    run = sync_start(connector=connector, trigger=SyncRun.Trigger.MANUAL).run
    outcomes = [sync_run_page(run_id=run.pk, page=0, attempt=attempt) for attempt in range(6)]
    assert all(o.retry_after for o in outcomes[:5]) and outcomes[5].retry_after is None
    run.refresh_from_db()
    assert run.status == SyncRun.Status.FAILED and "Gave up after 6 attempts" in run.error
    connector.refresh_from_db()
    assert connector.status == Connector.Status.ACTIVE  # a passing outage is not the connector's fault


@pytest.mark.parametrize("status", [403, 429])
def test_a_secondary_rate_limit_without_retry_after_makes_every_worker_wait_a_minute(
    acme: dict[str, Any], make_github: Callable[..., Connector], repo: FakeRepo, stub_server: StubServer, status: int
) -> None:
    # GitHub: with neither Retry-After nor a spent X-RateLimit-Remaining, wait at least one minute.
    connector = make_github(acme["exec"], mode="poll", first_run_days=1)
    repo.add(pr(1, datetime.now().astimezone() - timedelta(hours=1)))
    message = "You have exceeded a secondary rate limit. Please wait a few minutes before you try again."
    stub_server.route("GET", LIST_PATH, StubResponse(status=status, json={"message": message}), repo.list_answer)
    run = sync_start(connector=connector, trigger=SyncRun.Trigger.MANUAL).run

    outcome = sync_run_page(run_id=run.pk, page=0)

    assert outcome.retry_after == 60
    assert 55 < backoff.remaining(connector.pk) <= 60
    assert sync_run_page(run_id=run.pk, page=0, attempt=1).retry_after is not None
    assert len(stub_server.requests_to(LIST_PATH)) == 1


@pytest.mark.parametrize(
    "answer",
    [
        StubResponse(json={"message": "Welcome to the proxy"}),
        StubResponse(body=b"<html>Sign in</html>", headers={"Content-Type": "text/html"}),
    ],
    ids=["a JSON object", "a web page"],
)
def test_an_api_url_that_is_not_githubs_api_puts_the_connector_in_error_with_a_sentence(
    acme: dict[str, Any],
    make_github: Callable[..., Connector],
    stub_server: StubServer,
    run_sync: Callable[..., SyncRun],
    answer: StubResponse,
) -> None:
    # A proxy, a sign-in page, GitHub Enterprise without /api/v3: a 200 that is not a list of pull requests.
    connector = make_github(acme["exec"], mode="poll")
    stub_server.route("GET", LIST_PATH, answer)

    run = run_sync(connector)

    assert run.status == SyncRun.Status.FAILED
    connector.refresh_from_db()
    assert connector.status == Connector.Status.ERROR
    assert "api_url" in connector.last_error and "unexpected" not in connector.last_error.lower()
    assert len(stub_server.requests_to(LIST_PATH)) == 1  # permanent: no retry loop


def test_a_repository_typed_in_another_case_names_its_memories_as_github_spells_it(
    acme: dict[str, Any], make_github: Callable[..., Connector], stub_server: StubServer, run_sync: Callable[..., SyncRun]
) -> None:
    typed = "RobVanDerLeek/Create-Issue-Branch"
    pull = pr(5, datetime.now().astimezone() - timedelta(hours=1))
    stub_server.route("GET", f"/repos/{typed}/pulls", StubResponse(json=[pull]))
    stub_server.route("GET", f"/repos/{typed}/pulls/5", StubResponse(json=pull))
    stub_server.route("GET", f"/repos/{typed}/pulls/5/files", StubResponse(json=[]))
    connector = make_github(acme["exec"], mode="poll", repositories=[typed], first_run_days=2)

    assert run_sync(connector).status == SyncRun.Status.SUCCEEDED

    # The name a webhook delivery of the same PR carries (repository.full_name), so both find one memory.
    [memory] = Memory.objects.filter(organization_id=connector.organization_id, source="GitHub")
    assert memory.external_id == f"{REPO}#5"

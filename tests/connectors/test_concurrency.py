"""One sync per connector at a time, with real concurrent transactions (threads, committed data)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest
from django.db import connection
from support.stub_server import StubResponse, StubServer

from connectors.models import Connector, SyncRun
from connectors.services.sync import PageOutcome, StartResult, sync_run_page, sync_start

pytestmark = pytest.mark.django_db(transaction=True)

REPO = "robvanderleek/create-issue-branch"


def _together(*calls: Callable[[], Any]) -> list[Any]:
    """Run the calls in threads released at the same instant; each thread has its own connection."""
    barrier = threading.Barrier(len(calls))
    results: list[Any] = [None] * len(calls)

    def run(index: int, call: Callable[[], Any]) -> None:
        try:
            barrier.wait()
            results[index] = call()
        except BaseException as exc:  # noqa: BLE001 - re-raised below, in the test's thread
            results[index] = exc
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(i, c)) for i, c in enumerate(calls)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    for result in results:
        if isinstance(result, BaseException):
            raise result
    return results


def test_two_triggers_at_once_start_one_run_and_record_the_other_as_skipped(
    acme: dict[str, Any], make_github: Callable[..., Connector], stub_server: StubServer, settings: Any
) -> None:
    settings.CELERY_TASK_ALWAYS_EAGER = False  # the runs' pages are not what this test is about
    from cortex_site.celery import app

    app.conf.task_always_eager = False
    try:
        connector = make_github(acme["exec"], mode="poll")
        results: list[StartResult] = _together(
            lambda: sync_start(connector=connector, trigger=SyncRun.Trigger.MANUAL),
            lambda: sync_start(connector=connector, trigger=SyncRun.Trigger.SCHEDULE),
        )
    finally:
        app.conf.task_always_eager = True
        app.control.purge()
    assert sorted(r.skipped for r in results) == [False, True]
    started = next(r.run for r in results if not r.skipped)
    skipped = next(r for r in results if r.skipped)
    assert skipped.running == started
    assert sorted(SyncRun.objects.values_list("status", flat=True)) == ["queued", "skipped"]


def test_the_same_page_run_twice_at_once_is_applied_once(
    acme: dict[str, Any], make_github: Callable[..., Connector], stub_server: StubServer
) -> None:
    # The list answer is slow, so the first page holds its run's lock while the second arrives.
    stub_server.route("GET", f"/repos/{REPO}/pulls", StubResponse(json=[], delay=1.5))
    connector = make_github(acme["exec"], mode="poll")
    run = SyncRun.objects.create(
        organization_id=connector.organization_id,
        connector=connector,
        trigger=SyncRun.Trigger.MANUAL,
        status=SyncRun.Status.QUEUED,
    )
    outcomes: list[PageOutcome] = _together(
        lambda: sync_run_page(run_id=run.pk, page=0), lambda: sync_run_page(run_id=run.pk, page=0)
    )
    assert outcomes == [PageOutcome(), PageOutcome()]  # one finished the run, the other stood back
    assert len(stub_server.requests_to(f"/repos/{REPO}/pulls")) == 1
    run.refresh_from_db()
    assert (run.status, run.pages_done) == (SyncRun.Status.SUCCEEDED, 1)

"""Jobs: claimed once, re-run safely, retried only for passing trouble, failures reported."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.db import OperationalError
from django.utils import timezone

from cortex_site.errors import Unprocessable
from memories.models import Job
from memories.services import jobs
from memories.tasks import run_job


@pytest.fixture
def job(acme: dict[str, Any], principal_of: Any, django_capture_on_commit_callbacks: Any) -> Job:
    with django_capture_on_commit_callbacks(execute=False):  # created, not run
        return jobs.job_create(
            principal=principal_of(acme["employee"]),
            kind=Job.Kind.EXTRACT_DECISIONS,
            payload={"summary": "We decided to ship on Friday.", "transcript": ""},
        )


def test_running_a_job_twice_runs_its_work_once(job: Job) -> None:
    assert run_job.apply(args=(str(job.pk),)).get(disable_sync_subtasks=False) == "succeeded"
    job.refresh_from_db()
    first = (job.status, job.result, job.finished_at, job.attempts)
    assert run_job.apply(args=(str(job.pk),)).get(disable_sync_subtasks=False) == "skipped"
    job.refresh_from_db()
    assert (job.status, job.result, job.finished_at, job.attempts) == first
    assert job.result is not None and job.result["decisions"][0]["text"] == "We decided to ship on Friday."


def test_a_job_left_running_by_a_dead_worker_is_claimed_again_later(job: Job) -> None:
    Job.objects.filter(pk=job.pk).update(status="running", started_at=timezone.now() - timedelta(seconds=30), attempts=1)
    assert jobs.job_run(job.pk) == "skipped"  # still within the time a live worker may need
    Job.objects.filter(pk=job.pk).update(started_at=timezone.now() - jobs.STALE_AFTER - timedelta(seconds=1))
    assert jobs.job_run(job.pk) == "succeeded"
    assert Job.objects.get(pk=job.pk).attempts == 2


def test_a_job_interrupted_too_often_is_failed_with_a_reason(job: Job) -> None:
    Job.objects.filter(pk=job.pk).update(
        status="running", started_at=timezone.now() - timedelta(hours=1), attempts=jobs.MAX_ATTEMPTS
    )
    assert jobs.job_run(job.pk) == "skipped"
    job.refresh_from_db()
    assert job.status == "failed" and job.error is not None and job.error["code"] == "JOB_ABANDONED"


def test_a_passing_database_error_puts_the_job_back_in_the_queue_for_a_bounded_retry(job: Job, monkeypatch: Any) -> None:
    def flaky(_job: Job) -> dict[str, Any]:
        raise jobs.RetryableJobError("database restarting")

    monkeypatch.setitem(jobs.HANDLERS, Job.Kind.EXTRACT_DECISIONS, flaky)
    with pytest.raises(jobs.RetryableJobError):
        jobs.job_run(job.pk)
    assert Job.objects.get(pk=job.pk).status == "queued"
    assert OperationalError in getattr(run_job, "autoretry_for", ()) and run_job.max_retries == 3


def test_a_permanent_error_fails_the_job_with_its_code_and_message(job: Job, monkeypatch: Any) -> None:
    def refuse(_job: Job) -> dict[str, Any]:
        raise Unprocessable("The transcript is not text.", error_code="NOT_TEXT")

    monkeypatch.setitem(jobs.HANDLERS, Job.Kind.EXTRACT_DECISIONS, refuse)
    assert jobs.job_run(job.pk) == "failed"
    job.refresh_from_db()
    assert job.error == {"code": "NOT_TEXT", "message": "The transcript is not text."}
    assert job.finished_at is not None and job.progress == 100


def test_an_unexpected_error_fails_the_job_without_leaking_internals(job: Job, monkeypatch: Any) -> None:
    def crash(_job: Job) -> dict[str, Any]:
        raise KeyError("secret internals")

    monkeypatch.setitem(jobs.HANDLERS, Job.Kind.EXTRACT_DECISIONS, crash)
    assert jobs.job_run(job.pk) == "failed"
    job.refresh_from_db()
    assert job.error is not None and job.error["code"] == "INTERNAL_ERROR" and "secret" not in job.error["message"]


def test_finished_jobs_and_the_transcripts_sent_to_them_are_deleted_after_the_retention(
    job: Job, acme: dict[str, Any], principal_of: Any, api: Any, settings: Any
) -> None:
    from memories.tasks import purge_finished_jobs

    settings.CORTEX_JOB_RETENTION_HOURS = 24
    assert run_job.apply(args=(str(job.pk),)).get(disable_sync_subtasks=False) == "succeeded"
    waiting = jobs.job_create(
        principal=principal_of(acme["employee"]), kind=Job.Kind.EXTRACT_DECISIONS, payload={"summary": "Old but queued."}
    )
    Job.objects.filter(pk=waiting.pk).update(created_at=timezone.now() - timedelta(days=3))

    assert (
        purge_finished_jobs.apply().get(disable_sync_subtasks=False) == 0
    )  # finished a moment ago: kept, and its owner still sees it
    assert api(acme["employee"]).get(f"/api/jobs/{job.pk}").json()["status"] == "succeeded"

    Job.objects.filter(pk=job.pk).update(finished_at=timezone.now() - timedelta(hours=25))
    assert purge_finished_jobs.apply().get(disable_sync_subtasks=False) == 1
    assert not Job.objects.filter(pk=job.pk).exists()
    assert api(acme["employee"]).get(f"/api/jobs/{job.pk}").status_code == 404
    assert Job.objects.filter(pk=waiting.pk).exists()  # not finished: never purged
    assert purge_finished_jobs.apply().get(disable_sync_subtasks=False) == 0  # running it again changes nothing


def test_beat_runs_the_job_clean_up_and_the_redaction_holds_hourly() -> None:
    from cortex_site.celery import app

    schedule = {entry["task"]: entry["schedule"] for entry in app.conf.beat_schedule.values()}
    assert schedule["memories.purge_finished_jobs"] == 3600.0  # (other apps add their own entries)
    assert schedule["memories.finalise_redaction_holds"] == 3600.0
    assert "memories.purge_finished_jobs" in app.tasks and "memories.finalise_redaction_holds" in app.tasks


def test_the_purge_deletes_in_bounded_batches_and_enqueues_the_next_batch(
    acme: dict[str, Any], principal_of: Any, settings: Any, django_capture_on_commit_callbacks: Any
) -> None:
    from memories.tasks import purge_finished_jobs

    settings.CORTEX_JOB_RETENTION_HOURS = 24
    with django_capture_on_commit_callbacks(execute=False):
        made = [
            jobs.job_create(principal=principal_of(acme["employee"]), kind=Job.Kind.EXTRACT_DECISIONS, payload={"n": n})
            for n in range(3)
        ]
    long_ago = timezone.now() - timedelta(hours=30)
    Job.objects.filter(pk__in=[j.pk for j in made]).update(status="succeeded", finished_at=long_ago)

    with django_capture_on_commit_callbacks(execute=False) as next_batches:
        assert purge_finished_jobs.apply(args=(2,)).get(disable_sync_subtasks=False) == 2
    assert len(next_batches) == 1  # the batch was full: the next one is enqueued
    assert Job.objects.filter(pk__in=[j.pk for j in made]).count() == 1

    with django_capture_on_commit_callbacks(execute=False) as next_batches:
        assert purge_finished_jobs.apply(args=(2,)).get(disable_sync_subtasks=False) == 1
    assert next_batches == []  # nothing left: the chain stops
    assert not Job.objects.filter(pk__in=[j.pk for j in made]).exists()

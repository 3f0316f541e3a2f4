"""REST: POST /api/memories/extract-decisions (a job; 200 when done within `wait`, else 202),
GET /api/jobs/{id}, and POST /api/meeting-briefs (save a brief as a `meeting` memory)."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test.client import MULTIPART_CONTENT
from document_files import make_docx, make_pdf
from meeting_transcripts import DECISION_LINES, PLATFORM_SUMMARY, PLATFORM_SYNC
from support import assert_envelope

from memories.models import Job, Memory

URL = "/api/memories/extract-decisions"


def upload(client: Any, name: str, data: bytes, **fields: Any) -> Any:
    return client.post(URL, {"file": SimpleUploadedFile(name, data), **fields}, content_type=MULTIPART_CONTENT)


def check_grounded(body: dict[str, Any], summary: str = "", transcript: str = "") -> None:
    texts = {"summary": summary, "transcript": transcript}
    for d in body["decisions"]:
        assert texts[d["source"]][d["start"] : d["end"]] == d["quote"]


# -- answered within `wait` (the job runs on commit; eager in this process) -------------------------
@pytest.mark.django_db(transaction=True)
def test_json_summary_and_transcript_answer_200_with_grounded_decisions(acme: dict[str, Any], api: Any) -> None:
    response = api(acme["employee"]).post(URL, {"summary": PLATFORM_SUMMARY, "transcript": PLATFORM_SYNC})
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["extractor"] == "heuristic" and body["dropped"] == 0
    assert len(body["decisions"]) == 4 and set(body["decisions"][0]) == {"text", "quote", "source", "start", "end"}
    check_grounded(body, PLATFORM_SUMMARY, PLATFORM_SYNC)
    assert Job.objects.get(pk=body["job_id"]).status == "succeeded"


@pytest.mark.django_db(transaction=True)
def test_a_docx_transcript_built_here_is_read_and_its_text_returned_for_the_offsets(acme: dict[str, Any], api: Any) -> None:
    response = upload(
        api(acme["employee"]),
        "pricing review.docx",
        make_docx(DECISION_LINES, title="Pricing review"),
        summary="Pricing review notes.",
    )
    assert response.status_code == 200, response.content
    body = response.json()
    assert [d["text"] for d in body["decisions"]] == [
        "The Starter tier stays at $49 per month.",
        "Approved: a 10% discount for annual Fleet contracts.",
        "Bo will ship the new pricing page on March 28.",
    ]
    assert body["filename"] == "pricing review.docx"
    check_grounded(body, "Pricing review notes.", body["transcript"])


@pytest.mark.django_db(transaction=True)
def test_a_pdf_transcript_built_here_is_read(acme: dict[str, Any], api: Any) -> None:
    pdf = make_pdf([DECISION_LINES[:4], DECISION_LINES[4:]], title="Pricing review")
    response = upload(api(acme["employee"]), "pricing.pdf", pdf)
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["decisions"][0]["text"] == "The Starter tier stays at $49 per month."
    assert len(body["decisions"]) == 3
    check_grounded(body, "", body["transcript"])


# -- the job path ------------------------------------------------------------------------------------
def test_a_job_no_worker_starts_is_answered_202_without_holding_the_request_for_the_whole_wait(
    acme: dict[str, Any], api: Any, monkeypatch: pytest.MonkeyPatch, django_capture_on_commit_callbacks: Any
) -> None:
    import time

    from memories.api import briefs as briefs_api

    # No worker: the job's task is never run (its on-commit enqueue is held back).
    monkeypatch.setattr(briefs_api, "START_GRACE_SECONDS", 0.5)
    started = time.monotonic()
    with django_capture_on_commit_callbacks(execute=False):
        response = api(acme["employee"]).post(f"{URL}?wait=60", {"summary": PLATFORM_SUMMARY})
    held = time.monotonic() - started

    assert response.status_code == 202, response.content
    assert response.json()["status"] == "queued"
    assert held < 30  # the grace, not the 60 s asked for


def test_a_slow_job_answers_202_and_its_status_url_reports_progress_then_the_result(
    acme: dict[str, Any], api: Any, outsider: Any, django_capture_on_commit_callbacks: Any
) -> None:
    client = api(acme["employee"])
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        response = client.post(f"{URL}?wait=0", {"summary": PLATFORM_SUMMARY})
    assert response.status_code == 202, response.content
    body = response.json()
    assert body["status"] == "queued" and body["job_url"].endswith(f"/api/jobs/{body['job_id']}")
    assert response["Location"] == body["job_url"]
    queued = client.get(f"/api/jobs/{body['job_id']}").json()
    assert (queued["status"], queued["progress"], queued["result"], queued["error"]) == ("queued", 0, None, None)

    for callback in callbacks:  # the commit happens: the job is enqueued and runs
        callback()

    done = client.get(f"/api/jobs/{body['job_id']}").json()
    assert (done["status"], done["progress"], done["error"]) == ("succeeded", 100, None)
    assert [d["text"] for d in done["result"]["decisions"]] == [
        "We decided to drop support for API v1 at the end of the quarter."
    ]
    assert done["finished_at"] and done["started_at"]

    # A job is its creator's: a colleague and an outsider see nothing.
    assert_envelope(api(acme["manager"]).get(f"/api/jobs/{body['job_id']}"), 404, "NOT_FOUND")
    assert_envelope(api(outsider).get(f"/api/jobs/{body['job_id']}"), 404, "NOT_FOUND")
    assert_envelope(client.get("/api/jobs/not-a-job"), 404, "NOT_FOUND")


# -- bad input -----------------------------------------------------------------------------------------
def test_empty_summary_and_no_transcript_is_a_400(acme: dict[str, Any], api: Any) -> None:
    client = api(acme["employee"])
    assert_envelope(client.post(URL, {"summary": "   "}), 400, "EMPTY_INPUT")
    assert_envelope(client.post(URL, {}), 400, "EMPTY_INPUT")
    assert_envelope(client.post(URL, {"summary": "x", "audio": "..."}), 400, "VALIDATION_ERROR")
    assert not Job.objects.exists()


def test_unsupported_and_oversized_files_are_415_and_413(acme: dict[str, Any], api: Any, settings: Any) -> None:
    client = api(acme["employee"])
    assert_envelope(upload(client, "standup.mp3", b"ID3\x03\x00fake audio"), 415, "UNSUPPORTED_FILE_TYPE")
    settings.CORTEX_MAX_UPLOAD_BYTES = 1024
    assert_envelope(upload(client, "long.txt", b"We decided to ship. " * 100), 413, "FILE_TOO_LARGE")
    assert_envelope(client.post(URL, "summary=hi", content_type="text/plain"), 415, "UNSUPPORTED_MEDIA_TYPE")
    assert not Job.objects.exists()


def test_a_transcript_that_is_not_text_is_refused(acme: dict[str, Any], api: Any) -> None:
    client = api(acme["employee"])
    assert_envelope(upload(client, "notes.txt", "Décision: on livre vendredi".encode("cp1252")), 400, "NOT_UTF8")
    assert_envelope(upload(client, "scan.pdf", make_pdf([[]])), 400)
    assert_envelope(client.post(URL, {"transcript": "We decided\x00 to ship."}), 400, "VALIDATION_ERROR")
    assert_envelope(upload(client, "notes.txt", b"We decided to ship.", transcript="and also this"), 400, "TWO_TRANSCRIPTS")
    assert not Job.objects.exists()


def test_extraction_needs_a_signed_in_member(api: Any, db: Any) -> None:
    assert api().post(URL, {"summary": "We decided to ship."}).status_code == 401


# -- saving a brief --------------------------------------------------------------------------------------
def brief_body(**overrides: Any) -> dict[str, Any]:
    summary = "Payments vendor chosen. We decided to drop support for API v1 at the end of the quarter."
    body = {
        "title": "Platform sync — March 3",
        "date": "2025-03-03",
        "attendees": ["Priya Nair", "Tom Becker"],
        "scope": "engineering",
        "summary": summary,
        "transcript": PLATFORM_SYNC,
        "decisions": [
            {"text": "Drop API v1 at quarter end.", "quote": summary[24:], "source": "summary", "start": 24, "end": len(summary)},
            {
                "text": "Stripe for marketplace payments.",
                "quote": "Okay, so we're going with Stripe for the marketplace payments.",
                "source": "transcript",
                "start": PLATFORM_SYNC.index("Okay, so"),
                "end": PLATFORM_SYNC.index("Okay, so") + len("Okay, so we're going with Stripe for the marketplace payments."),
            },
        ],
    }
    body.update(overrides)
    return body


def test_a_saved_brief_is_a_meeting_memory_with_summary_decisions_and_transcript_in_that_order(
    acme: dict[str, Any], api: Any
) -> None:
    response = api(acme["employee"]).post("/api/meeting-briefs", brief_body())
    assert response.status_code == 201, response.content
    body = response.json()
    assert (body["category"], body["scope"], body["title"]) == ("meeting", "engineering", "Platform sync — March 3")
    assert body["valid_from"].startswith("2025-03-03")
    content = Memory.objects.get(pk=body["id"]).content
    assert content.index("## Summary") < content.index("## Decisions") < content.index("## Transcript")
    assert "- Drop API v1 at quarter end.\n- Stripe for marketplace payments." in content
    assert "Attendees: Priya Nair, Tom Becker" in content
    assert PLATFORM_SYNC.strip() in content


def test_saving_refuses_a_decision_whose_quote_is_not_in_the_text(acme: dict[str, Any], api: Any) -> None:
    body = brief_body()
    body["decisions"][0]["quote"] = "We decided to drop support for API v2."
    assert_envelope(api(acme["employee"]).post("/api/meeting-briefs", body), 422, "UNGROUNDED_DECISION")
    body = brief_body()
    body["decisions"][1]["start"] += 1
    assert_envelope(api(acme["employee"]).post("/api/meeting-briefs", body), 422, "UNGROUNDED_DECISION")
    assert not Memory.objects.exists()


@pytest.mark.parametrize("decision", [[1, 2], "Drop API v1", 12, None])
def test_a_decision_that_is_not_an_object_is_a_400_envelope(acme: dict[str, Any], api: Any, decision: Any) -> None:
    body = assert_envelope(api(acme["employee"]).post("/api/meeting-briefs", brief_body(decisions=[decision])), 400)
    assert body["error_code"] in {"VALIDATION_ERROR", "INVALID_DECISION"}, body
    assert not Memory.objects.exists()


def test_saving_follows_the_write_rule(acme: dict[str, Any], api: Any, outsider: Any) -> None:
    assert_envelope(api(acme["employee"]).post("/api/meeting-briefs", brief_body(scope="sales")), 404, "UNKNOWN_SCOPE")
    assert_envelope(api(acme["contractor"]).post("/api/meeting-briefs", brief_body()), 403, "SCOPE_NOT_WRITABLE")
    assert_envelope(api(outsider).post("/api/meeting-briefs", brief_body()), 404, "UNKNOWN_SCOPE")
    assert_envelope(
        api(acme["employee"]).post("/api/meeting-briefs", brief_body(summary="", transcript="", decisions=[])), 400, "EMPTY_INPUT"
    )
    assert not Memory.objects.exists()

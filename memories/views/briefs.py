"""Browser: Memories → Add → Meeting brief — extract decisions (a job, polled with htmx), tick, save."""

from __future__ import annotations

import json
import time

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from cortex_site.errors import CortexError
from memories.access import Principal
from memories.forms import BriefForm, split_tags
from memories.models import Job
from memories.selectors.jobs import job_for
from memories.services import briefs
from memories.views.common import principal_view

# The browser is answered quickly; a longer job is polled (the API waits up to 20 s instead).
UI_WAIT_SECONDS = 4
POLL_SECONDS = 0.2


def _upload(request: HttpRequest) -> briefs.Upload | None:
    uploaded = request.FILES.get("file")
    if uploaded is None:
        return None
    from memories.services.documents import check_size

    check_size(uploaded.name or "transcript", uploaded.size or 0)
    return briefs.Upload(filename=uploaded.name or "transcript", data=uploaded.read())


def _job_fragment(request: HttpRequest, job: Job) -> HttpResponse:
    if not job.finished:
        return render(request, "briefs/_pending.html", {"job": job})
    if job.status == Job.Status.FAILED:
        return render(request, "briefs/_error.html", {"message": (job.error or {}).get("message", "Extraction failed.")})
    result = job.result or {}
    decisions = [{**d, "json": json.dumps(d)} for d in result.get("decisions", [])]
    context = {"result": result, "decisions": decisions, "transcript": (job.payload or {}).get("transcript", "")}
    return render(request, "briefs/_decisions.html", context)


@principal_view
@require_POST
def brief_extract(request: HttpRequest, principal: Principal) -> HttpResponse:
    """htmx: start extraction from the form's summary and transcript file; answer with the result or a poller."""
    try:
        upload = _upload(request)
        transcript = "" if upload is not None else request.POST.get("transcript", "")
        job = briefs.decisions_extract_start(
            principal=principal, summary=request.POST.get("summary", ""), transcript=transcript, upload=upload
        )
    except CortexError as exc:
        return render(request, "briefs/_error.html", {"message": exc.message})
    deadline = time.monotonic() + UI_WAIT_SECONDS
    while not job.finished and time.monotonic() < deadline:
        time.sleep(POLL_SECONDS)
        job.refresh_from_db()
    return _job_fragment(request, job)


@principal_view
@require_GET
def brief_job(request: HttpRequest, principal: Principal, job_id: str) -> HttpResponse:
    """htmx: the extraction's progress, then its decisions."""
    return _job_fragment(request, job_for(principal, job_id))


@principal_view
@require_http_methods(["GET", "POST"])
def brief_new(request: HttpRequest, principal: Principal) -> HttpResponse:
    """The brief form on a page of its own (the Add memory tab posts here too)."""
    if request.method == "GET":
        return render(request, "briefs/new.html", {"form": BriefForm(principal=principal)})
    form = BriefForm(request.POST, request.FILES, principal=principal)
    if form.is_valid():
        data = form.cleaned_data
        try:
            transcript = request.POST.get("transcript")
            if transcript is None:
                upload = _upload(request)
                transcript = briefs.transcript_from_upload(upload) if upload is not None else ""
            draft = briefs.BriefDraft(
                title=data["title"],
                summary=data.get("summary") or "",
                transcript=transcript,
                decisions=[json.loads(value) for value in request.POST.getlist("decision")],
                meeting_date=data.get("date"),
                attendees=split_tags(data.get("attendees", "")),
                scope=data["scope"],
                clearance_min=data["clearance_min"],
                tags=split_tags(data.get("tags", "")),
                idempotency_key=data.get("idempotency_key") or "",
            )
            result = briefs.brief_save(principal=principal, draft=draft)
        except (json.JSONDecodeError, RecursionError):  # RecursionError: nested too deep to read
            form.add_error(None, "A ticked decision could not be read; extract the decisions again.")
        except CortexError as exc:
            hint = (
                " If you edited the summary after extracting, extract the decisions again."
                if exc.error_code == "UNGROUNDED_DECISION"
                else ""
            )
            form.add_error(None, exc.message + hint)
        else:
            messages.success(request, f"Meeting brief saved to {result.memory.scope.slug}.")
            return redirect(f"/memories/{result.memory.pk}/")
    return render(request, "briefs/new.html", {"form": form}, status=400)

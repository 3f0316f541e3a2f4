"""REST: decision extraction for meeting briefs (a Celery job), job status, saving a brief."""

from __future__ import annotations

import time
from typing import Any

from django.conf import settings
from django.http import QueryDict
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, status
from rest_framework.parsers import FormParser, JSONParser, MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.reverse import reverse
from rest_framework.views import APIView

from cortex_site.api import error_response, query_int
from cortex_site.api_schema import NOT_BLANK
from cortex_site.errors import ValidationFailed
from memories.api.memories import WriteOutput, write_response
from memories.api.principal import request_principal
from memories.interchange.inputs import StrictSerializer, tag_list
from memories.interchange.representation import iso
from memories.models import Job
from memories.selectors.jobs import job_for
from memories.services import briefs
from memories.services.documents import check_size

DEFAULT_WAIT_SECONDS = 20
MAX_WAIT_SECONDS = 60
POLL_SECONDS = 0.2
# A job no worker has started by then will not be answered within the wait: no worker is free
# (or none runs), so holding the request longer only ties up a web worker. Answer 202 instead.
START_GRACE_SECONDS = 5.0


# "A summary, a transcript, or both" (briefs refuse neither with EMPTY_INPUT), as JSON Schema.
SUMMARY_OR_TRANSCRIPT = {
    "anyOf": [
        {"required": [name], "properties": {name: {"type": "string", "pattern": NOT_BLANK}}} for name in ("summary", "transcript")
    ]
}


class ExtractDecisionsInput(StrictSerializer):
    schema_extra = SUMMARY_OR_TRANSCRIPT

    summary = serializers.CharField(required=False, allow_blank=True, trim_whitespace=False)
    transcript = serializers.CharField(required=False, allow_blank=True, trim_whitespace=False)
    wait = serializers.IntegerField(required=False, min_value=0, max_value=MAX_WAIT_SECONDS)


class DecisionOutput(serializers.Serializer):
    text = serializers.CharField()
    quote = serializers.CharField(help_text="verbatim from the input, at start..end")
    source = serializers.ChoiceField(choices=["summary", "transcript"])  # type: ignore[assignment]
    start = serializers.IntegerField()
    end = serializers.IntegerField()


class ExtractionOutput(serializers.Serializer):
    decisions = DecisionOutput(many=True)
    extractor = serializers.CharField(help_text='"<provider>:<model>" or "heuristic"')
    dropped = serializers.IntegerField(help_text="proposed decisions dropped because their quote was not in the input")
    fallback = serializers.DictField(
        required=False, help_text="present when the LLM failed and the heuristic answered: {from, reason}"
    )
    transcript = serializers.CharField(allow_null=True, help_text="the text read from an uploaded file (offsets refer to it)")
    job_id = serializers.UUIDField()


class JobAcceptedOutput(serializers.Serializer):
    job_id = serializers.UUIDField()
    job_url = serializers.URLField()
    status = serializers.CharField()


class JobOutput(serializers.Serializer):
    id = serializers.UUIDField()
    kind = serializers.CharField()
    status = serializers.ChoiceField(choices=Job.Status.values)
    progress = serializers.IntegerField(allow_null=True)
    result = serializers.DictField(allow_null=True)
    error = serializers.DictField(allow_null=True)
    created_at = serializers.DateTimeField()
    started_at = serializers.DateTimeField(allow_null=True)
    finished_at = serializers.DateTimeField(allow_null=True)


def job_representation(job: Job) -> dict[str, Any]:
    return {
        "id": str(job.pk),
        "kind": job.kind,
        "status": job.status,
        "progress": job.progress,
        "result": job.result,
        "error": job.error,
        "created_at": iso(job.created_at),
        "started_at": iso(job.started_at),
        "finished_at": iso(job.finished_at),
    }


def _wait_for(job: Job, seconds: float) -> Job:
    """The job as it stands when it finished or `seconds` passed, whichever is first — or at once
    when no worker has started it within START_GRACE_SECONDS (see there)."""
    started = time.monotonic()
    deadline = started + seconds
    while True:
        job.refresh_from_db()
        now = time.monotonic()
        if job.finished or now >= deadline:
            return job
        if job.status == Job.Status.QUEUED and now - started >= START_GRACE_SECONDS:
            return job
        time.sleep(POLL_SECONDS)


class ExtractDecisionsView(APIView):
    parser_classes = [JSONParser, MultiPartParser, FormParser]

    @extend_schema(
        summary="Extract grounded decisions from a meeting summary and/or transcript (a job)",
        description="JSON `{summary?, transcript?, wait?}`, or multipart with `summary` and a `file` (.txt, .md, .docx, .pdf). "
        "Answers 200 with the result when the job finishes within `wait` seconds (default 20, at most 60), else 202 with "
        "the job URL (`Location`) to poll. A job no worker has started within 5 seconds is answered 202 at once: the "
        "request is held longer only while a worker is running the job.",
        parameters=[
            OpenApiParameter(
                "wait",
                {"type": "integer", "minimum": 0, "maximum": MAX_WAIT_SECONDS},
                required=False,
                description="seconds to wait for the result (the body's `wait` wins)",
            )
        ],
        request=ExtractDecisionsInput,
        responses={200: ExtractionOutput, 202: JobAcceptedOutput},
    )
    def post(self, request: Request) -> Response:
        principal = request_principal(request)
        upload_file = request.FILES.get("file")
        data = request.data if isinstance(request.data, dict) else {}
        # A form stays a QueryDict (its values are text, which the serializer reads as a form's); the
        # upload is left out without copying it.
        fields: Any = QueryDict(mutable=True) if isinstance(data, QueryDict) else {}
        for key in data:
            if key != "file":
                if isinstance(data, QueryDict):
                    fields.setlist(key, data.getlist(key))
                else:
                    fields[key] = data[key]
        query_wait = query_int(request, "wait", minimum=0, maximum=MAX_WAIT_SECONDS)
        if "wait" not in fields and query_wait is not None:
            fields["wait"] = query_wait
        serializer = ExtractDecisionsInput(data=fields)
        serializer.is_valid(raise_exception=True)
        values = serializer.validated_data
        upload = None
        if upload_file is not None:
            check_size(upload_file.name or "upload", upload_file.size or 0)
            upload = briefs.Upload(filename=upload_file.name or "upload", data=upload_file.read())
        elif "file" in data:
            raise ValidationFailed("`file` must be a file upload.", error_code="INVALID_FILE")
        job = briefs.decisions_extract_start(
            principal=principal, summary=values.get("summary", ""), transcript=values.get("transcript", ""), upload=upload
        )
        job = _wait_for(job, values.get("wait", DEFAULT_WAIT_SECONDS))
        if job.status == Job.Status.SUCCEEDED:
            return Response({**(job.result or {}), "job_id": str(job.pk)})
        if job.status == Job.Status.FAILED:
            error = job.error or {}
            return error_response(
                status.HTTP_500_INTERNAL_SERVER_ERROR,
                error.get("code", "JOB_FAILED"),
                error.get("message", "The job failed."),
                {"job_id": str(job.pk)},
            )
        url = reverse("api-job", kwargs={"job_id": str(job.pk)}, request=request)
        return Response(
            {"job_id": str(job.pk), "job_url": url, "status": job.status},
            status=status.HTTP_202_ACCEPTED,
            headers={"Location": url},
        )


class JobDetailView(APIView):
    @extend_schema(summary="A job I started: status, progress, result or error", responses=JobOutput)
    def get(self, request: Request, job_id: str) -> Response:
        return Response(job_representation(job_for(request_principal(request), job_id)))


class DecisionInput(StrictSerializer):
    text = serializers.CharField(max_length=1000)
    quote = serializers.CharField(trim_whitespace=False, max_length=2000)
    source = serializers.ChoiceField(choices=["summary", "transcript"])  # type: ignore[assignment]
    start = serializers.IntegerField(min_value=0)
    end = serializers.IntegerField(min_value=1)


class MeetingBriefInput(StrictSerializer):
    schema_extra = SUMMARY_OR_TRANSCRIPT

    title = serializers.CharField(max_length=settings.CORTEX_MAX_TITLE_CHARS)
    date = serializers.DateField(required=False, allow_null=True)
    attendees = serializers.ListField(child=serializers.CharField(max_length=100), required=False, max_length=100)
    scope = serializers.CharField(required=False, allow_blank=True, allow_null=True)
    clearance_min = serializers.CharField(required=False, allow_blank=True, allow_null=True)
    # The memory's tags, read as a memory's are (normalise_tags): the schema states that rule, so a tag
    # it allows is never refused as INVALID_TAGS.
    tags = tag_list(required=False)
    summary = serializers.CharField(required=False, allow_blank=True, trim_whitespace=False)
    transcript = serializers.CharField(required=False, allow_blank=True, trim_whitespace=False)
    decisions = DecisionInput(many=True, required=False)
    idempotency_key = serializers.CharField(required=False, allow_blank=True, max_length=255)


class MeetingBriefCreateView(APIView):
    @extend_schema(
        summary="Save a meeting brief: summary, kept decisions and transcript become one `meeting` memory",
        request=MeetingBriefInput,
        description="201 with the new memory; 200 with the existing one when it is a replay of the same "
        "`idempotency_key` or the same content is already stored in that scope (`deduplicated: true`).",
        responses={201: WriteOutput, 200: WriteOutput},
    )
    def post(self, request: Request) -> Response:
        principal = request_principal(request)
        serializer = MeetingBriefInput(data=request.data)
        serializer.is_valid(raise_exception=True)
        v = serializer.validated_data
        draft = briefs.BriefDraft(
            title=v["title"],
            summary=v.get("summary", ""),
            transcript=v.get("transcript", ""),
            decisions=v.get("decisions", []),
            meeting_date=v.get("date"),
            attendees=v.get("attendees", []),
            scope=v.get("scope") or None,
            clearance_min=v.get("clearance_min") or None,
            tags=v.get("tags", []),
            idempotency_key=v.get("idempotency_key", ""),
        )
        return write_response(principal, briefs.brief_save(principal=principal, draft=draft))

"""Meeting briefs: extracting decisions (a job) and saving a brief as a `meeting` memory.

Extraction takes a written summary and/or a transcript (text, or a .txt/.md/.docx/.pdf file
whose text `documents.extract_text` reads) and returns only grounded decisions — each with the
verbatim quote that supports it and where that quote sits — from the configured LLM, or from
the cue heuristic when there is none or it fails (the result says which, and why).

A saved brief is one memory whose content holds the summary, the kept decisions as a list and
the transcript, in that order; every kept decision is checked against the text again.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

from django.conf import settings
from django.utils import timezone

from cortex_site.errors import PayloadTooLarge, Unprocessable, ValidationFailed
from memories.access import Principal
from memories.analysis.decisions import (
    LLM_SCHEMA,
    LLM_SYSTEM,
    Proposal,
    ground,
    heuristic_proposals,
    llm_prompt,
    llm_proposals,
    windows,
)
from memories.llm import LLMInvalidOutput, LLMUnavailable, get_llm
from memories.models import Job
from memories.services.jobs import job_create, job_progress
from memories.services.memories import MemoryDraft, WriteResult, memory_create

logger = logging.getLogger(__name__)

HEURISTIC = "heuristic"
MAX_SUMMARY_CHARS = 50_000
LLM_WINDOW_CHARS = 30_000
MAX_LLM_WINDOWS = 8
MAX_ATTENDEES = 100


@dataclass(frozen=True)
class Upload:
    filename: str
    data: bytes


def _check_text(name: str, text: str, limit: int) -> str:
    text = (text or "").replace("\r\n", "\n")
    if len(text) > limit:
        raise PayloadTooLarge(
            f"The {name} is {len(text):,} characters; the limit is {limit:,}.", error_code=f"{name.upper()}_TOO_LONG"
        )
    if "\x00" in text:
        raise Unprocessable(f"The {name} is not text (it contains NUL bytes).", error_code="NOT_TEXT")
    return text


def transcript_from_upload(upload: Upload) -> str:
    """The text of an uploaded transcript (415 unsupported type, 413 too large, 400 no text)."""
    from memories.services.documents import extract_text

    document = extract_text(upload.filename, upload.data)
    return document.text


def decisions_extract_start(
    *, principal: Principal, summary: str = "", transcript: str = "", upload: Upload | None = None
) -> Job:
    """Validate the input and queue an extraction job for the principal (enqueued on commit)."""
    summary = _check_text("summary", summary, MAX_SUMMARY_CHARS)
    transcript = _check_text("transcript", transcript, settings.CORTEX_MAX_CONTENT_CHARS)
    filename = ""
    if upload is not None:
        if transcript.strip():
            raise ValidationFailed("Send the transcript as text or as a file, not both.", error_code="TWO_TRANSCRIPTS")
        transcript = _check_text("transcript", transcript_from_upload(upload), settings.CORTEX_MAX_CONTENT_CHARS)
        filename = upload.filename[:200]
    if not summary.strip() and not transcript.strip():
        raise ValidationFailed("Give a written summary, a transcript, or both.", error_code="EMPTY_INPUT")
    return job_create(
        principal=principal,
        kind=Job.Kind.EXTRACT_DECISIONS,
        payload={"summary": summary, "transcript": transcript, "filename": filename},
    )


def decisions_extract_run(job: Job) -> dict[str, Any]:
    """The job handler for EXTRACT_DECISIONS (registered by MemoriesConfig.ready())."""
    payload = job.payload or {}
    result = extract_decisions(
        str(payload.get("summary", "")), str(payload.get("transcript", "")), progress=lambda p: job_progress(job, p)
    )
    # The person needs the transcript's text to save the brief (a file's text is read on the server).
    result["transcript"] = payload.get("transcript", "") if payload.get("filename") else None
    result["filename"] = payload.get("filename") or None
    return result


def extract_decisions(summary: str, transcript: str, *, progress: Callable[[int], None] | None = None) -> dict[str, Any]:
    """`{decisions, extractor, dropped}` (+ `fallback` when the LLM failed and the heuristic answered)."""
    report = progress or (lambda _p: None)
    llm = get_llm()
    fallback: dict[str, str] | None = None
    if llm is not None:
        try:
            proposals = _llm_proposals(llm, summary, transcript, report)
            grounded = ground(proposals, summary=summary, transcript=transcript)
            return {"decisions": [d.as_dict() for d in grounded.decisions], "extractor": llm.label, "dropped": grounded.dropped}
        except (LLMUnavailable, LLMInvalidOutput) as exc:
            logger.warning("decision extraction by %s failed (%s); using the heuristic", llm.label, exc)
            reason = (
                "answered with something that was not the expected structure" if isinstance(exc, LLMInvalidOutput) else str(exc)
            )
            fallback = {"from": llm.label, "reason": reason[:300]}
    report(50)
    grounded = ground(heuristic_proposals(summary, transcript), summary=summary, transcript=transcript)
    result: dict[str, Any] = {
        "decisions": [d.as_dict() for d in grounded.decisions],
        "extractor": HEURISTIC,
        "dropped": grounded.dropped,
    }
    if fallback is not None:
        result["fallback"] = fallback
    return result


def _llm_proposals(llm: Any, summary: str, transcript: str, report: Callable[[int], None]) -> list[Proposal]:
    pieces = windows(transcript, LLM_WINDOW_CHARS)[:MAX_LLM_WINDOWS] or [(0, "")]
    proposals: list[Proposal] = []
    for index, (_offset, piece) in enumerate(pieces):
        generation = llm.generate(
            llm_prompt(summary if index == 0 else "", piece),
            json_schema=LLM_SCHEMA,
            system=LLM_SYSTEM,
            max_output_tokens=2000,
            temperature=0.0,
        )
        proposals.extend(llm_proposals(generation.data))
        report(10 + int(80 * (index + 1) / len(pieces)))
    return proposals


# -- saving a brief ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class BriefDraft:
    title: str
    summary: str = ""
    transcript: str = ""
    decisions: Sequence[Mapping[str, Any]] = ()
    meeting_date: date | None = None
    attendees: Sequence[str] = ()
    scope: str | None = None
    clearance_min: str | None = None
    tags: Sequence[str] = field(default_factory=tuple)
    idempotency_key: str = ""


def _kept_decisions(draft: BriefDraft) -> list[str]:
    texts = {"summary": draft.summary, "transcript": draft.transcript}
    kept: list[str] = []
    for position, decision in enumerate(draft.decisions, start=1):
        # Decisions come from a form's hidden fields or a JSON body: anything but an object
        # (a list, a number, a string) is bad input, never a crash.
        if not isinstance(decision, Mapping):
            raise ValidationFailed(
                f"Decision {position} is not a decision (an object with text, quote, source, start and end).",
                error_code="INVALID_DECISION",
                details={"decision": position},
            )
        source, quote = decision.get("source"), decision.get("quote")
        start, end, text = decision.get("start"), decision.get("end"), " ".join(str(decision.get("text") or "").split())
        grounded = (
            source in texts
            and isinstance(start, int)
            and isinstance(end, int)
            and 0 <= start < end <= len(texts[str(source)])
            and texts[str(source)][start:end] == quote
        )
        if not grounded or not text:
            raise Unprocessable(
                f"Decision {position} is not grounded: its quote is not in the {source or 'input'} at {start}..{end}.",
                error_code="UNGROUNDED_DECISION",
                details={"decision": position},
            )
        kept.append(text)
    return kept


def brief_content(draft: BriefDraft, decisions: Sequence[str]) -> str:
    """Summary, decisions as a list, transcript — in that order — under an attendees line."""
    parts: list[str] = []
    header = []
    if draft.meeting_date:
        header.append(f"Meeting date: {draft.meeting_date.isoformat()}")
    if draft.attendees:
        header.append("Attendees: " + ", ".join(draft.attendees))
    if header:
        parts.append("\n".join(header))
    if draft.summary.strip():
        parts.append("## Summary\n\n" + draft.summary.strip())
    if decisions:
        parts.append("## Decisions\n\n" + "\n".join(f"- {d}" for d in decisions))
    if draft.transcript.strip():
        parts.append("## Transcript\n\n" + draft.transcript.strip())
    return "\n\n".join(parts) + "\n"


def brief_save(*, principal: Principal, draft: BriefDraft) -> WriteResult:
    """Store a meeting brief as a `meeting` memory through the write pipeline."""
    title = (draft.title or "").strip()
    if not title:
        raise ValidationFailed("A meeting brief needs a title.", error_code="TITLE_REQUIRED")
    summary = _check_text("summary", draft.summary, MAX_SUMMARY_CHARS)
    transcript = _check_text("transcript", draft.transcript, settings.CORTEX_MAX_CONTENT_CHARS)
    if not summary.strip() and not transcript.strip():
        raise ValidationFailed("Give a written summary, a transcript, or both.", error_code="EMPTY_INPUT")
    attendees = [" ".join(a.split())[:100] for a in draft.attendees if isinstance(a, str) and a.strip()]
    if len(attendees) > MAX_ATTENDEES:
        raise ValidationFailed(f"At most {MAX_ATTENDEES} attendees.", error_code="TOO_MANY_ATTENDEES")
    valid_from = None
    if draft.meeting_date is not None:
        if draft.meeting_date > (timezone.now() + timedelta(days=1)).date():
            raise Unprocessable("The meeting date is in the future.", error_code="INVALID_DATE")
        valid_from = min(datetime.combine(draft.meeting_date, time(0, 0), tzinfo=UTC), timezone.now())
    cleaned = BriefDraft(**{**draft.__dict__, "summary": summary, "transcript": transcript, "attendees": tuple(attendees)})
    decisions = _kept_decisions(cleaned)
    return memory_create(
        principal=principal,
        draft=MemoryDraft(
            content=brief_content(cleaned, decisions),
            title=title,
            scope=draft.scope or None,
            category="meeting",
            source="Manual",
            tags=list(draft.tags),
            clearance_min=draft.clearance_min or None,
            valid_from=valid_from,
            idempotency_key=draft.idempotency_key,
        ),
    )

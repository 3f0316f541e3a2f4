"""The browser pages of conflicts, meeting briefs and entities.

Each page answers for the session's Principal as the API does: a conflict whose memories
someone cannot read is a 404 for them, an entity only hidden memories mention does not exist
for them, and decisions are saved only when grounded in the text.
"""

from __future__ import annotations

import json
import re
from datetime import timedelta
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.utils import timezone
from document_files import make_docx
from meeting_transcripts import DECISION_LINES, PLATFORM_SUMMARY
from support import signed_in

from audit.models import AuditEvent
from memories.models import Conflict, Entity, Memory, Organization
from memories.services.memories import MemoryDraft, memory_create
from memories.views.conflicts import word_diff

LIMIT_100 = "The public API rate limit is 100 requests per minute per API key."
LIMIT_250 = "The public API rate limit is 250 requests per minute per API key."


@pytest.fixture
def write(principal_of: Any, django_capture_on_commit_callbacks: Any) -> Any:
    def write(membership: Any, content: str, **fields: Any) -> Memory:
        with django_capture_on_commit_callbacks(execute=True):
            return memory_create(principal=principal_of(membership), draft=MemoryDraft(content=content, **fields)).memory

    return write


@pytest.fixture
def queued(acme: dict[str, Any], write: Any) -> Conflict:
    Organization.objects.filter(pk=acme["org"].pk).update(conflict_policy="manual")
    write(acme["manager"], LIMIT_100, title="Public API rate limit", valid_from=timezone.now() - timedelta(days=9))
    write(acme["employee"], LIMIT_250, title="Public API rate limit")
    return Conflict.objects.get()


# -- conflicts -----------------------------------------------------------------------------------------
def test_the_queue_lists_open_conflicts_and_the_detail_shows_both_sides_with_differences(
    acme: dict[str, Any], queued: Conflict
) -> None:
    client = signed_in(acme["employee"])
    page = client.get("/conflicts/").content.decode()
    assert f"/conflicts/{queued.pk}/" in page and "Contradiction" in page and "Policy: manual" in page
    detail = client.get(f"/conflicts/{queued.pk}/").content.decode()
    assert '<del class="diff-del">100</del>' in detail and '<ins class="diff-ins">250</ins>' in detail
    assert queued.explanation.split(":")[0] in detail
    # The Employee cannot decide against the Manager's memory, so Decide is not offered; the Manager may.
    assert "Keep new" not in detail and "decide-not-allowed" in detail
    decider = signed_in(acme["manager"]).get(f"/conflicts/{queued.pk}/").content.decode()
    assert "Keep new" in decider and "Keep existing" in decider and "Keep both" in decider and "Dismiss" in decider


def test_resolving_in_the_browser_supersedes_keeps_dissent_and_is_audited(acme: dict[str, Any], queued: Conflict) -> None:
    client = signed_in(acme["manager"])
    response = client.post(
        f"/conflicts/{queued.pk}/resolve/", {"resolution": "keep_existing", "note": "100 is the contract figure"}
    )
    assert response.status_code == 302
    queued.refresh_from_db()
    assert (queued.status, queued.resolution, queued.resolved_by_user_id) == (
        "resolved",
        "keep_existing",
        acme["manager"].user_id,
    )
    assert Memory.objects.get(pk=queued.new_memory_id).status == "superseded"
    page = client.get(f"/conflicts/{queued.pk}/").content.decode()
    assert "Dissent" in page and "250 requests" in page and "100 is the contract figure" in page
    assert AuditEvent.objects.filter(action="conflict.resolve", actor_user_id=acme["manager"].user_id).exists()
    client.post(f"/conflicts/{queued.pk}/reopen/")
    queued.refresh_from_db()
    assert queued.status == "open"


def test_people_who_cannot_read_both_memories_get_404_everywhere(acme: dict[str, Any], write: Any, outsider: Any) -> None:
    Organization.objects.filter(pk=acme["org"].pk).update(conflict_policy="manual")
    write(acme["manager"], "Sales commission for new logos is 10% of first-year revenue.", title="Commission", scope="sales")
    write(acme["exec"], "Sales commission for new logos is 12% of first-year revenue.", title="Commission", scope="sales")
    conflict = Conflict.objects.get()
    for member in (acme["employee"], outsider):
        client = signed_in(member)
        assert client.get(f"/conflicts/{conflict.pk}/").status_code == 404
        assert client.post(f"/conflicts/{conflict.pk}/resolve/", {"resolution": "dismiss"}).status_code == 404
        assert str(conflict.pk) not in client.get("/conflicts/?status=all").content.decode()
    conflict.refresh_from_db()
    assert conflict.status == "open"


def test_only_admins_change_the_policy_from_the_page(acme: dict[str, Any]) -> None:
    assert "/conflicts/policy/" not in signed_in(acme["manager"]).get("/conflicts/").content.decode()
    assert signed_in(acme["manager"]).post("/conflicts/policy/", {"policy": "manual"}).status_code == 403
    assert signed_in(acme["exec"]).post("/conflicts/policy/", {"policy": "manual"}).status_code == 302
    assert Organization.objects.get(pk=acme["org"].pk).conflict_policy == "manual"


def test_memory_detail_shows_the_open_conflict_badge_and_the_entities(acme: dict[str, Any], queued: Conflict, write: Any) -> None:
    page = signed_in(acme["employee"]).get(f"/memories/{queued.new_memory_id}/").content.decode()
    assert "1 open conflict" in page
    memory = write(acme["employee"], "Maria Chen owns the acme/checkout-api repository; see PAY-1423.")
    page = signed_in(acme["employee"]).get(f"/memories/{memory.pk}/").content.decode()
    repo = Entity.objects.get(key="acme/checkout-api")
    assert f'href="/entities/{repo.pk}/"' in page and "PAY-1423" in page


def test_the_word_diff_escapes_what_it_marks() -> None:
    left, right = word_diff("Use <b>Stripe</b> now", "Use <script>x</script> now")
    assert "<script>" not in right and "&lt;script&gt;" in right
    assert '<del class="diff-del">&lt;b&gt;Stripe&lt;/b&gt;</del>' in left


# -- entities -----------------------------------------------------------------------------------------
def test_an_entity_page_lists_only_memories_the_reader_may_see(acme: dict[str, Any], write: Any, outsider: Any) -> None:
    public = write(acme["employee"], "Checkout failures for customer Globex Corp were fixed by a rollback.")
    hidden = write(acme["manager"], "Globex Corp asked for a 30% discount on the renewal.", scope="sales")
    globex = Entity.objects.get(key="globex corp")
    as_employee = signed_in(acme["employee"]).get(f"/entities/{globex.pk}/").content.decode()
    assert f"/memories/{public.pk}/" in as_employee and f"/memories/{hidden.pk}/" not in as_employee
    assert f"/memories/{hidden.pk}/" in signed_in(acme["manager"]).get(f"/entities/{globex.pk}/").content.decode()
    assert signed_in(outsider).get(f"/entities/{globex.pk}/").status_code == 404
    assert "Globex Corp" in signed_in(acme["employee"]).get("/entities/?q=globex").content.decode()
    assert "Globex Corp" not in signed_in(outsider).get("/entities/?q=globex").content.decode()


# -- meeting briefs -----------------------------------------------------------------------------------
def test_the_add_page_has_the_meeting_brief_tab_with_the_form(acme: dict[str, Any]) -> None:
    page = signed_in(acme["employee"]).get("/memories/new/?tab=brief").content.decode()
    assert "Extract Decisions (AI)" in page and 'hx-post="/briefs/extract/"' in page
    assert 'name="file"' in page and 'name="summary"' in page and 'name="attendees"' in page
    assert 'value="sales"' not in page  # only writable scopes are offered


@pytest.mark.django_db(transaction=True)
def test_extract_tick_and_save_a_brief_from_a_docx_transcript(acme: dict[str, Any]) -> None:
    client = signed_in(acme["employee"])
    docx = make_docx(DECISION_LINES, title="Pricing review")
    fragment = client.post(
        "/briefs/extract/", {"summary": PLATFORM_SUMMARY, "file": SimpleUploadedFile("pricing.docx", docx)}
    ).content.decode()
    assert "Rule-based" in fragment and "The Starter tier stays at $49 per month." in fragment
    values = [
        json.loads(v.replace("&quot;", '"').replace("&#x27;", "'").replace("&amp;", "&"))
        for v in re.findall(r'name="decision" value="([^"]*)"', fragment)
    ]
    assert len(values) == 4  # three in the transcript, one in the summary
    found = re.search(r'<textarea name="transcript" hidden aria-hidden="true">\n(.*?)</textarea>', fragment, re.S)
    assert found is not None
    transcript = found.group(1)
    transcript = (
        transcript.replace("&#x27;", "'").replace("&amp;", "&").replace("&quot;", '"').replace("&lt;", "<").replace("&gt;", ">")
    )
    kept = [json.dumps(v) for v in values if "discount" not in v["text"]]

    response = client.post(
        "/briefs/new/",
        {
            "title": "Pricing review",
            "date": "2025-03-14",
            "attendees": "Ana, Bo, Chen",
            "scope": "engineering",
            "clearance_min": "Contractor",
            "summary": PLATFORM_SUMMARY.replace("\n", "\r\n"),
            "transcript": transcript.replace("\n", "\r\n"),  # what a browser sends back from a textarea
            "decision": kept,
        },
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    memory = Memory.objects.get(category="meeting")
    assert response["Location"] == f"/memories/{memory.pk}/"
    assert memory.content.index("## Summary") < memory.content.index("## Decisions") < memory.content.index("## Transcript")
    assert (
        "- The Starter tier stays at $49 per month." in memory.content
        and "discount for annual" not in memory.content.split("## Transcript")[0]
    )
    assert "Attendees: Ana, Bo, Chen" in memory.content


def test_a_decision_not_grounded_in_the_text_is_refused_on_save(acme: dict[str, Any]) -> None:
    invented = json.dumps(
        {"text": "Hire two SREs.", "quote": "We agreed to hire two SREs.", "source": "summary", "start": 0, "end": 27}
    )
    response = signed_in(acme["employee"]).post(
        "/briefs/new/",
        {
            "title": "Sync",
            "scope": "public-docs",
            "clearance_min": "Contractor",
            "summary": "Short sync, nothing decided.",
            "decision": [invented],
        },
    )
    assert response.status_code == 400
    assert "not grounded" in response.content.decode()
    assert not Memory.objects.exists()


@pytest.mark.parametrize("decision", ["[1, 2]", "12", '"text"', "null"])
def test_a_decision_that_is_not_an_object_is_a_400_with_a_message_not_a_500(acme: dict[str, Any], decision: str) -> None:
    response = signed_in(acme["employee"]).post(
        "/briefs/new/",
        {"title": "Sync", "scope": "public-docs", "clearance_min": "Contractor", "summary": "We met.", "decision": [decision]},
    )
    assert response.status_code == 400
    assert "Decision 1 is not a decision" in response.content.decode()
    assert not Memory.objects.exists()


def test_extraction_errors_come_back_as_a_message(acme: dict[str, Any]) -> None:
    client = signed_in(acme["employee"])
    assert "Give a written summary, a transcript, or both." in client.post("/briefs/extract/", {"summary": " "}).content.decode()
    page = client.post("/briefs/extract/", {"file": SimpleUploadedFile("call.m4a", b"\x00\x00audio")}).content.decode()
    assert "cannot be imported" in page


def test_a_job_polled_by_someone_else_is_a_404(
    acme: dict[str, Any], principal_of: Any, django_capture_on_commit_callbacks: Any
) -> None:
    from memories.services.briefs import decisions_extract_start

    with django_capture_on_commit_callbacks(execute=False):
        job = decisions_extract_start(principal=principal_of(acme["employee"]), summary="We decided to ship.")
    assert "Extracting decisions" in signed_in(acme["employee"]).get(f"/briefs/jobs/{job.pk}/").content.decode()
    assert signed_in(acme["manager"]).get(f"/briefs/jobs/{job.pk}/").status_code == 404

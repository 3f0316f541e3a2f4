"""Add memory in the browser: the note form, Markdown preview and uploads (one or many files, each with its outcome)."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from document_files import make_docx, make_pdf
from support import signed_in

from memories.models import Membership, Memory

pytestmark = pytest.mark.django_db


def note(**fields: Any) -> dict[str, Any]:
    data = {
        "title": "",
        "content": "",
        "scope": "engineering",
        "category": "note",
        "tags": "",
        "clearance_min": "Contractor",
        "source_url": "",
        "valid_from": "",
        "valid_until": "",
    }
    data.update(fields)
    return data


def select_options(html: str, name: str) -> list[str]:
    select = re.search(rf'<select name="{name}"[^>]*>(.*?)</select>', html, re.DOTALL)
    assert select, name
    return re.findall(r'<option value="([^"]*)"', select.group(1))


# -- the note form ----------------------------------------------------------------------------------------


def test_form_offers_only_writable_scopes_and_clearances_up_to_mine(acme: dict[str, Any]) -> None:
    html = signed_in(acme["employee"]).get("/memories/new/").content.decode()
    assert select_options(html, "scope") == ["engineering", "public-docs"]  # not sales (no grant), not handbook (read-only)
    assert select_options(html, "clearance_min") == ["Contractor", "Employee"]
    assert "selected>Public docs" in html or re.search(r'<option value="public-docs" selected>', html)
    assert 'name="csrfmiddlewaretoken"' in html
    assert 'name="idempotency_key"' in html
    assert 'hx-post="/memories/preview/"' in html
    for label in (
        "id_title",
        "id_content",
        "id_scope",
        "id_category",
        "id_tags",
        "id_clearance_min",
        "id_valid_from",
        "id_valid_until",
    ):
        assert f'for="{label}"' in html, label


def test_saving_a_note_stores_it_and_opens_it(acme: dict[str, Any]) -> None:
    client = signed_in(acme["employee"])
    response = client.post(
        "/memories/new/",
        note(
            title="On-call handover",
            content="Hand over at 09:00 with the **incident log**.",
            tags="oncall, process",
            category="Runbook",
            valid_from="2025-03-01T09:00",
        ),
    )
    assert response.status_code == 302
    memory = Memory.objects.get(title="On-call handover")
    assert response["Location"] == f"/memories/{memory.pk}/"
    assert memory.scope.slug == "engineering" and memory.category == "runbook" and memory.source == "Manual"
    assert memory.tags == ["oncall", "process"] and memory.author_id == acme["employee"].user.pk
    assert memory.valid_from.isoformat().startswith("2025-03-01T09:00")
    page = client.get(response["Location"]).content.decode()
    assert "Saved to engineering." in page and "<strong>incident log</strong>" in page


def test_a_double_submit_stores_one_memory(acme: dict[str, Any]) -> None:
    client = signed_in(acme["employee"])
    data = note(content="Only once, please.", idempotency_key="ui-test-key-1")
    first = client.post("/memories/new/", data)
    second = client.post("/memories/new/", data)
    assert first["Location"] == second["Location"]
    assert Memory.objects.filter(content="Only once, please.").count() == 1


def test_bad_input_is_shown_next_to_the_field_and_values_are_kept(acme: dict[str, Any]) -> None:
    response = signed_in(acme["employee"]).post(
        "/memories/new/", note(title="Keep me", content="", tags="ok, not ok", source_url="ftp://nope", valid_until="not a date")
    )
    assert response.status_code == 400
    html = response.content.decode()
    assert 'value="Keep me"' in html
    assert 'id="id_content_error"' in html
    assert 'id="id_source_url_error"' in html
    assert 'id="id_valid_until_error"' in html
    assert "Nothing was saved" in html
    assert not Memory.objects.exists()


def test_service_refusals_land_on_their_field(acme: dict[str, Any]) -> None:
    client = signed_in(acme["employee"])
    response = client.post("/memories/new/", note(title="Tagged", content="Body", tags="fine, has space"))
    assert response.status_code == 400
    html = response.content.decode()
    assert 'id="id_tags_error"' in html and "not valid" in html
    assert "Body" in html and 'value="fine, has space"' in html
    response = client.post("/memories/new/", note(content="Later", valid_from="2025-05-01T10:00", valid_until="2025-04-01T10:00"))
    assert 'id="id_valid_until_error"' in response.content.decode()


def test_writing_above_my_clearance_or_into_a_read_only_scope_is_refused(acme: dict[str, Any]) -> None:
    client = signed_in(acme["contractor"])
    html = client.get("/memories/new/").content.decode()
    assert select_options(html, "scope") == ["public-docs"]  # engineering is read-only for the contractor
    for fields in ({"scope": "engineering"}, {"scope": "public-docs", "clearance_min": "Executive"}, {"scope": "sales"}):
        response = client.post("/memories/new/", note(content="Sneaky write", **fields))
        assert response.status_code == 400, fields
    assert not Memory.objects.exists()


def test_a_failed_embed_keeps_the_form_filled_and_says_to_retry(acme: dict[str, Any], use_embedder: Any) -> None:
    from cortex_site.embedded import free_port

    use_embedder("openai", OPENAI_API_KEY="sk-test", OPENAI_BASE_URL=f"http://127.0.0.1:{free_port()}/v1")
    response = signed_in(acme["employee"]).post(
        "/memories/new/", note(title="Retry me", content="Important text I do not want to lose.")
    )
    assert response.status_code == 503
    html = response.content.decode()
    assert "embedding service is unavailable" in html and "try again" in html
    assert 'value="Retry me"' in html and "Important text I do not want to lose." in html
    assert not Memory.objects.exists()


def test_member_without_writable_scopes_is_told_how_to_get_one(make_org: Any, make_member: Any) -> None:
    from memories.models import Scope
    from memories.services import tenancy

    org = make_org()
    tenancy.scope_update(scope=Scope.objects.get(organization=org, slug="public-docs"), members_can_write=False)
    html = signed_in(make_member(org)).get("/memories/new/").content.decode()
    assert "You can’t add memories yet" in html
    assert "<textarea" not in html


def test_markdown_preview_is_sanitised(acme: dict[str, Any]) -> None:
    response = signed_in(acme["employee"]).post(
        "/memories/preview/", {"content": "## Hi\n\n<img src=x onerror=alert(1)> [x](javascript:alert(1))"}
    )
    assert response.status_code == 200
    html = response.content.decode()
    assert "<h3>Hi</h3>" in html
    assert "<img" not in html and "javascript:" not in html.replace("[x](javascript:alert(1))", "")


def test_meeting_brief_tab_appears_only_when_its_template_exists(acme: dict[str, Any]) -> None:
    from memories.views.memories import brief_tab_template

    html = signed_in(acme["employee"]).get("/memories/new/").content.decode()
    if brief_tab_template() is None:
        assert "?tab=brief" not in html
    else:
        assert 'href="/memories/new/?tab=brief"' in html


# -- uploads ----------------------------------------------------------------------------------------------


def upload(client: Client, *files: SimpleUploadedFile, json: bool = False, **options: str) -> Any:
    data: dict[str, Any] = {
        "scope": "engineering",
        "category": "document",
        "tags": "imported",
        "clearance_min": "Contractor",
        **options,
        "files": list(files),
    }
    headers = {"Accept": "application/json"} if json else {}
    return client.post("/memories/upload/", data, headers=headers)


def test_upload_of_several_files_stores_each_and_reports_each(acme: dict[str, Any]) -> None:
    client = signed_in(acme["employee"])
    response = upload(
        client,
        SimpleUploadedFile("notes.md", b"# Release checklist\n\nTag, build, sign, ship."),
        SimpleUploadedFile("spec.docx", make_docx(["Robots dock within 30 seconds."], title="Docking spec")),
        SimpleUploadedFile("guide.pdf", make_pdf([["Charging stations need a 2 m clearance."]])),
    )
    assert response.status_code == 201
    html = response.content.decode()
    titles = set(Memory.objects.values_list("title", flat=True))
    assert {"Release checklist", "Docking spec"} <= titles and len(titles) == 3
    assert all(m.source == "Upload" and m.tags == ["imported"] and m.scope.slug == "engineering" for m in Memory.objects.all())
    assert html.count("upload-item is-done") == 3


def test_upload_per_file_errors_name_the_reason_and_keep_the_good_files(acme: dict[str, Any], settings: Any) -> None:
    settings.CORTEX_MAX_UPLOAD_BYTES = 2048
    client = signed_in(acme["employee"])
    response = upload(
        client,
        SimpleUploadedFile("good.txt", b"A perfectly fine note."),
        SimpleUploadedFile("picture.png", b"\x89PNG...."),
        SimpleUploadedFile("huge.txt", b"x" * 5000),
        SimpleUploadedFile("latin1.txt", "café".encode("latin-1")),
    )
    assert response.status_code == 400
    html = response.content.decode()
    assert html.count("upload-item is-done") == 1 and html.count("upload-item is-failed") == 3
    assert "picture.png: only .txt, .md, .docx, .pdf files can be uploaded." in html
    assert "huge.txt is 4.9\xa0KB; the limit is 2.0\xa0KB." in html
    assert "latin1.txt is not UTF-8" in html
    assert list(Memory.objects.values_list("title", flat=True)) == ["A perfectly fine note."]  # a .txt: its first line


def test_upload_answers_json_per_file_for_the_progress_ui(acme: dict[str, Any]) -> None:
    client = signed_in(acme["employee"])
    ok = upload(client, SimpleUploadedFile("a.txt", b"Alpha text."), json=True)
    assert ok.status_code == 201
    result = ok.json()["results"][0]
    assert result["ok"] is True and result["url"].startswith("/memories/") and result["message"] == "Saved to Engineering"
    again = upload(client, SimpleUploadedFile("a.txt", b"Alpha text."), json=True)
    assert again.status_code == 200 and again.json()["results"][0]["deduplicated"] is True
    bad = upload(client, SimpleUploadedFile("b.exe", b"MZ"), json=True)
    assert bad.status_code == 415 and bad.json()["results"][0]["error_code"] == "UNSUPPORTED_FILE_TYPE"
    refused = upload(client, SimpleUploadedFile("c.txt", b"text"), json=True, scope="sales")
    assert refused.status_code == 400 and "sales" in refused.json()["message"]


def test_upload_when_the_embedder_is_down_says_to_retry_that_file(acme: dict[str, Any], use_embedder: Any) -> None:
    from cortex_site.embedded import free_port

    use_embedder("openai", OPENAI_API_KEY="sk-test", OPENAI_BASE_URL=f"http://127.0.0.1:{free_port()}/v1")
    response = upload(signed_in(acme["employee"]), SimpleUploadedFile("a.txt", b"Alpha text."), json=True)
    assert response.status_code == 503
    assert "Retry this file" in response.json()["results"][0]["message"]
    assert not Memory.objects.exists()


def test_upload_without_files_or_by_outsider(acme: dict[str, Any], outsider: Membership) -> None:
    response = signed_in(acme["employee"]).post(
        "/memories/upload/", {"scope": "engineering", "category": "document", "clearance_min": "Contractor"}
    )
    assert response.status_code == 400 and "Choose at least one file." in response.content.decode()
    foreign = upload(signed_in(outsider), SimpleUploadedFile("a.txt", b"Into acme?"), json=True)
    assert foreign.status_code == 400  # engineering is not a scope of the outsider's organization
    assert not Memory.objects.exists()

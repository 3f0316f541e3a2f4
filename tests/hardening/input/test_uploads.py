"""Hostile uploads: every one is refused with its own clear error, through every door (extraction,
the browser's upload, REST extract-decisions), within bounded memory and time, and nothing is stored.

Figures (peak RSS, seconds) for the same files are measured by bench/reliability/r30_input.py.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.test.client import MULTIPART_CONTENT
from document_files import make_docx, make_pdf
from hardening.input import hostile_files as hostile
from support import assert_envelope, signed_in

from cortex_site.errors import CortexError
from memories.models import Job, Memory
from memories.services.documents import extract_text

EXTRACT_URL = "/api/memories/extract-decisions"


def refusal(name: str, data: bytes) -> CortexError:
    with pytest.raises(CortexError) as caught:
        extract_text(name, data)
    assert name in caught.value.message
    assert caught.value.details.get("filename") == name
    return caught.value


def upload(client: Client, name: str, data: bytes) -> Any:
    fields = {"scope": "engineering", "category": "document", "clearance_min": "Contractor"}
    return client.post(
        "/memories/upload/", {**fields, "files": [SimpleUploadedFile(name, data)]}, headers={"Accept": "application/json"}
    )


# -- .docx ----------------------------------------------------------------------------------------------
def test_a_zip_bomb_disguised_as_docx_is_refused_from_its_directory_before_decompressing() -> None:
    error = refusal("minutes.docx", hostile.zip_bomb_docx(20))
    assert (error.status, error.error_code) == (413, "DOCUMENT_TOO_COMPLEX")
    assert "zip bomb" in error.message and "word/document.xml" in error.message
    assert error.details["ratio"] > 100


def test_a_zip_whose_directory_understates_the_size_is_read_no_further_and_refused_as_corrupt() -> None:
    error = refusal("minutes.docx", hostile.lying_zip_docx(declared=100, real_mb=4))
    assert (error.status, error.error_code) == (400, "CORRUPT_FILE")


def test_a_docx_holding_more_text_than_a_memory_stops_at_the_cap() -> None:
    error = refusal("novel.docx", hostile.wordy_docx(400_000))
    assert (error.status, error.error_code) == (413, "TEXT_TOO_LONG")
    assert "200,000 characters" in error.message


def test_the_streaming_docx_reader_keeps_document_order_tables_and_tabs() -> None:
    data = make_docx(["Intro\tline"], table=[["A", "B"], ["1", "2"]], after=["Outro"], title="Streamed")
    document = extract_text("streamed.docx", data)
    assert (document.title, document.text) == ("Streamed", "Intro\tline\n\nA | B\n1 | 2\n\nOutro")


# -- .pdf -----------------------------------------------------------------------------------------------
def test_a_pdf_of_thousands_of_pages_is_refused_from_its_page_tree() -> None:
    error = refusal("scan.pdf", hostile.thousand_page_pdf(5000))
    assert (error.status, error.error_code) == (413, "TOO_MANY_PAGES")
    assert error.details["pages"] == 5000 and error.details["limit"] == 500


def test_a_pdf_whose_page_count_lies_is_refused_from_the_list_of_its_pages() -> None:
    error = refusal("scan.pdf", hostile.lying_count_pdf(5000))
    assert (error.status, error.error_code) == (413, "TOO_MANY_PAGES")


def test_a_parse_that_needs_more_memory_than_allowed_ends_in_its_child_with_a_clear_error(settings: Any) -> None:
    settings.CORTEX_EXTRACT_MEMORY_MB = 96
    error = refusal("bomb.pdf", hostile.inflating_pdf(100))
    assert (error.status, error.error_code) == (422, "DOCUMENT_TOO_HEAVY")
    assert "96 MB of memory" in error.message and error.details["limit"] == "memory"
    settings.CORTEX_EXTRACT_MEMORY_MB = 768
    assert extract_text("fine.pdf", make_pdf([["Still readable."]])).text == "Still readable."


def test_a_pdf_without_a_text_layer_is_refused_saying_ocr_is_not_supported() -> None:
    error = refusal("scan.pdf", hostile.scanned_pdf(3))
    assert (error.status, error.error_code) == (400, "NO_TEXT")
    assert "OCR is not supported" in error.message


def test_a_pdf_stream_that_inflates_without_end_is_refused() -> None:
    error = refusal("bomb.pdf", hostile.inflating_pdf(100))
    assert (error.status, error.error_code) == (413, "DOCUMENT_TOO_COMPLEX")


# -- text -----------------------------------------------------------------------------------------------
def test_a_50_mb_single_line_file_is_refused_by_its_size_before_it_is_decoded() -> None:
    error = refusal("log.txt", hostile.single_line_text(50))
    assert (error.status, error.error_code) == (413, "FILE_TOO_LARGE")


def test_a_single_line_under_the_upload_cap_but_over_a_memory_is_refused_as_too_long() -> None:
    error = refusal("log.txt", b"y" * 300_000)
    assert (error.status, error.error_code) == (413, "TEXT_TOO_LONG")


# -- content that does not match its extension ------------------------------------------------------------
MISMATCHES = [
    ("report.docx", make_pdf([["A PDF, renamed"]]), "a PDF document"),
    ("report.pdf", make_docx(["A Word document, renamed"]), "a Word document"),
    ("notes.txt", hostile.PNG_BYTES, "a PNG image"),
    ("notes.md", make_docx(["Zipped"]), "a Word document"),
    ("tool.txt", b"\x7fELF\x02\x01\x01" + b"\x00" * 40, "a Linux program"),
]


@pytest.mark.parametrize(("name", "data", "detected"), MISMATCHES, ids=[m[0] for m in MISMATCHES])
def test_content_that_does_not_match_its_extension_is_refused_naming_what_it_is(name: str, data: bytes, detected: str) -> None:
    error = refusal(name, data)
    assert (error.status, error.error_code) == (415, "CONTENT_MISMATCH")
    assert detected in error.message and error.details["detected"] == detected


# -- through the doors: per-file errors in the browser, the envelope over REST, nothing stored --------------
@pytest.mark.django_db
def test_the_browser_upload_reports_each_hostile_file_with_its_reason_and_stores_only_the_good_one(
    acme: dict[str, Any],
) -> None:
    client = signed_in(acme["employee"])
    cases = [
        ("bomb.docx", hostile.zip_bomb_docx(4), 413, "DOCUMENT_TOO_COMPLEX"),
        ("scan.pdf", hostile.scanned_pdf(2), 400, "NO_TEXT"),
        ("pages.pdf", hostile.thousand_page_pdf(600), 413, "TOO_MANY_PAGES"),
        ("renamed.docx", make_pdf([["Renamed"]]), 415, "CONTENT_MISMATCH"),
        ("line.txt", b"z" * 300_000, 413, "TEXT_TOO_LONG"),
    ]
    for name, data, status, code in cases:
        response = upload(client, name, data)
        assert response.status_code == status, name
        [result] = response.json()["results"]
        assert (result["ok"], result["error_code"], result["name"]) == (False, code, name)
        assert name in result["message"]
    assert not Memory.objects.filter(organization=acme["org"]).exists()
    good = upload(client, "fine.txt", b"A fine note about deploy freezes.")
    assert good.status_code == 201
    assert Memory.objects.filter(organization=acme["org"]).count() == 1


@pytest.mark.django_db
def test_without_javascript_the_page_lists_each_refused_file(acme: dict[str, Any]) -> None:
    client = signed_in(acme["employee"])
    fields = {"scope": "engineering", "category": "document", "clearance_min": "Contractor"}
    files = [SimpleUploadedFile("bomb.docx", hostile.zip_bomb_docx(4)), SimpleUploadedFile("ok.md", b"# Fine\n\nText.")]
    html = client.post("/memories/upload/", {**fields, "files": files}).content.decode()
    assert "bomb.docx looks like a zip bomb" in html
    assert html.count("upload-item is-done") == 1 and html.count("upload-item is-failed") == 1


@pytest.mark.django_db
def test_extract_decisions_answers_the_envelope_for_hostile_files_without_starting_a_job(acme: dict[str, Any], api: Any) -> None:
    client = api(acme["employee"])
    cases = [
        ("transcript.docx", hostile.zip_bomb_docx(4), 413, "DOCUMENT_TOO_COMPLEX"),
        ("transcript.docx", hostile.wordy_docx(250_000), 413, "TEXT_TOO_LONG"),
        ("transcript.pdf", hostile.thousand_page_pdf(600), 413, "TOO_MANY_PAGES"),
        ("transcript.pdf", hostile.scanned_pdf(2), 400, "NO_TEXT"),
        ("transcript.txt", hostile.PNG_BYTES, 415, "CONTENT_MISMATCH"),
    ]
    for name, data, status, code in cases:
        response = client.post(EXTRACT_URL, {"file": SimpleUploadedFile(name, data)}, content_type=MULTIPART_CONTENT)
        body = assert_envelope(response, status, code)
        assert name in body["message"]
    assert not Job.objects.exists()


class Unreadable:
    """A request body that fails the test if anything reads it."""

    def read(self, *_args: Any) -> bytes:
        raise AssertionError("the body was read")

    readline = read


def oversized(client: Client, path: str, size: int, **headers: str) -> Any:
    environ: dict[str, Any] = {
        "CONTENT_LENGTH": str(size),
        "CONTENT_TYPE": "multipart/form-data; boundary=xyz",
        "wsgi.input": Unreadable(),
    }
    return client.generic("POST", path, b"", headers=headers, **environ)


@pytest.mark.django_db
def test_an_oversized_body_is_refused_from_its_content_length_before_a_byte_is_read(acme: dict[str, Any], api: Any) -> None:
    fifty_mb = 50 * 1024 * 1024
    browser = signed_in(acme["employee"])
    as_json = oversized(browser, "/memories/upload/", fifty_mb, Accept="application/json")
    body = assert_envelope(as_json, 413, "PAYLOAD_TOO_LARGE")
    assert body["details"] == {"size": fifty_mb, "limit": 11 * 1024 * 1024}
    page = oversized(browser, "/memories/upload/", fifty_mb)
    assert page.status_code == 413 and "Nothing was saved" in page.content.decode()
    assert_envelope(oversized(api(acme["employee"]), EXTRACT_URL, fifty_mb), 413, "PAYLOAD_TOO_LARGE")
    # Everywhere else the limit is CORTEX_MAX_BODY_BYTES (2 MiB), and an anonymous caller learns nothing more.
    assert_envelope(oversized(Client(), "/api/memories", 3 * 1024 * 1024), 413, "PAYLOAD_TOO_LARGE")
    assert not Memory.objects.exists()


@pytest.mark.django_db
def test_one_file_at_the_upload_cap_still_fits_its_request(acme: dict[str, Any], settings: Any) -> None:
    settings.CORTEX_MAX_UPLOAD_BYTES = 64 * 1024
    response = upload(signed_in(acme["employee"]), "big.txt", ("word " * 13_000).encode())
    assert response.status_code == 201, response.content

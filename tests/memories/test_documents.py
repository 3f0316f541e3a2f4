"""Document text extraction: real .txt/.md/.docx/.pdf bytes in, title and text out, clear refusals."""

from __future__ import annotations

import io
import zipfile

import pytest
from django.test import override_settings
from document_files import make_docx, make_pdf

from cortex_site.errors import PayloadTooLarge, UnsupportedMediaType, ValidationFailed
from memories.services.documents import SUPPORTED_EXTENSIONS, extract_text


def test_plain_text_keeps_its_text_and_takes_its_first_line_as_title() -> None:
    doc = extract_text("notes/Rate limits.txt", b"All external APIs are rate limited.\r\nBurst: 20 req/s.\n")
    assert doc.kind == "text"
    assert doc.title == "All external APIs are rate limited."
    assert doc.text == "All external APIs are rate limited.\nBurst: 20 req/s."


def test_a_utf8_byte_order_mark_is_dropped() -> None:
    doc = extract_text("bom.txt", "\ufeffCafé décision: we ship Fridays.".encode())
    assert doc.text == "Café décision: we ship Fridays."


def test_markdown_takes_its_leading_heading_as_title_and_keeps_the_heading_in_the_text() -> None:
    doc = extract_text("runbook.md", b"\n# Dock API failover runbook #\n\nPage the on-call first.\n")
    assert doc.kind == "markdown"
    assert doc.title == "Dock API failover runbook"
    assert doc.text.startswith("# Dock API failover runbook")
    assert "Page the on-call first." in doc.text


def test_markdown_without_a_leading_h1_is_titled_by_file_name() -> None:
    doc = extract_text("on-call.md", b"Intro line first.\n\n## A subsection\n")
    assert doc.title == "on-call"


def test_non_utf8_text_is_refused_with_a_clear_message() -> None:
    with pytest.raises(ValidationFailed) as caught:
        extract_text("legacy.txt", "Ça coûte 5 €".encode("cp1252"))
    assert caught.value.error_code == "NOT_UTF8"
    assert "legacy.txt is not UTF-8" in caught.value.message
    assert "Save it as UTF-8" in caught.value.message


def test_empty_or_blank_text_is_refused() -> None:
    for data in (b"", b"  \n\n\t \n"):
        with pytest.raises(ValidationFailed) as caught:
            extract_text("empty.md", data)
        assert caught.value.error_code == "EMPTY_CONTENT"


def test_docx_gives_paragraphs_and_tables_in_document_order_and_its_core_title() -> None:
    data = make_docx(
        ["Pricing decision for 2026.", "", "Tiers below were agreed in the Q3 review."],
        title="Pricing 2026",
        table=[["Tier", "Price"], ["Starter", "$49"], ["Fleet", "$499"]],
        after=["Discounts above 20% need CFO sign-off."],
    )
    doc = extract_text("pricing.docx", data)
    assert doc.kind == "docx"
    assert doc.title == "Pricing 2026"
    assert doc.text == (
        "Pricing decision for 2026.\n\nTiers below were agreed in the Q3 review.\n\n"
        "Tier | Price\nStarter | $49\nFleet | $499\n\nDiscounts above 20% need CFO sign-off."
    )


def test_docx_without_a_title_property_is_titled_by_file_name() -> None:
    doc = extract_text("Vendor review.DOCX", make_docx(["Only text."]))
    assert doc.title == "Vendor review"


def test_corrupt_docx_is_refused_as_corrupt() -> None:
    good = make_docx(["Some text."])
    broken_xml = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(good)) as src, zipfile.ZipFile(broken_xml, "w") as dst:
        for item in src.infolist():
            body = src.read(item.filename)
            dst.writestr(item, b"<w:document><unclosed" if item.filename == "word/document.xml" else body)
    not_a_docx = io.BytesIO()
    with zipfile.ZipFile(not_a_docx, "w") as archive:
        archive.writestr("hello.txt", "a zip, but not a Word document")
    for data in (b"plain bytes, not a zip", good[: len(good) // 2], broken_xml.getvalue(), not_a_docx.getvalue()):
        with pytest.raises(ValidationFailed) as caught:
            extract_text("broken.docx", data)
        assert caught.value.error_code == "CORRUPT_FILE"
        assert "broken.docx" in caught.value.message


def test_pdf_gives_the_text_of_every_page_and_its_metadata_title() -> None:
    data = make_pdf(
        [["Incident INC-2025-031 postmortem", "Root cause: expired TLS certificate."], ["Action items (owner: SRE)"]],
        title="INC-2025-031",
    )
    doc = extract_text("inc.pdf", data)
    assert doc.kind == "pdf"
    assert doc.title == "INC-2025-031"
    assert "Root cause: expired TLS certificate." in doc.text
    assert "Action items (owner: SRE)" in doc.text
    assert doc.text.index("postmortem") < doc.text.index("Action items")


def test_pdf_without_metadata_title_is_titled_by_file_name() -> None:
    doc = extract_text("board-minutes.pdf", make_pdf([["Minutes."]], compress=False))
    assert doc.title == "board-minutes"
    assert doc.text == "Minutes."


def test_scanned_pdf_without_a_text_layer_is_refused_saying_ocr_is_not_supported() -> None:
    with pytest.raises(ValidationFailed) as caught:
        extract_text("scan.pdf", make_pdf([[], []]))
    assert caught.value.error_code == "NO_TEXT"
    assert "OCR is not supported" in caught.value.message
    assert caught.value.details["pages"] == 2


def test_corrupt_pdf_is_refused_as_corrupt() -> None:
    good = make_pdf([["Some text."]])
    for data in (b"not a pdf at all", good[:120], b"%PDF-1.4\n" + bytes(range(256)) * 4):
        with pytest.raises(ValidationFailed) as caught:
            extract_text("broken.pdf", data)
        assert caught.value.error_code == "CORRUPT_FILE"


def test_other_extensions_are_unsupported_media_and_the_message_lists_what_is() -> None:
    for name in ("slides.pptx", "photo.png", "README"):
        with pytest.raises(UnsupportedMediaType) as caught:
            extract_text(name, b"whatever")
        assert caught.value.status == 415
        assert caught.value.error_code == "UNSUPPORTED_FILE_TYPE"
        for extension in SUPPORTED_EXTENSIONS:
            assert extension in caught.value.message


@override_settings(CORTEX_MAX_UPLOAD_BYTES=2048)
def test_files_over_the_upload_cap_are_refused_before_parsing() -> None:
    with pytest.raises(PayloadTooLarge) as caught:
        extract_text("big.txt", b"x" * 2049)
    assert caught.value.status == 413
    assert caught.value.error_code == "FILE_TOO_LARGE"
    assert extract_text("fits.txt", b"x" * 2048).text == "x" * 2048


def test_control_characters_from_documents_do_not_reach_the_text() -> None:
    doc = extract_text("form-feed.txt", b"Page one\x0cPage two\x00end")
    assert "\x00" not in doc.text and "\x0c" not in doc.text
    assert doc.text == "Page one Page two end"

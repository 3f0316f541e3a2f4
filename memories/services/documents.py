"""Text out of uploaded documents: the one extractor behind CLI import, UI upload and briefs.

`extract_text(filename, data)` accepts .txt and .md (UTF-8, a BOM is fine), .docx (paragraphs
and tables in document order) and .pdf (the text layer of every page). It never runs OCR:
a PDF without a text layer is refused with NO_TEXT rather than stored empty.

Errors are CortexErrors, so every interface reports them the same way:
UNSUPPORTED_FILE_TYPE (415), FILE_TOO_LARGE (413), NOT_UTF8, CORRUPT_FILE, ENCRYPTED_FILE,
NO_TEXT and EMPTY_CONTENT (400).
"""

from __future__ import annotations

import io
import re
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import PurePath

from django.conf import settings

from cortex_site.errors import PayloadTooLarge, UnsupportedMediaType, ValidationFailed

SUPPORTED_EXTENSIONS = (".txt", ".md", ".docx", ".pdf")
TITLE_MAX_CHARS = 200

_MARKDOWN_H1 = re.compile(r"^#[ \t]+(?P<title>.+?)(?:[ \t]+#+)?[ \t]*$")
# Control characters other than tab and newline: PDFs and Word files carry them (form feeds,
# NULs, vertical tabs) and the store refuses NUL outright.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
_BLANK_RUN = re.compile(r"\n{3,}")


@dataclass(frozen=True)
class ExtractedDocument:
    title: str
    text: str
    kind: str  # "text", "markdown", "docx" or "pdf"


def extract_text(filename: str, data: bytes) -> ExtractedDocument:
    """Title and plain text of a document.

    The title is the document's own (docx core title, PDF metadata title, a leading Markdown
    `# heading`, a text file's first line) when it has one, else the file name without its extension. Checks the type
    from the extension and the size against CORTEX_MAX_UPLOAD_BYTES before parsing anything.
    """
    name = PurePath(filename).name
    extension = PurePath(name).suffix.lower()
    if extension not in SUPPORTED_EXTENSIONS:
        raise UnsupportedMediaType(
            f"{name}: {extension or 'files without an extension'} cannot be imported; supported types are "
            f"{', '.join(SUPPORTED_EXTENSIONS)}.",
            error_code="UNSUPPORTED_FILE_TYPE",
            details={"filename": name, "supported": list(SUPPORTED_EXTENSIONS)},
        )
    check_size(name, len(data))
    fallback = PurePath(name).stem.strip() or name
    if extension == ".docx":
        title, text, kind = *_docx(name, data), "docx"
    elif extension == ".pdf":
        title, text, kind = *_pdf(name, data), "pdf"
    else:
        text = _decode_utf8(name, data)
        kind = "markdown" if extension == ".md" else "text"
        title = _markdown_title(text) if kind == "markdown" else _first_line(text)
    text = _tidy(text)
    if not text:
        raise ValidationFailed(f"{name} contains no text.", error_code="EMPTY_CONTENT", details={"filename": name})
    return ExtractedDocument(title=_clip_title(title) or fallback, text=text, kind=kind)


def check_size(filename: str, size: int) -> None:
    """Refuse a file above CORTEX_MAX_UPLOAD_BYTES (callers holding a path check before reading it)."""
    limit = settings.CORTEX_MAX_UPLOAD_BYTES
    if size > limit:
        name = PurePath(filename).name
        raise PayloadTooLarge(
            f"{name} is {size:,} bytes; the limit is {limit:,} bytes.",
            error_code="FILE_TOO_LARGE",
            details={"filename": name, "size": size, "limit": limit},
        )


def _decode_utf8(name: str, data: bytes) -> str:
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ValidationFailed(
            f"{name} is not UTF-8 text (byte 0x{data[exc.start]:02x} at position {exc.start} is invalid). "
            "Save it as UTF-8 and try again.",
            error_code="NOT_UTF8",
            details={"filename": name, "position": exc.start},
        ) from None


def _markdown_title(text: str) -> str:
    first = next((line.strip() for line in text.splitlines() if line.strip()), "")
    match = _MARKDOWN_H1.match(first)
    return match.group("title").strip() if match else ""


def _first_line(text: str) -> str:
    """A plain-text file's first non-empty line: what people write first is what the note is about."""
    return next((line.strip() for line in text.splitlines() if line.strip()), "")


def _tidy(text: str) -> str:
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    text = _CONTROL.sub(" ", text)
    text = "\n".join(line.rstrip() for line in text.split("\n"))
    return _BLANK_RUN.sub("\n\n", text).strip()


def _clip_title(title: str) -> str:
    title = re.sub(r"\s+", " ", _CONTROL.sub(" ", title or "")).strip()
    if len(title) <= TITLE_MAX_CHARS:
        return title
    return title[:TITLE_MAX_CHARS].rsplit(" ", 1)[0].rstrip(" ,.;:") + "…"


def _corrupt(name: str, kind: str) -> ValidationFailed:
    return ValidationFailed(
        f"{name} could not be read as {kind}: the file is damaged, or it is not really {kind}.",
        error_code="CORRUPT_FILE",
        details={"filename": name},
    )


# -- Word -----------------------------------------------------------------------------------
def _docx(name: str, data: bytes) -> tuple[str, str]:
    from docx import Document
    from docx.opc.exceptions import OpcError
    from docx.table import Table
    from lxml.etree import LxmlError

    try:
        document = Document(io.BytesIO(data))
        title = document.core_properties.title or ""
        blocks: list[str] = []
        for block in document.iter_inner_content():
            if isinstance(block, Table):
                blocks.append(_docx_table(block))
            else:
                blocks.append(block.text)
    except (OpcError, zipfile.BadZipFile, KeyError, ValueError, LxmlError) as exc:
        raise _corrupt(name, "a Word document (.docx)") from exc
    return title, "\n\n".join(b.strip() for b in blocks if b.strip())


def _docx_table(table: object) -> str:
    """One line per row, cells separated by ' | '; a merged cell is written once."""
    lines = []
    for row in table.rows:  # type: ignore[attr-defined]
        cells: list[str] = []
        previous = None
        for cell in row.cells:
            if cell._tc is previous:  # merged cells repeat the same element
                continue
            previous = cell._tc
            cells.append(" ".join(cell.text.split()))
        if any(cells):
            lines.append(" | ".join(cells))
    return "\n".join(lines)


# -- PDF ------------------------------------------------------------------------------------
def _pdf(name: str, data: bytes) -> tuple[str, str]:
    from pypdf import PdfReader
    from pypdf.errors import FileNotDecryptedError, PyPdfError

    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted and not reader.decrypt(""):
            raise ValidationFailed(
                f"{name} is password-protected; remove the password and try again.",
                error_code="ENCRYPTED_FILE",
                details={"filename": name},
            )
        metadata = reader.metadata
        title = str(metadata.title or "") if metadata is not None else ""
        pages = [page.extract_text() or "" for page in reader.pages]
    except FileNotDecryptedError as exc:
        raise ValidationFailed(
            f"{name} is password-protected; remove the password and try again.",
            error_code="ENCRYPTED_FILE",
            details={"filename": name},
        ) from exc
    except (PyPdfError, ValueError, KeyError, IndexError, TypeError, zlib.error) as exc:
        # pypdf raises plain ValueError/KeyError/TypeError on malformed objects, not only its own errors.
        raise _corrupt(name, "a PDF") from exc
    text = "\n\n".join(page.strip() for page in pages if page.strip())
    if pages and not text:
        raise ValidationFailed(
            f"{name} has no extractable text ({len(pages)} page{'s' if len(pages) != 1 else ''} of images, probably a scan). "
            "OCR is not supported: export the document with its text layer, or paste the text instead.",
            error_code="NO_TEXT",
            details={"filename": name, "pages": len(pages)},
        )
    return title, text

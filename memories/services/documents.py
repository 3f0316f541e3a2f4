"""Text out of uploaded documents: the one extractor behind CLI import, UI upload and briefs.

`extract_text(filename, data)` accepts .txt and .md (UTF-8, a BOM is fine), .docx (paragraphs
and tables in document order) and .pdf (the text layer of every page). It never runs OCR:
a PDF without a text layer is refused with NO_TEXT rather than stored empty.

Untrusted bytes are bounded at every step (see `extraction` for the checks): the size before
anything is read, a .docx's zip entries before anything is decompressed, a PDF's page count
before any page is read, the text as it is collected; and .docx/.pdf parsing runs in a child
process limited to CORTEX_EXTRACT_MEMORY_MB of address space and CORTEX_EXTRACT_SECONDS of time.

Errors are CortexErrors, so every interface reports them the same way:
UNSUPPORTED_FILE_TYPE and CONTENT_MISMATCH (415); FILE_TOO_LARGE, DOCUMENT_TOO_COMPLEX,
TOO_MANY_PAGES and TEXT_TOO_LONG (413); DOCUMENT_TOO_HEAVY (422, the memory or time limit);
NOT_UTF8, CORRUPT_FILE, ENCRYPTED_FILE, NO_TEXT and EMPTY_CONTENT (400).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import PurePath

from django.conf import settings

from cortex_site.errors import CortexError, PayloadTooLarge, Unprocessable, UnsupportedMediaType, ValidationFailed
from memories.services import extraction
from memories.services.bounded import LimitExceeded, run_bounded

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
    if extension in (".docx", ".pdf"):
        extracted = _bounded_extract(name, extension, data)
        title, text, kind = extracted.title, extracted.text, extension[1:]
    else:
        try:
            extraction.check_text_content(name, extension, data)
        except extraction.ExtractionRefused as refused:
            raise _as_cortex_error(refused) from None
        text = _decode_utf8(name, data)
        if len(text) > settings.CORTEX_MAX_CONTENT_CHARS:
            limit = settings.CORTEX_MAX_CONTENT_CHARS
            raise PayloadTooLarge(
                f"{name} holds {len(text):,} characters of text; one memory holds at most {limit:,}. "
                "Split it into smaller documents.",
                error_code="TEXT_TOO_LONG",
                details={"filename": name, "limit": limit},
            )
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


# -- Word and PDF: parsed in a bounded child process ------------------------------------------
_BY_STATUS: dict[int, type[CortexError]] = {
    400: ValidationFailed,
    413: PayloadTooLarge,
    415: UnsupportedMediaType,
    422: Unprocessable,
}


def _as_cortex_error(refused: extraction.ExtractionRefused) -> CortexError:
    """The child's refusal as the domain error every interface renders."""
    kind = _BY_STATUS.get(refused.status, ValidationFailed)
    return kind(refused.message, error_code=refused.error_code, details=refused.details)


def _bounded_extract(name: str, extension: str, data: bytes) -> extraction.Extracted:
    memory_mb = settings.CORTEX_EXTRACT_MEMORY_MB
    seconds = settings.CORTEX_EXTRACT_SECONDS
    args = (name, extension, data, settings.CORTEX_MAX_CONTENT_CHARS, settings.CORTEX_MAX_PDF_PAGES)
    try:
        result: extraction.Extracted = run_bounded(
            extraction.extract_document, args, memory_bytes=memory_mb * 1024 * 1024, cpu_seconds=seconds, wall_seconds=seconds + 2
        )
    except extraction.ExtractionRefused as refused:
        raise _as_cortex_error(refused) from None
    except LimitExceeded as exceeded:
        limit = {"memory": f"{memory_mb} MB of memory", "time": f"{seconds} s"}.get(exceeded.reason, "the reader's limits")
        raise Unprocessable(
            f"{name} could not be read within {limit}; it is too complex for Cortex to extract. "
            "Save it again as a simpler document (or as text) and retry.",
            error_code="DOCUMENT_TOO_HEAVY",
            details={"filename": name, "limit": exceeded.reason},
        ) from None
    return result

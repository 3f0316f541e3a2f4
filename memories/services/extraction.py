"""Bounded text extraction from untrusted .docx and .pdf bytes (no Django: it runs in a child process).

Every limit is checked before the work it bounds:

- a .docx is a zip: its entry count, each entry's declared size and compression ratio, and the
  total declared size are checked before anything is decompressed (Python's zipfile stops at the
  declared size and fails the CRC check, so a lying header cannot expand further); the main part
  is then parsed as a stream (lxml iterparse), never as a whole tree, and parsing stops as soon
  as the text passes `max_chars`;
- a .pdf's page count is checked before any page is read, and page text is collected only until
  it passes `max_chars`;
- bytes that are recognisably another kind of file than the extension says are refused.

`documents.extract_text` runs `extract_document` under a memory and CPU limit in a child
process (see `memories.services.bounded`), so what these checks cannot foresee (a PDF content
stream that inflates to gigabytes, a parser bug) ends that child, not the server.

Refusals are `ExtractionRefused` with plain arguments so they cross the process boundary intact.
"""

from __future__ import annotations

import io
import zipfile
import zlib
from dataclasses import dataclass
from typing import Any

# A Word document has a few dozen parts; thousands of entries are an attack on the central directory.
MAX_ZIP_ENTRIES = 2000
# Declared uncompressed size of all entries together, and of the one XML part that is parsed.
MAX_ZIP_TOTAL_BYTES = 256 * 1024 * 1024
MAX_MAIN_PART_BYTES = 64 * 1024 * 1024
# Real Word XML deflates 5-30×; a part of more than 1 MiB expanding over 100× is padding, not prose
# (the 62 KB file holding 20 MB of empty paragraphs expands 330×).
MAX_COMPRESSION_RATIO = 100
RATIO_CHECK_MIN_BYTES = 1024 * 1024
MAX_SMALL_PART_BYTES = 4 * 1024 * 1024  # relationships, core properties

_W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
_REL = "{http://schemas.openxmlformats.org/package/2006/relationships}"
_OFFICE_DOCUMENT = "/officeDocument"
_DC_TITLE = "{http://purl.org/dc/elements/1.1/}title"

# Signatures of the files most often sent under the wrong name: (magic, what it is, its usual extension).
_SIGNATURES: tuple[tuple[bytes, str, str], ...] = (
    (b"%PDF-", "a PDF document", ".pdf"),
    (b"PK\x03\x04", "a zip archive", ".zip"),
    (b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1", "an old-style Office file (.doc/.xls)", ".doc"),
    (b"\x89PNG\r\n\x1a\n", "a PNG image", ".png"),
    (b"\xff\xd8\xff", "a JPEG image", ".jpg"),
    (b"GIF8", "a GIF image", ".gif"),
    (b"\x1f\x8b", "a gzip archive", ".gz"),
    (b"\x7fELF", "a Linux program", ""),
    (b"MZ", "a Windows program", ".exe"),
    (b"{\\rtf", "a Rich Text document", ".rtf"),
)


class ExtractionRefused(Exception):
    """A document refused; `args` = (status, error_code, message, details) so it pickles as is."""

    def __init__(self, status: int, error_code: str, message: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(status, error_code, message, details or {})

    @property
    def status(self) -> int:
        return int(self.args[0])

    @property
    def error_code(self) -> str:
        return str(self.args[1])

    @property
    def message(self) -> str:
        return str(self.args[2])

    @property
    def details(self) -> dict[str, Any]:
        return dict(self.args[3])


@dataclass(frozen=True)
class Extracted:
    title: str
    text: str
    pages: int | None = None


def sniff(data: bytes) -> tuple[str, str] | None:
    """(what the bytes are, their usual extension) when they start like a known binary format."""
    for magic, label, extension in _SIGNATURES:
        if data.startswith(magic):
            if magic == b"PK\x03\x04" and _looks_like_docx(data):
                return "a Word document", ".docx"
            return label, extension
    # The PDF header may follow a little junk (pypdf and readers accept it).
    if b"%PDF-" in data[:1024]:
        return "a PDF document", ".pdf"
    return None


def _looks_like_docx(data: bytes) -> bool:
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            return "word/document.xml" in archive.namelist()
    except (zipfile.BadZipFile, ValueError, OSError):
        return False


def _mismatch(name: str, expected: str, extension: str, found: tuple[str, str]) -> ExtractionRefused:
    label, usual = found
    hint = f" Rename it to {usual} if Cortex reads that type, or export it as {extension}." if usual else ""
    return ExtractionRefused(
        415,
        "CONTENT_MISMATCH",
        f"{name} is {label}, not {expected}: its content does not match its extension.{hint}",
        {"filename": name, "extension": extension, "detected": label},
    )


def check_text_content(name: str, extension: str, data: bytes) -> None:
    """A .txt/.md file whose bytes are a known binary format is refused (before decoding it)."""
    found = sniff(data)
    if found is not None:
        raise _mismatch(name, "text", extension, found)


def _too_long(name: str, max_chars: int) -> ExtractionRefused:
    return ExtractionRefused(
        413,
        "TEXT_TOO_LONG",
        f"{name} holds more than {max_chars:,} characters of text, the most one memory can hold; "
        "split it into smaller documents.",
        {"filename": name, "limit": max_chars},
    )


def _corrupt(name: str, kind: str) -> ExtractionRefused:
    return ExtractionRefused(
        400,
        "CORRUPT_FILE",
        f"{name} could not be read as {kind}: the file is damaged, or it is not really {kind}.",
        {"filename": name},
    )


def extract_document(name: str, extension: str, data: bytes, max_chars: int, max_pages: int) -> Extracted:
    """Title and raw text (blocks joined by blank lines) of a .docx or .pdf; raises ExtractionRefused."""
    if extension == ".docx":
        return _docx(name, data, max_chars)
    if extension == ".pdf":
        return _pdf(name, data, max_chars, max_pages)
    raise ValueError(f"not a document extension: {extension}")


# -- Word -----------------------------------------------------------------------------------
def _check_archive(name: str, archive: zipfile.ZipFile) -> None:
    entries = archive.infolist()
    if len(entries) > MAX_ZIP_ENTRIES:
        raise ExtractionRefused(
            413,
            "DOCUMENT_TOO_COMPLEX",
            f"{name} holds {len(entries):,} parts; Cortex reads Word documents of up to {MAX_ZIP_ENTRIES:,}.",
            {"filename": name, "entries": len(entries), "limit": MAX_ZIP_ENTRIES},
        )
    total = sum(entry.file_size for entry in entries)
    if total > MAX_ZIP_TOTAL_BYTES:
        raise _expands(name, total, MAX_ZIP_TOTAL_BYTES)
    for entry in entries:
        ratio = entry.file_size / max(entry.compress_size, 1)
        if entry.file_size > RATIO_CHECK_MIN_BYTES and ratio > MAX_COMPRESSION_RATIO:
            raise ExtractionRefused(
                413,
                "DOCUMENT_TOO_COMPLEX",
                f"{name} looks like a zip bomb: {entry.filename} expands {ratio:,.0f}× "
                f"({entry.compress_size:,} to {entry.file_size:,} bytes); real documents expand far less.",
                {"filename": name, "part": entry.filename, "ratio": round(ratio), "limit": MAX_COMPRESSION_RATIO},
            )


def _expands(name: str, size: int, limit: int) -> ExtractionRefused:
    return ExtractionRefused(
        413,
        "DOCUMENT_TOO_COMPLEX",
        f"{name} expands to {size:,} bytes; Cortex reads Word documents that expand to at most {limit:,}.",
        {"filename": name, "expanded": size, "limit": limit},
    )


def _small_part(archive: zipfile.ZipFile, part: str) -> bytes | None:
    try:
        info = archive.getinfo(part)
    except KeyError:
        return None
    if info.file_size > MAX_SMALL_PART_BYTES:
        return None
    return archive.read(info)


def _xml_parser() -> Any:
    from lxml import etree

    # No entity expansion, no network, no huge-tree mode: what libxml2 would otherwise allow is refused.
    return etree.XMLParser(resolve_entities=False, no_network=True, huge_tree=False)


def _main_part(archive: zipfile.ZipFile) -> str:
    from lxml import etree

    rels = _small_part(archive, "_rels/.rels")
    if rels:
        root = etree.fromstring(rels, parser=_xml_parser())
        for rel in root.iter(f"{_REL}Relationship"):
            if (rel.get("Type") or "").endswith(_OFFICE_DOCUMENT) and rel.get("TargetMode") != "External":
                return (rel.get("Target") or "").lstrip("/")
    return "word/document.xml"


def _core_title(archive: zipfile.ZipFile) -> str:
    from lxml import etree

    core = _small_part(archive, "docProps/core.xml")
    if not core:
        return ""
    root = etree.fromstring(core, parser=_xml_parser())
    element = root.find(_DC_TITLE)
    return (element.text or "") if element is not None else ""


def _docx(name: str, data: bytes, max_chars: int) -> Extracted:
    from lxml import etree

    kind = "a Word document (.docx)"
    if not data.startswith(b"PK\x03\x04"):
        found = sniff(data)
        raise _mismatch(name, "a Word document", ".docx", found) if found else _corrupt(name, kind)
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            _check_archive(name, archive)
            main = _main_part(archive)
            if main not in archive.namelist():
                raise _corrupt(name, kind)
            if archive.getinfo(main).file_size > MAX_MAIN_PART_BYTES:
                raise _expands(name, archive.getinfo(main).file_size, MAX_MAIN_PART_BYTES)
            title = _core_title(archive)
            with archive.open(main) as stream:
                text = _docx_body_text(name, stream, max_chars)
    except (zipfile.BadZipFile, etree.LxmlError, KeyError, ValueError, EOFError, zlib.error, NotImplementedError) as exc:
        # NotImplementedError: a compression method zipfile lacks; KeyError/ValueError: broken directory.
        raise _corrupt(name, kind) from exc
    return Extracted(title=title, text=text)


def _docx_body_text(name: str, stream: Any, max_chars: int) -> str:
    """The body's paragraphs and tables in document order, read as a stream.

    Mirrors python-docx: a paragraph's text is its runs' w:t (w:tab → tab, w:br/w:cr → newline),
    deleted text and text boxes are left out, a table is one line per row with its cells' text
    separated by " | ", and a table nested in a cell is not part of that cell's text.
    Each run, paragraph and row is cleared once read, so memory stays flat however long the part is.
    """
    from lxml import etree

    blocks: list[str] = []
    chars = 0
    paragraph: list[str] = []
    # One entry per open table: its lines, the current row's cells, the current cell's paragraphs.
    tables: list[tuple[list[str], list[str], list[str]]] = []
    skip = 0  # inside a text box (w:txbxContent): python-docx leaves its text out of the paragraph
    context = etree.iterparse(
        stream, events=("start", "end"), resolve_entities=False, no_network=True, huge_tree=False, remove_comments=True
    )
    for event, element in context:
        tag = element.tag
        if not isinstance(tag, str) or not tag.startswith(_W):
            continue
        local = tag[len(_W) :]
        if local == "txbxContent":
            skip += 1 if event == "start" else -1
            continue
        if event == "start":
            if local == "tbl":
                tables.append(([], [], []))
            continue
        if skip:
            if local in {"r", "p"}:
                element.clear()
            continue
        if local == "t":
            piece = element.text or ""
            paragraph.append(piece)
            chars += len(piece)
            if chars > max_chars:
                raise _too_long(name, max_chars)
        elif local == "tab" and element.getparent() is not None and _local(element.getparent().tag) == "r":
            paragraph.append("\t")
        elif local in {"br", "cr"}:
            paragraph.append("\n")
        elif local == "r":
            element.clear()
        elif local == "p":
            text = "".join(paragraph)
            paragraph = []
            if tables:
                tables[-1][2].append(text)
            else:
                blocks.append(text)
            _drop(element)
        elif local == "tc" and tables:
            _lines, cells, cell = tables[-1]
            cells.append(" ".join("\n".join(cell).split()))
            cell.clear()
        elif local == "tr" and tables:
            lines, cells, _cell = tables[-1]
            if any(cells):
                lines.append(" | ".join(cells))
            cells.clear()
            _drop(element)
        elif local == "tbl" and tables:
            lines, _cells, _cell = tables.pop()
            if not tables:  # a nested table's text is not its cell's (python-docx's cell.text)
                blocks.append("\n".join(lines))
            _drop(element)
    return "\n\n".join(b.strip() for b in blocks if b.strip())


def _local(tag: Any) -> str:
    return tag[len(_W) :] if isinstance(tag, str) and tag.startswith(_W) else ""


def _drop(element: Any) -> None:
    """Free an element that has been read, and the siblings before it (iterparse keeps them otherwise)."""
    element.clear()
    parent = element.getparent()
    if parent is not None:
        while element.getprevious() is not None:
            del parent[0]


# -- PDF ------------------------------------------------------------------------------------
def _declared_pages(reader: Any) -> int:
    try:
        count = reader.trailer["/Root"]["/Pages"].get("/Count", 0)
        return int(count)
    except (KeyError, TypeError, ValueError, AttributeError):
        return 0  # no usable /Count: the real count decides


def _direct_kids(reader: Any) -> int:
    """How many entries the root of the page tree lists, read without resolving any of them: each
    is at least one page, so a flat tree of thousands is refused without reading thousands of objects."""
    try:
        kids = reader.trailer["/Root"]["/Pages"].get("/Kids", [])
        return len(kids)
    except (KeyError, TypeError, ValueError, AttributeError):
        return 0


def _check_pages(name: str, count: int, max_pages: int) -> None:
    if count > max_pages:
        raise ExtractionRefused(
            413,
            "TOO_MANY_PAGES",
            f"{name} has {count:,} pages; Cortex reads PDFs of up to {max_pages:,} pages. Split it into smaller documents.",
            {"filename": name, "pages": count, "limit": max_pages},
        )


def _pdf(name: str, data: bytes, max_chars: int, max_pages: int) -> Extracted:
    from pypdf import PdfReader
    from pypdf.errors import FileNotDecryptedError, LimitReachedError, PyPdfError

    if b"%PDF-" not in data[:1024]:
        found = sniff(data)
        raise _mismatch(name, "a PDF document", ".pdf", found) if found else _corrupt(name, "a PDF")
    encrypted = ExtractionRefused(
        400, "ENCRYPTED_FILE", f"{name} is password-protected; remove the password and try again.", {"filename": name}
    )
    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted and not reader.decrypt(""):
            raise encrypted
        # The page tree's own /Count and the root's list of kids first: one object, where counting
        # the pages resolves every one of them (about 1.5 ms a page in pypdf). A /Count that lies
        # under a nested tree is caught by the real count, within the CPU limit.
        _check_pages(name, _declared_pages(reader), max_pages)
        _check_pages(name, _direct_kids(reader), max_pages)
        count = len(reader.pages)
        _check_pages(name, count, max_pages)
        metadata = reader.metadata
        title = str(metadata.title or "") if metadata is not None else ""
        pages: list[str] = []
        chars = 0
        for page in reader.pages:
            text = (page.extract_text() or "").strip()
            chars += len(text)
            if chars > max_chars:
                raise _too_long(name, max_chars)
            pages.append(text)
    except FileNotDecryptedError as exc:
        raise encrypted from exc
    except LimitReachedError as exc:
        # pypdf's own decompression-bomb guard (a stream inflating past its output limit).
        raise ExtractionRefused(
            413,
            "DOCUMENT_TOO_COMPLEX",
            f"{name} holds a compressed stream that inflates past what Cortex reads (a decompression bomb, "
            "or a page far larger than documents have).",
            {"filename": name},
        ) from exc
    except (PyPdfError, ValueError, KeyError, IndexError, TypeError, AttributeError, zlib.error, RecursionError) as exc:
        # pypdf raises plain ValueError/KeyError/TypeError on malformed objects, not only its own errors.
        raise _corrupt(name, "a PDF") from exc
    text = "\n\n".join(page for page in pages if page)
    if count and not text:
        raise ExtractionRefused(
            400,
            "NO_TEXT",
            f"{name} has no extractable text ({count} page{'s' if count != 1 else ''} of images, probably a scan). "
            "OCR is not supported: export the document with its text layer, or paste the text instead.",
            {"filename": name, "pages": count},
        )
    return Extracted(title=title, text=text, pages=count)

"""Real .docx and .pdf files built in tests (import as `from document_files import ...`).

The PDF writer is a few lines of the PDF 1.4 format written by hand (objects, a content
stream with text operators, a cross-reference table with exact byte offsets), so tests need
no PDF-generating dependency and control exactly what is inside.
"""

from __future__ import annotations

import io
import zlib
from collections.abc import Sequence


def make_docx(
    paragraphs: Sequence[str] = (), *, title: str = "", table: Sequence[Sequence[str]] = (), after: Sequence[str] = ()
) -> bytes:
    """A Word document: paragraphs, then an optional table, then more paragraphs."""
    from docx import Document

    document = Document()
    document.core_properties.title = title
    for text in paragraphs:
        document.add_paragraph(text)
    if table:
        grid = document.add_table(rows=len(table), cols=len(table[0]))
        for r, row in enumerate(table):
            for c, value in enumerate(row):
                grid.cell(r, c).text = value
    for text in after:
        document.add_paragraph(text)
    buffer = io.BytesIO()
    document.save(buffer)
    return buffer.getvalue()


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")


def make_pdf(pages: Sequence[Sequence[str]], *, title: str = "", compress: bool = True) -> bytes:
    """A PDF with one page per entry; each page shows its lines in Helvetica.

    A page given as an empty list carries only an image (what a scan looks like to a text
    extractor): no text operators at all.
    """
    objects: list[bytes] = []

    def add(body: bytes) -> int:
        objects.append(body)
        return len(objects)

    catalog = add(b"")  # filled in once the page tree exists
    page_tree = add(b"")
    font = add(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>")
    image = add(
        b"<< /Type /XObject /Subtype /Image /Width 2 /Height 2 /ColorSpace /DeviceGray "
        b"/BitsPerComponent 8 /Length 4 >>\nstream\n\x10\x80\x80\x10\nendstream"
    )
    kids = []
    for lines in pages:
        if lines:
            ops = ["BT", "/F1 12 Tf", "14 TL", "72 720 Td"]
            for line in lines:
                ops += [f"({_escape(line)}) Tj", "T*"]
            ops.append("ET")
        else:
            ops = ["q", "500 0 0 700 50 50 cm", "/Im1 Do", "Q"]
        raw = "\n".join(ops).encode("cp1252")
        if compress:
            data = zlib.compress(raw)
            content = add(b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(data) + data + b"\nendstream")
        else:
            content = add(b"<< /Length %d >>\nstream\n" % len(raw) + raw + b"\nendstream")
        kids.append(
            add(
                b"<< /Type /Page /Parent %d 0 R /MediaBox [0 0 612 792] /Contents %d 0 R "
                b"/Resources << /Font << /F1 %d 0 R >> /XObject << /Im1 %d 0 R >> >> >>" % (page_tree, content, font, image)
            )
        )
    objects[catalog - 1] = b"<< /Type /Catalog /Pages %d 0 R >>" % page_tree
    objects[page_tree - 1] = b"<< /Type /Pages /Kids [%s] /Count %d >>" % (b" ".join(b"%d 0 R" % k for k in kids), len(kids))
    info = add(b"<< /Title (%s) /Producer (cortex tests) >>" % _escape(title).encode("cp1252")) if title else None

    out = bytearray(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    for offset in offsets:
        out += b"%010d 00000 n \n" % offset
    trailer = b"<< /Size %d /Root %d 0 R" % (len(objects) + 1, catalog)
    if info:
        trailer += b" /Info %d 0 R" % info
    out += b"trailer\n" + trailer + b" >>\nstartxref\n%d\n%%%%EOF\n" % xref
    return bytes(out)

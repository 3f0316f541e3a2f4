"""Hostile documents built on the fly (import as `from hostile_files import ...`; bench/reliability/r30_input.py too).

Each is what an attacker, or an unlucky export, would send: small on the wire, expensive to read.
"""

from __future__ import annotations

import io
import random
import struct
import zipfile
import zlib

from document_files import make_docx, make_pdf

_BODY_OPEN = (
    b'<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n'
    b'<w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"><w:body>'
)
_BODY_CLOSE = b"</w:body></w:document>"


def _with_document_xml(chunks: list[bytes] | bytes, *, repeat: int = 1) -> bytes:
    """A real .docx (python-docx's template) whose word/document.xml is replaced, streamed into the zip."""
    template = make_docx(["placeholder"])
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(template)) as src, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as dst:
        for item in src.infolist():
            if item.filename != "word/document.xml":
                dst.writestr(item, src.read(item.filename))
                continue
            info = zipfile.ZipInfo("word/document.xml", date_time=item.date_time)
            info.compress_type = zipfile.ZIP_DEFLATED
            with dst.open(info, "w", force_zip64=True) as part:
                part.write(_BODY_OPEN)
                body = chunks if isinstance(chunks, bytes) else b"".join(chunks)
                for _ in range(repeat):
                    part.write(body)
                part.write(_BODY_CLOSE)
    return out.getvalue()


def zip_bomb_docx(expanded_mb: int = 20) -> bytes:
    """The outside pass's file: tens of KB holding `expanded_mb` MB of tiny paragraphs (ratio in the hundreds)."""
    paragraph = b"<w:p><w:r><w:t>a</w:t></w:r></w:p>"
    block = paragraph * 1000
    return _with_document_xml(block, repeat=expanded_mb * 1024 * 1024 // len(block))


def lying_zip_docx(declared: int = 100, real_mb: int = 8) -> bytes:
    """A zip bomb whose central directory claims document.xml is `declared` bytes (so no ratio alarm):
    zipfile reads no further than the declared size and the CRC check fails."""
    data = bytearray(zip_bomb_docx(real_mb))
    with zipfile.ZipFile(io.BytesIO(bytes(data))) as archive:
        info = archive.getinfo("word/document.xml")
    central = data.rfind(b"PK\x01\x02", 0, len(data))
    while central >= 0:
        name_length = struct.unpack_from("<H", data, central + 28)[0]
        if data[central + 46 : central + 46 + name_length] == b"word/document.xml":
            break
        central = data.rfind(b"PK\x01\x02", 0, central)
    # zip64 entries keep their sizes in the extra field; those are what zipfile believes.
    extra_length = struct.unpack_from("<H", data, central + 30)[0]
    extra_start = central + 46 + name_length
    extra = data[extra_start : extra_start + extra_length]
    if info.file_size >= 0xFFFFFFFF or extra.startswith(b"\x01\x00"):
        struct.pack_into("<Q", data, extra_start + 4, declared)
    else:
        struct.pack_into("<I", data, central + 24, declared)
    return bytes(data)


def wordy_docx(chars: int = 400_000) -> bytes:
    """Ordinary-looking prose (random words: it compresses like text, so no ratio alarm) past the text cap."""
    rng = random.Random(18)
    vocabulary = ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(3, 10))) for _ in range(5000)]
    paragraphs: list[bytes] = []
    size = 0
    while size < chars:
        text = " ".join(rng.choice(vocabulary) for _ in range(60))
        paragraphs.append(b"<w:p><w:r><w:t>" + text.encode() + b"</w:t></w:r></w:p>")
        size += len(text)
    return _with_document_xml(paragraphs)


def thousand_page_pdf(pages: int = 5000) -> bytes:
    """Thousands of pages, each a line of text: under a megabyte on the wire."""
    return make_pdf([[f"Page {n}"] for n in range(pages)])


def scanned_pdf(pages: int = 3) -> bytes:
    """Pages of images only: no text layer."""
    return make_pdf([[] for _ in range(pages)])


def inflating_pdf(expanded_mb: int = 400) -> bytes:
    """One page whose content stream inflates to `expanded_mb` MB of text operators: a deflate bomb inside a PDF."""
    line = b"(x) Tj\n"
    compressor = zlib.compressobj(1)
    block = line * 100_000
    parts = [compressor.compress(b"BT /F1 12 Tf 72 720 Td\n")]
    for _ in range(expanded_mb * 1024 * 1024 // len(block)):
        parts.append(compressor.compress(block))
    parts.append(compressor.compress(b"ET") + compressor.flush())
    stream = b"".join(parts)
    good = make_pdf([["placeholder"]], compress=True)
    start = good.index(b"stream\n", good.index(b"/Filter /FlateDecode")) + len(b"stream\n")
    end = good.index(b"\nendstream", start)
    header_start = good.rindex(b"<< /Length", 0, start)
    rebuilt = good[:header_start] + b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(stream) + stream + good[end:]
    return rebuilt  # the xref offsets are now wrong; pypdf rebuilds them, as readers do


def single_line_text(mb: int = 50) -> bytes:
    return b"x" * (mb * 1024 * 1024)


PNG_BYTES = b"\x89PNG\r\n\x1a\n" + b"\x00" * 64


def lying_count_pdf(pages: int = 5000) -> bytes:
    """Thousands of pages under a page tree whose /Count claims one: only counting them all tells."""
    claimed = b"/Count %d" % pages
    # Padded to the same length, so every cross-reference offset stays right (else pypdf spends its
    # time rebuilding the table, which is a different hostile file).
    return thousand_page_pdf(pages).replace(claimed, b"/Count 1".ljust(len(claimed)), 1)


# Run in a bounded child by the tests of memories.services.bounded (importable there by name).
def hog_memory(mb: int) -> int:
    return len(b"x" * (mb * 1024 * 1024))


def spin_forever() -> None:
    while True:
        pass


def refuse(message: str) -> None:
    raise LookupError(message)


def address_space() -> int:
    """This process's address space in bytes (VmSize): what RLIMIT_AS counts."""
    with open("/proc/self/status") as status:
        line = next(line for line in status if line.startswith("VmSize:"))
    return int(line.split()[1]) * 1024

"""Gmail API messages (format=full) → the text Cortex stores. Pure functions, no I/O.

The API hands a message as a tree of MIME parts whose bodies are URL-safe base64 of the bytes in
the part's own charset (the transfer encoding is already undone). We prefer text/plain, fall back
to text/html converted to text, trim what repeats earlier mail (quoted replies, signatures) and
list attachments by name only: their bytes are never fetched.
"""

from __future__ import annotations

import base64
import binascii
import codecs
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.errors import HeaderParseError
from email.header import decode_header, make_header
from email.message import Message
from email.utils import getaddresses, parsedate_to_datetime
from html.parser import HTMLParser
from typing import Any

# Block-level tags end a line when converting HTML; everything else flows inline.
_BLOCK_TAGS = frozenset(
    [
        "address",
        "article",
        "aside",
        "blockquote",
        "dd",
        "div",
        "dl",
        "dt",
        "fieldset",
        "figcaption",
        "figure",
        "footer",
        "form",
        "h1",
        "h2",
        "h3",
        "h4",
        "h5",
        "h6",
        "header",
        "hr",
        "li",
        "main",
        "nav",
        "ol",
        "p",
        "pre",
        "section",
        "table",
        "tbody",
        "thead",
        "tfoot",
        "tr",
        "ul",
    ]
)
_SKIP_TAGS = frozenset({"script", "style", "head", "title", "template"})
_BLANK_RUN = re.compile(r"\n{3,}")
_SPACE_RUN = re.compile(r"[ \t\u00a0]+")
# "On Mon, 3 Jun 2024 at 10:02, Ada <ada@x> wrote:" (Gmail, Apple Mail, Thunderbird; may wrap onto
# a second line) and Outlook's separators: everything from there down is the earlier mail.
_REPLY_HEADER = re.compile(
    r"^\s*(On\b.{0,300}?\bwrote:|Le\b.{0,300}?\ba écrit\s?:|Am\b.{0,300}?\bschrieb\b.{0,80}:)\s*$", re.I | re.S
)
_OUTLOOK_SEPARATOR = re.compile(r"^\s*(-{2,}\s*Original Message\s*-{2,}|_{10,}|From:\s.+)$", re.I)
_FORWARD_MARKER = re.compile(r"^\s*-{2,}\s*Forwarded message\s*-{2,}\s*$", re.I)
_PRE_LINE = "\x00"  # starts a line inside <pre>; never in decoded HTML text (NUL is not allowed there)
_SIGNATURE_MARKERS = ("-- ", "--", "__")
_MOBILE_SIGNATURE = re.compile(r"^\s*Sent from my \w+", re.I)


@dataclass(frozen=True)
class ParsedMessage:
    message_id: str
    thread_id: str
    subject: str
    from_name: str
    from_email: str
    date: datetime | None
    text: str
    attachments: tuple[str, ...] = ()
    label_ids: tuple[str, ...] = field(default=())


def decode_body(data: str) -> bytes:
    """URL-safe base64 as Gmail sends it, with or without `=` padding."""
    cleaned = data.strip().replace("\n", "").replace("\r", "")
    try:
        return base64.urlsafe_b64decode(cleaned + "=" * (-len(cleaned) % 4))
    except (binascii.Error, ValueError):
        return b""


def decode_text(data: bytes, charset: str | None) -> str:
    """Bytes in a declared charset; an unknown or missing charset falls back to UTF-8, then
    Windows-1252, then Latin-1. Latin-1 labels are read as Windows-1252, as mail readers do (the
    WHATWG Encoding Standard): Outlook labels its curly quotes, dashes and € "iso-8859-1"."""
    name = (charset or "utf-8").strip().strip('"').lower()
    try:
        name = "cp1252" if codecs.lookup(name).name == "iso8859-1" else name
    except LookupError:
        name = "utf-8"
    for candidate in (name, "utf-8", "cp1252"):
        try:
            return data.decode(candidate)
        except UnicodeDecodeError:
            continue
    return data.decode("latin-1")


def decode_header_value(value: str) -> str:
    """An RFC 2047 header (`=?utf-8?q?...?=`) as text; plain values pass through."""
    if "=?" not in value:
        return value
    try:
        return str(make_header(decode_header(value)))
    except (UnicodeDecodeError, LookupError, ValueError, HeaderParseError):
        # A broken encoded word (cut-off base64, say): the raw header reads better than no mail at all.
        return value


def headers_of(part: dict[str, Any]) -> dict[str, str]:
    """Header name (lower-case) → value; the first occurrence wins, as mail readers show it."""
    found: dict[str, str] = {}
    for header in part.get("headers") or []:
        name = str(header.get("name", "")).lower()
        if name and name not in found:
            found[name] = str(header.get("value", ""))
    return found


def _content_type(part: dict[str, Any]) -> tuple[str, str | None]:
    header = headers_of(part).get("content-type", "")
    message = Message()
    if header:
        message["Content-Type"] = header
    mime = (part.get("mimeType") or message.get_content_type() or "text/plain").lower()
    return mime, message.get_param("charset") if header else None  # type: ignore[return-value]


def _is_attachment(part: dict[str, Any]) -> bool:
    if part.get("filename"):
        return True
    disposition = headers_of(part).get("content-disposition", "").lower()
    return disposition.startswith("attachment")


def _walk(part: dict[str, Any]) -> list[dict[str, Any]]:
    parts = [part]
    for child in part.get("parts") or []:
        parts.extend(_walk(child))
    return parts


def body_text(payload: dict[str, Any]) -> tuple[str, tuple[str, ...]]:
    """(text, attachment names) of a message payload: the first text/plain part that is not an
    attachment, else the first text/html converted to text; attachments in document order."""
    plain: str | None = None
    html: str | None = None
    attachments: list[str] = []
    for part in _walk(payload):
        mime, charset = _content_type(part)
        if mime.startswith("multipart/"):
            continue
        if _is_attachment(part):
            attachments.append(part.get("filename") or "(unnamed attachment)")
            continue
        data = (part.get("body") or {}).get("data")
        if not data:
            continue
        if mime == "text/plain" and plain is None:
            plain = decode_text(decode_body(data), charset)
        elif mime == "text/html" and html is None:
            html = decode_text(decode_body(data), charset)
    if plain is not None and plain.strip():
        text = plain
    elif html is not None:
        text = html_to_text(html)
    else:
        text = ""
    return trim_reply(text), tuple(attachments)


def parse_message(message: dict[str, Any]) -> ParsedMessage:
    """A `users.messages.get` (format=full) resource as the parts Cortex keeps."""
    payload = message.get("payload") or {}
    headers = headers_of(payload)
    text, attachments = body_text(payload)
    # Split the address before decoding the name: an encoded "Müller, Jürgen" holds a comma.
    addresses = getaddresses([headers.get("from", "")])
    from_name, from_email = addresses[0] if addresses else ("", "")
    from_name = decode_header_value(from_name)
    return ParsedMessage(
        message_id=str(message.get("id", "")),
        thread_id=str(message.get("threadId", "")),
        subject=decode_header_value(headers.get("subject", "")).strip(),
        from_name=from_name.strip() or from_email,
        from_email=from_email.strip().lower(),
        date=message_date(message, headers),
        text=text,
        attachments=attachments,
        label_ids=tuple(message.get("labelIds") or ()),
    )


def message_date(message: dict[str, Any], headers: dict[str, str] | None = None) -> datetime | None:
    """The Date header (the sender's time); Gmail's internalDate (ms since epoch) when it is unreadable."""
    raw = (headers if headers is not None else headers_of(message.get("payload") or {})).get("date", "")
    if raw:
        try:
            parsed = parsedate_to_datetime(raw)
        except (TypeError, ValueError, IndexError):
            parsed = None
        if parsed is not None:
            return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
    internal = message.get("internalDate")
    if internal and str(internal).isdigit():
        return datetime.fromtimestamp(int(internal) / 1000, tz=UTC)
    return None


# -- HTML → text ---------------------------------------------------------------------------------
class _TextExtractor(HTMLParser):
    """Readable text from mail HTML: blocks on their own lines, list items bulleted, links keep their
    address, and Gmail's quoted earlier mail (div.gmail_quote, blockquote type=cite) left out."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.out: list[str] = []
        self._skip_depth = 0  # inside script/style or a quoted reply
        self._stack: list[tuple[str, bool]] = []  # (tag, starts a skipped region)
        self._href: list[str | None] = []
        self._pre = 0
        self._cells = 0  # cells so far in the current table row

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = dict(attrs)
        classes = (attributes.get("class") or "").split()
        quoted = (
            "gmail_quote" in classes
            or "gmail_signature" in classes
            or (tag == "blockquote" and (attributes.get("type") or "").lower() == "cite")
            or (tag == "div" and attributes.get("id") in {"appendonsend", "divRplyFwdMsg"})
        )
        if tag in {"br", "hr", "img", "meta", "link", "input", "wbr"}:
            # Void elements have no end tag: handle them here and never push them.
            if not self._skip_depth and tag in {"br", "hr"}:
                self.out.append("\n")
            return
        skip = tag in _SKIP_TAGS or quoted
        self._stack.append((tag, skip))
        if skip:
            self._skip_depth += 1
            return
        if self._skip_depth:
            return
        if tag == "pre":
            self._pre += 1
        if tag in _BLOCK_TAGS:
            self.out.append("\n")
        if tag == "pre":
            self.out.append(_PRE_LINE)
        if tag == "li":
            self.out.append("- ")
        if tag == "a":
            self._href.append(attributes.get("href"))
        if tag == "tr":
            self._cells = 0
        if tag in {"td", "th"}:
            if self._cells:
                self.out.append(" | ")
            self._cells += 1

    def handle_endtag(self, tag: str) -> None:
        # Mail HTML is often unbalanced: close up to the nearest matching open tag, if any.
        for index in range(len(self._stack) - 1, -1, -1):
            if self._stack[index][0] == tag:
                break
        else:
            return
        while len(self._stack) > index:
            open_tag, skip = self._stack.pop()
            if skip:
                self._skip_depth -= 1
                continue
            if self._skip_depth:
                continue
            if open_tag == "pre":
                self._pre -= 1
            if open_tag == "a" and self._href:
                href = self._href.pop()
                if href and href.startswith(("http://", "https://")) and not self._last_text_is(href):
                    self.out.append(f" ({href})")
            if open_tag in _BLOCK_TAGS:
                self.out.append("\n")

    def handle_data(self, data: str) -> None:
        if self._skip_depth:
            return
        if self._pre:
            # Preformatted lines keep their indentation: the marker stops html_to_text stripping it.
            self.out.append(data.replace("\r", "").replace("\n", "\n" + _PRE_LINE))
        else:
            self.out.append(_SPACE_RUN.sub(" ", data.replace("\r", "").replace("\n", " ")))

    def _last_text_is(self, href: str) -> bool:
        tail = "".join(self.out[-3:]).strip()
        return tail.endswith(href) or tail.endswith(href.removeprefix("mailto:"))


def html_to_text(html: str) -> str:
    parser = _TextExtractor()
    parser.feed(html)
    parser.close()
    lines = [
        line.removeprefix(_PRE_LINE).rstrip() if line.startswith(_PRE_LINE) else line.strip()
        for line in "".join(parser.out).split("\n")
    ]
    return _BLANK_RUN.sub("\n\n", "\n".join(lines)).strip()


# -- quoted replies and signatures ---------------------------------------------------------------
def trim_reply(text: str) -> str:
    """The new part of a mail: stops at the first reply header ("On … wrote:"), an Outlook
    "Original Message" block or a signature delimiter, and drops `>`-quoted lines. A forwarded
    message is kept whole (it is the content). Falls back to the untrimmed text rather than
    return nothing."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    lines = text.split("\n")
    kept: list[str] = []
    for index, line in enumerate(lines):
        if _FORWARD_MARKER.match(line):
            kept.extend(lines[index:])
            break
        window = line if line.strip() else ""
        # A reply header Gmail wrapped onto two lines.
        two_lines = f"{line} {lines[index + 1]}" if index + 1 < len(lines) else line
        if window and (_REPLY_HEADER.match(line) or (line.lstrip().startswith("On ") and _REPLY_HEADER.match(two_lines))):
            break
        if (
            _OUTLOOK_SEPARATOR.match(line)
            and kept
            and (line.lstrip().startswith(("-", "_")) or _looks_like_header_block(lines, index))
        ):
            break
        if line.rstrip() in _SIGNATURE_MARKERS and line.startswith(("--", "__")) and kept:
            break
        if _MOBILE_SIGNATURE.match(line) and kept:
            break
        if line.lstrip().startswith(">"):
            continue
        kept.append(line.rstrip())
    result = _BLANK_RUN.sub("\n\n", "\n".join(kept)).strip()
    return result or text.strip()


def _looks_like_header_block(lines: list[str], index: int) -> bool:
    """Outlook quotes with a From:/Sent:/To:/Subject: block; a line that merely starts with "From:" does not."""
    following = " ".join(lines[index : index + 5]).lower()
    return "sent:" in following or "date:" in following or "subject:" in following

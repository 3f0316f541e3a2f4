"""Gmail messages (format=full) → text: recorded real messages, and the MIME cases mail throws at us."""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from connectors.sources.gmail.mime import decode_body, html_to_text, parse_message, trim_reply

FIXTURES = Path(__file__).parent / "fixtures"


def load(name: str) -> dict[str, Any]:
    return json.loads((FIXTURES / name).read_text())


def b64url(data: bytes, *, padded: bool = False) -> str:
    encoded = base64.urlsafe_b64encode(data).decode()
    return encoded if padded else encoded.rstrip("=")


def message(payload: dict[str, Any], **fields: Any) -> dict[str, Any]:
    return {"id": "m1", "threadId": "t1", "internalDate": "1700000000000", "payload": payload, **fields}


def part(
    mime: str, data: bytes, *, charset: str = "utf-8", filename: str = "", headers: list[dict[str, str]] | None = None
) -> dict[str, Any]:
    return {
        "mimeType": mime,
        "filename": filename,
        "headers": [{"name": "Content-Type", "value": f"{mime}; charset={charset}"}, *(headers or [])],
        "body": {"size": len(data), "data": b64url(data)},
    }


def test_plain_text_message_keeps_its_text_subject_sender_and_date() -> None:
    parsed = parse_message(load("messages.get.full.text_plain.gmail-api-parse-message.json"))
    assert parsed.text == "The actual message text goes here"
    assert parsed.thread_id == "151e0bf2c42e466a"
    assert parsed.date == datetime(2015, 12, 26, 19, 3, 23, tzinfo=timezone(timedelta(hours=-5)))
    assert parsed.attachments == ()


def test_multipart_alternative_prefers_text_plain_over_html() -> None:
    parsed = parse_message(load("messages.get.full.multipart_alternative.gmail-api-parse-message.json"))
    assert parsed.text == "wow"
    assert parsed.subject == "cool man"
    assert (parsed.from_name, parsed.from_email) == ("example", "example@gmail.com")


def test_attachments_are_listed_by_name_and_the_nested_text_part_is_found() -> None:
    parsed = parse_message(load("messages.get.full.multipart_mixed_attachments.gmail-api-parse-message.json"))
    assert parsed.text == "cool *stuff*"
    assert parsed.attachments == ("a3Ln90e_460s.jpg", "feelthebern.jpg")
    assert parsed.subject == "This is my jam"


def test_base64url_without_padding_and_with_url_safe_characters_decodes() -> None:
    raw = "ÿþ?> naïve — ok".encode()
    assert decode_body(b64url(raw)) == raw
    assert decode_body(b64url(raw, padded=True)) == raw
    assert "-" in b64url(b"\xfb\xff") or "_" in b64url(b"\xfb\xff")


def test_declared_charsets_are_decoded() -> None:
    latin = parse_message(message(part("text/plain", "Grüße aus Köln".encode("iso-8859-1"), charset="iso-8859-1")))
    assert latin.text == "Grüße aus Köln"
    japanese = parse_message(message(part("text/plain", "会議は月曜日です".encode("iso-2022-jp"), charset='"ISO-2022-JP"')))
    assert japanese.text == "会議は月曜日です"


def test_unknown_charset_falls_back_to_utf8() -> None:
    parsed = parse_message(message(part("text/plain", "café".encode(), charset="x-no-such-charset")))
    assert parsed.text == "café"


def test_html_only_mail_becomes_readable_text_without_markup_styles_or_quoted_history() -> None:
    html = (
        "<html><head><style>p{color:red}</style></head><body>"
        "<div dir='ltr'><p>We moved the <b>launch</b> to&nbsp;Friday.</p>"
        "<ul><li>QA signs off Thursday</li><li>Docs ready</li></ul>"
        "<p>See <a href='https://wiki.example.test/launch'>the plan</a>.<br>Thanks</p></div>"
        "<div class='gmail_quote'>On Mon, Ada wrote:<blockquote>old text</blockquote></div>"
        "</body></html>"
    )
    parsed = parse_message(message({"mimeType": "text/html", "headers": [], "body": {"data": b64url(html.encode())}}))
    assert parsed.text == (
        "We moved the launch to Friday.\n\n- QA signs off Thursday\n\n- Docs ready\n\n"
        "See the plan (https://wiki.example.test/launch).\nThanks"
    )


def test_quoted_reply_and_signature_are_trimmed() -> None:
    text = (
        "Yes, Thursday works for the review.\n\nBest,\nMo\n-- \nMo Ahmed | Acme Robotics\n+1 555 0100\n\n"
        "On Mon, 3 Jun 2024 at 10:02, Ada <ada@acme.test> wrote:\n> Can we move the review?\n"
    )
    assert trim_reply(text) == "Yes, Thursday works for the review.\n\nBest,\nMo"


def test_reply_header_wrapped_onto_two_lines_is_recognised() -> None:
    text = "Agreed.\n\nOn Tue, 4 Jun 2024 at 09:00, Ada Lovelace\n<ada@acme.test> wrote:\n> earlier"
    assert trim_reply(text) == "Agreed."


def test_outlook_original_message_block_is_trimmed() -> None:
    text = "Approved.\n\n-----Original Message-----\nFrom: Ada\nSent: Monday\nSubject: budget\n\nplease approve"
    assert trim_reply(text) == "Approved."


def test_inline_quotes_between_answers_are_dropped_but_answers_kept() -> None:
    text = "> Which date?\nThe 12th.\n> Which room?\nRoom 4."
    assert trim_reply(text) == "The 12th.\nRoom 4."


def test_a_forwarded_message_is_content_and_stays() -> None:
    text = "FYI\n\n---------- Forwarded message ---------\nFrom: Vendor <v@x.test>\n\nPrice rises 5% in May."
    assert "Price rises 5% in May." in trim_reply(text)


def test_a_mail_that_is_only_a_quote_keeps_its_text_rather_than_nothing() -> None:
    assert trim_reply("> only quoted") == "> only quoted"


def test_attachment_with_content_disposition_but_no_filename_is_listed_not_read() -> None:
    payload = {
        "mimeType": "multipart/mixed",
        "headers": [],
        "parts": [
            part("text/plain", b"see attached"),
            part("text/plain", b"secret csv body", headers=[{"name": "Content-Disposition", "value": "attachment"}]),
        ],
    }
    parsed = parse_message(message(payload))
    assert parsed.text == "see attached"
    assert parsed.attachments == ("(unnamed attachment)",)


def test_encoded_word_subject_and_sender_are_decoded() -> None:
    headers = [
        {"name": "Subject", "value": "=?utf-8?q?R=C3=A9union_budg=C3=A9taire?="},
        {"name": "From", "value": "=?utf-8?b?w4lsb2RpZQ==?= <elodie@example.test>"},
    ]
    parsed = parse_message(message({"mimeType": "text/plain", "headers": headers, "body": {"data": b64url(b"ok")}}))
    assert parsed.subject == "Réunion budgétaire"
    assert (parsed.from_name, parsed.from_email) == ("Élodie", "elodie@example.test")


def test_missing_date_header_falls_back_to_internal_date() -> None:
    parsed = parse_message(message({"mimeType": "text/plain", "headers": [], "body": {"data": b64url(b"x")}}))
    assert parsed.date == datetime.fromtimestamp(1_700_000_000, tz=UTC)


def test_html_to_text_keeps_table_cells_and_preformatted_text() -> None:
    html = "<table><tr><td>Q1</td><td>12</td></tr></table><pre>  a  b\n c</pre>"
    assert html_to_text(html) == "Q1 | 12\n\n  a  b\n c"


def test_a_sender_named_last_comma_first_in_an_encoded_word_keeps_their_address() -> None:
    # Outlook and Exchange send "Last, First" display names as encoded words, the comma as =2C.
    for sender in (
        "=?utf-8?Q?M=C3=BCller=2C_J=C3=BCrgen?= <jm@example.de>",
        "=?iso-8859-1?Q?M=FCller=2C_J=FCrgen?= <jm@example.de>",
    ):
        headers = [{"name": "From", "value": sender}]
        parsed = parse_message(message({"mimeType": "text/plain", "headers": headers, "body": {"data": b64url(b"ok")}}))
        assert (parsed.from_name, parsed.from_email) == ("Müller, Jürgen", "jm@example.de")


def test_latin1_labelled_mail_written_in_windows_1252_keeps_its_curly_quotes_and_euro_sign() -> None:
    # Outlook labels Windows-1252 text "iso-8859-1"; mail readers (and the WHATWG Encoding Standard) read it as 1252.
    text = "\u201cApproved\u201d \u2013 it\u2019s \u20ac5 per seat"
    labelled = parse_message(message(part("text/plain", text.encode("cp1252"), charset="iso-8859-1")))
    assert labelled.text == text
    unlabelled = parse_message(
        message({"mimeType": "text/html", "headers": [], "body": {"data": b64url(f"<p>{text}</p>".encode("cp1252"))}})
    )
    assert unlabelled.text == text

"""Notion blocks → Markdown-like text, on recorded block objects and every block type we render."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from connectors.sources.notion.blocks import page_text, page_title, properties_text, render_blocks

FIXTURES = Path(__file__).parent / "fixtures"


def load(name: str) -> Any:
    return json.loads((FIXTURES / name).read_text())


def rich(text: str, href: str | None = None) -> list[dict[str, Any]]:
    return [
        {"type": "text", "text": {"content": text, "link": {"url": href} if href else None}, "plain_text": text, "href": href}
    ]


def block(kind: str, text: str = "", *, block_id: str = "b", children: bool = False, **body: Any) -> dict[str, Any]:
    content: dict[str, Any] = {"rich_text": rich(text)} if text else {"rich_text": []}
    content.update(body)
    return {"object": "block", "id": block_id, "type": kind, "has_children": children, kind: content}


def no_children(_block: dict[str, Any]) -> list[dict[str, Any]]:
    raise AssertionError("a block without children was asked for them")


def test_recorded_heading_and_checked_todo_in_the_legacy_text_key() -> None:
    blocks = load("blocks.children.list.heading_1_to_do.legacy_text_key.jomei-notionapi.json")["results"]
    assert render_blocks(blocks, no_children) == "# Heading1\n\n- [x] todo"


def test_recorded_block_array_renders_callout_heading_child_database_and_columns() -> None:
    blocks = load("block_objects_array.rich_text.jomei-notionapi.json")
    column_text = block("paragraph", "Office hours: Tuesday")
    columns = {"column_list": [{"id": "col", "type": "column", "has_children": True, "column": {}}], "col": [column_text]}

    def children_of(parent: dict[str, Any]) -> list[dict[str, Any]]:
        return columns["col" if parent["type"] == "column" else "column_list"]

    text = render_blocks(blocks, children_of)
    assert text.startswith("> ") and "This page is designed to be shared with students on the web." in text
    assert "# History 340" in text
    assert "[Required Texts (database)](https://www.notion.so/" in text
    assert "Office hours: Tuesday" in text
    assert "### Assignment Submission" in text
    assert text.endswith("No electronic copies will be accepted!")


def test_lists_todos_and_nested_children_indent() -> None:
    parent = block("bulleted_list_item", "Launch", block_id="p", children=True)
    nested = [block("to_do", "QA sign-off", checked=True), block("to_do", "Docs", checked=False)]
    blocks = [parent, block("numbered_list_item", "first"), block("numbered_list_item", "second")]
    assert render_blocks(blocks, lambda b: nested) == "- Launch\n  - [x] QA sign-off\n  - [ ] Docs\n1. first\n2. second"


def test_toggles_are_opened_and_quotes_code_and_callouts_kept() -> None:
    toggle = block("toggle", "Details", block_id="t", children=True)
    blocks = [
        toggle,
        block("quote", "Ship small."),
        block("code", "make test", language="shell"),
        block("callout", "Read first", icon={"type": "emoji", "emoji": "💡"}),
        block("divider"),
        block("paragraph"),
    ]
    text = render_blocks(blocks, lambda b: [block("paragraph", "hidden until opened")])
    assert text == "▸ Details\n  hidden until opened\n\n> Ship small.\n\n```shell\nmake test\n```\n\n> 💡 Read first"


def test_tables_render_as_rows_with_a_header_rule() -> None:
    table = block("table", block_id="tbl", children=True, table_width=2, has_column_header=True, has_row_header=False)
    rows = [
        {"type": "table_row", "table_row": {"cells": [rich("Owner"), rich("Due")]}},
        {"type": "table_row", "table_row": {"cells": [rich("Ada"), rich("May | June")]}},
    ]
    assert render_blocks([table], lambda b: rows) == "| Owner | Due |\n| --- | --- |\n| Ada | May \\| June |"


def test_child_pages_become_links_and_rich_text_links_are_kept() -> None:
    child = {"id": "1234-abcd", "type": "child_page", "has_children": True, "child_page": {"title": "Runbook"}}
    linked = {
        "object": "block",
        "type": "paragraph",
        "has_children": False,
        "paragraph": {"rich_text": rich("spec", "https://x.test/spec")},
    }
    assert (
        render_blocks([child, linked], no_children) == "[Runbook](https://www.notion.so/1234abcd)\n\n[spec](https://x.test/spec)"
    )


def test_recorded_database_row_keeps_properties_as_lines_above_the_body() -> None:
    row = load("databases.query.response.legacy.jomei-notionapi.json")["results"][0]
    assert page_title(row) == "ba"
    assert properties_text(row) == "Tags: a\nColumn 1: a, v, b\nsome_prop: a"
    assert page_text(row, [block("paragraph", "Row body")], no_children) == "Tags: a\nColumn 1: a, v, b\nsome_prop: a\n\nRow body"


def test_every_common_property_type_reads_as_text() -> None:
    page = {
        "parent": {"type": "data_source_id", "data_source_id": "ds"},
        "properties": {
            "Name": {"type": "title", "title": rich("Renewal")},
            "Status": {"type": "status", "status": {"name": "In progress"}},
            "Amount": {"type": "number", "number": 1200},
            "Signed": {"type": "checkbox", "checkbox": False},
            "Due": {"type": "date", "date": {"start": "2026-01-05", "end": None}},
            "Owner": {"type": "people", "people": [{"object": "user", "id": "u1", "name": "Ada"}]},
            "Empty": {"type": "rich_text", "rich_text": []},
            "Score": {"type": "formula", "formula": {"type": "number", "number": 7}},
            "Ticket": {"type": "unique_id", "unique_id": {"prefix": "OPS", "number": 42}},
        },
    }
    assert properties_text(page) == (
        "Status: In progress\nAmount: 1200\nSigned: no\nDue: 2026-01-05\nOwner: Ada\nScore: 7\nTicket: OPS-42"
    )


def test_a_page_outside_a_database_has_no_property_lines() -> None:
    page = {"parent": {"type": "workspace", "workspace": True}, "properties": {"title": {"type": "title", "title": rich("Home")}}}
    assert page_text(page, [block("paragraph", "Welcome")], no_children) == "Welcome"


def test_data_source_titles_from_the_recorded_search_response() -> None:
    results = load("search.response.notion-sdk-py.json")["results"]
    assert page_title(results[0]) == "Daba Source B (1)"


def test_a_block_type_newer_than_this_code_keeps_its_text_and_what_it_contains() -> None:
    notes = {"object": "block", "id": "n", "type": "meeting_notes", "has_children": True, "meeting_notes": {}}
    tab = block("tab", "Rollout", block_id="t", children=True)
    children = {
        "n": [block("paragraph", "Decision: ship on Friday.", block_id="n1")],
        "t": [block("bulleted_list_item", "Canary first", block_id="t1")],
    }
    text = render_blocks([notes, tab], lambda parent: children[parent["id"]])
    assert text == "Decision: ship on Friday.\n\nRollout\n  - Canary first"

"""Notion pages → Markdown-like text. Pure functions over the API's JSON objects, no I/O.

`render_blocks(blocks, children_of)` flattens a block tree: headings, paragraphs, lists, to-dos
with their state, code, quotes, callouts, toggles (opened: their children follow), tables,
columns, and child pages/databases as links. Children are fetched by the caller-supplied
`children_of(block)` so the fetching (pagination, depth cap, rate limit) stays in the source.
`properties_text(page)` gives a database row's properties as `name: value` lines.
Both the current `rich_text` key and the pre-2022 `text` key are read.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

Block = dict[str, Any]
ChildrenOf = Callable[[Block], list[Block]]

_HEADINGS = {"heading_1": "# ", "heading_2": "## ", "heading_3": "### ", "heading_4": "#### "}
_LIST_TYPES = {"bulleted_list_item", "numbered_list_item", "to_do"}


def plain_text(rich_text: Iterable[dict[str, Any]] | None) -> str:
    """The text of a rich-text array; links keep their address as Markdown links."""
    parts: list[str] = []
    for span in rich_text or []:
        text = span.get("plain_text")
        if text is None:
            text = (span.get("text") or {}).get("content", "")
        href = span.get("href") or ((span.get("text") or {}).get("link") or {}).get("url")
        parts.append(f"[{text}]({href})" if href and text and text != href else str(text))
    return "".join(parts)


def _rich(block: Block) -> str:
    body = block.get(block.get("type", ""), {}) or {}
    return plain_text(body.get("rich_text", body.get("text")))


def page_url(page_id: str) -> str:
    return f"https://www.notion.so/{page_id.replace('-', '')}"


def render_blocks(blocks: list[Block], children_of: ChildrenOf, *, depth: int = 0) -> str:
    """Text of sibling blocks; `depth` indents nested list items and children under them."""
    lines: list[str] = []
    number = 0
    previous_type = ""
    for block in blocks:
        kind = str(block.get("type", ""))
        number = number + 1 if kind == "numbered_list_item" else 0
        text = render_block(block, children_of, depth=depth, number=number)
        if text is None:
            continue
        # Consecutive list items stay together; any other block is its own paragraph.
        if lines and not (kind in _LIST_TYPES and previous_type in _LIST_TYPES):
            lines.append("")
        lines.append(text)
        previous_type = kind
    return "\n".join(lines)


def render_block(block: Block, children_of: ChildrenOf, *, depth: int = 0, number: int = 1) -> str | None:
    """One block and what it contains; None for blocks with nothing to say (dividers, empty
    paragraphs, unsupported embeds)."""
    kind = str(block.get("type", ""))
    body = block.get(kind, {}) or {}
    indent = "  " * depth
    text = _rich(block)

    def children(extra_depth: int = 1) -> str:
        if not block.get("has_children"):
            return ""
        return render_blocks(children_of(block), children_of, depth=depth + extra_depth)

    if kind in _HEADINGS:
        head = f"{_HEADINGS[kind]}{text}" if text else ""
        # A toggleable heading hides children; like toggles they are shown opened.
        nested = children(0)
        return "\n\n".join(part for part in (head, nested) if part) or None
    if kind == "paragraph":
        nested = children()
        return "\n".join(part for part in (f"{indent}{text}" if text else "", nested) if part) or None
    if kind in _LIST_TYPES:
        if kind == "to_do":
            marker = "- [x] " if body.get("checked") else "- [ ] "
        elif kind == "numbered_list_item":
            marker = f"{number}. "
        else:
            marker = "- "
        nested = children()
        return "\n".join(part for part in (f"{indent}{marker}{text}", nested) if part)
    if kind == "toggle":
        nested = children()
        return "\n".join(part for part in (f"{indent}▸ {text}", nested) if part)
    if kind == "quote":
        quoted = "\n".join(f"> {line}" if line else ">" for line in "\n".join(p for p in (text, children(0)) if p).split("\n"))
        return quoted if text or block.get("has_children") else None
    if kind == "callout":
        icon = body.get("icon") or {}
        emoji = icon.get("emoji", "") if icon.get("type") == "emoji" else ""
        content = "\n".join(p for p in (text, children(0)) if p)
        if not content:
            return None
        lead = f"{emoji} " if emoji else ""
        return "\n".join(f"> {lead if i == 0 else ''}{line}" for i, line in enumerate(content.split("\n")))
    if kind == "code":
        language = body.get("language", "") or ""
        language = "" if language == "plain text" else language
        return f"```{language}\n{text}\n```"
    if kind == "equation":
        expression = body.get("expression", "")
        return f"$$ {expression} $$" if expression else None
    if kind == "table":
        return _table(block, children_of)
    if kind in {"column_list", "column", "synced_block"}:
        # Layout containers: their content is what counts, in reading order.
        return render_blocks(children_of(block), children_of, depth=depth) if block.get("has_children") else None
    if kind == "child_page":
        title = body.get("title", "") or "Untitled"
        return f"[{title}]({page_url(str(block.get('id', '')))})"
    if kind == "child_database":
        title = body.get("title", "") or "Untitled database"
        return f"[{title} (database)]({page_url(str(block.get('id', '')))})"
    if kind == "link_to_page":
        target = body.get(body.get("type", ""), "")
        return f"[linked page]({page_url(str(target))})" if target else None
    if kind in {"bookmark", "embed", "link_preview"}:
        url = body.get("url", "")
        caption = plain_text(body.get("caption"))
        return f"[{caption or url}]({url})" if url else None
    if kind in {"image", "file", "pdf", "video", "audio"}:
        caption = plain_text(body.get("caption"))
        name = body.get("name") or caption or kind
        return f"({kind}: {name})"
    if kind == "divider":
        return None
    # A block type added after this code was written: keep its text and what it contains (under
    # the text like a toggle's, or in place when the block only holds others like a column).
    return "\n".join(part for part in (f"{indent}{text}" if text else "", children(1 if text else 0)) if part) or None


def _table(block: Block, children_of: ChildrenOf) -> str | None:
    body = block.get("table", {}) or {}
    rows = [row for row in children_of(block) if row.get("type") == "table_row"] if block.get("has_children") else []
    if not rows:
        return None
    lines = []
    for index, row in enumerate(rows):
        cells = [
            plain_text(cell).replace("|", "\\|").replace("\n", " ") for cell in (row.get("table_row") or {}).get("cells", [])
        ]
        lines.append("| " + " | ".join(cells) + " |")
        if index == 0 and body.get("has_column_header"):
            lines.append("|" + "|".join(" --- " for _ in cells) + "|")
    return "\n".join(lines)


# -- pages and database rows ---------------------------------------------------------------------
def page_title(page: dict[str, Any]) -> str:
    """The title property of a page (or the title of a database / data source)."""
    if isinstance(page.get("title"), list):
        return plain_text(page["title"]).strip()
    for prop in (page.get("properties") or {}).values():
        if prop.get("type") == "title":
            return plain_text(prop.get("title")).strip()
    return ""


def is_database_row(page: dict[str, Any]) -> bool:
    return (page.get("parent") or {}).get("type") in {"database_id", "data_source_id"}


def property_value(prop: dict[str, Any]) -> str:
    """One property's value as text; empty for an empty value."""
    kind = prop.get("type", "")
    value = prop.get(kind)
    if value is None:
        return ""
    if kind in {"title", "rich_text"}:
        return plain_text(value).strip()
    if kind in {"select", "status"}:
        return str(value.get("name", "")) if isinstance(value, dict) else ""
    if kind == "multi_select":
        return ", ".join(str(option.get("name", "")) for option in value)
    if kind in {"number", "url", "email", "phone_number"}:
        return str(value)
    if kind == "checkbox":
        return "yes" if value else "no"
    if kind == "date":
        start, end = value.get("start") or "", value.get("end") or ""
        return f"{start} → {end}" if end else str(start)
    if kind == "people":
        return ", ".join(str(person.get("name") or person.get("id", "")) for person in value)
    if kind == "relation":
        return ", ".join(page_url(str(item.get("id", ""))) for item in value)
    if kind == "files":
        return ", ".join(str(item.get("name", "")) for item in value)
    if kind in {"created_time", "last_edited_time"}:
        return str(value)
    if kind in {"created_by", "last_edited_by"}:
        return str(value.get("name") or value.get("id", ""))
    if kind == "formula":
        inner = value.get(value.get("type", ""), "")
        return "" if inner is None else str(inner.get("start", "") if isinstance(inner, dict) else inner)
    if kind == "rollup":
        rollup_kind = value.get("type", "")
        inner = value.get(rollup_kind)
        if rollup_kind == "array":
            return ", ".join(filter(None, (property_value(item) for item in inner or [])))
        return "" if inner is None else str(inner.get("start", "") if isinstance(inner, dict) else inner)
    if kind == "unique_id":
        prefix = value.get("prefix") or ""
        return f"{prefix}-{value.get('number')}" if prefix else str(value.get("number", ""))
    if kind == "verification":
        return str(value.get("state", ""))
    return ""


def properties_text(page: dict[str, Any]) -> str:
    """A database row's properties other than its title as `name: value` lines (empty ones left
    out), in the order the API lists them."""
    lines = []
    for name, prop in (page.get("properties") or {}).items():
        if prop.get("type") == "title":
            continue
        value = property_value(prop)
        if value:
            lines.append(f"{name}: {value}")
    return "\n".join(lines)


def page_text(page: dict[str, Any], blocks: list[Block], children_of: ChildrenOf) -> str:
    """The memory content of a page: a database row's properties first, then its body."""
    body = render_blocks(blocks, children_of)
    head = properties_text(page) if is_database_row(page) else ""
    return "\n\n".join(part for part in (head, body) if part).strip()

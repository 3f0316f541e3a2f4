"""Slack's message markup (``<@U123>``, ``<https://x|label>``, ``&amp;``) turned into plain text a
reader and the search index understand."""

from __future__ import annotations

import html
import re
from collections.abc import Callable, Mapping
from typing import Any

_ANGLE = re.compile(r"<([^<>]+)>")


def to_plain_text(text: str, *, user_name: Callable[[str], str], channel_name: Callable[[str], str] = str) -> str:
    """``user_name(user_id)`` names a mentioned member (Slack sends only the id); ``channel_name(channel_id)``
    a channel mentioned without its name (``<#C123>``, or ``<#C123|>`` as Slack now writes them)."""

    def replace(match: re.Match[str]) -> str:
        inner = match.group(1)
        target, _, label = inner.partition("|")
        if target.startswith("@"):  # <@U123> or <@U123|name>
            return "@" + (label or user_name(target[1:]))
        if target.startswith("#"):  # <#C123|general>
            return "#" + (label or channel_name(target[1:]))
        if target.startswith("!"):  # <!here>, <!channel>, <!subteam^S1|@team>, <!date^...|fallback>
            if label:
                return label
            return "@" + target[1:].split("^", 1)[0]
        address = target.removeprefix("mailto:")
        if label and label != address:  # <https://example.com|the docs>
            return f"{label} ({target})"
        return address

    # Slack escapes only &, < and > in text; unescape after the markup is read.
    return html.unescape(_ANGLE.sub(replace, text or ""))


def rich_text_markup(blocks: Any) -> str:
    """The ``rich_text`` blocks of a message as Slack markup (what ``text`` holds when Slack fills it in):
    sections as lines, list items as ``- `` lines, quotes as ``> `` lines; other blocks are left out."""
    lines: list[str] = []
    for block in blocks if isinstance(blocks, list) else []:
        if not isinstance(block, Mapping) or block.get("type") != "rich_text":
            continue
        for element in block.get("elements") or []:
            kind = element.get("type") if isinstance(element, Mapping) else None
            if kind == "rich_text_list":
                marker = "1." if element.get("style") == "ordered" else "-"
                items = [item for item in element.get("elements") or [] if isinstance(item, Mapping)]
                lines += [f"{marker} {_inline(item.get('elements'))}" for item in items]
            elif kind == "rich_text_quote":
                lines += [f"> {line}" for line in _inline(element.get("elements")).splitlines()]
            elif kind in {"rich_text_section", "rich_text_preformatted"}:
                lines += _inline(element.get("elements")).splitlines()
    return "\n".join(line.rstrip() for line in lines).strip()


def _inline(elements: Any) -> str:
    parts: list[str] = []
    for element in elements if isinstance(elements, list) else []:
        if not isinstance(element, Mapping):
            continue
        kind = element.get("type")
        if kind == "text":
            parts.append(html.escape(str(element.get("text") or ""), quote=False))
        elif kind == "link":
            url, label = str(element.get("url") or ""), str(element.get("text") or "")
            parts.append(f"<{url}|{html.escape(label, quote=False)}>" if label else f"<{url}>")
        elif kind == "user":
            parts.append(f"<@{element.get('user_id')}>")
        elif kind == "channel":
            parts.append(f"<#{element.get('channel_id')}>")
        elif kind == "usergroup":
            parts.append(f"<!subteam^{element.get('usergroup_id')}>")
        elif kind == "broadcast":
            parts.append(f"<!{element.get('range')}>")
        elif kind == "emoji":
            parts.append(f":{element.get('name')}:")
        elif kind == "date":
            parts.append(html.escape(str(element.get("fallback") or element.get("timestamp") or ""), quote=False))
    return "".join(parts)

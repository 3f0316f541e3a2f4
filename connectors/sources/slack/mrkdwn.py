"""Slack's message markup (``<@U123>``, ``<https://x|label>``, ``&amp;``) turned into plain text a
reader and the search index understand."""

from __future__ import annotations

import html
import re
from collections.abc import Callable

_ANGLE = re.compile(r"<([^<>]+)>")


def to_plain_text(text: str, *, user_name: Callable[[str], str]) -> str:
    """``user_name(user_id)`` names a mentioned member (Slack sends only the id)."""

    def replace(match: re.Match[str]) -> str:
        inner = match.group(1)
        target, _, label = inner.partition("|")
        if target.startswith("@"):  # <@U123> or <@U123|name>
            return "@" + (label or user_name(target[1:]))
        if target.startswith("#"):  # <#C123|general>
            return "#" + (label or target[1:])
        if target.startswith("!"):  # <!here>, <!channel>, <!subteam^S1|@team>, <!date^...|fallback>
            if label:
                return label
            return "@" + target[1:].split("^", 1)[0]
        if label:  # <https://example.com|the docs>
            return f"{label} ({target})" if label != target else target
        return target.removeprefix("mailto:")

    # Slack escapes only &, < and > in text; unescape after the markup is read.
    return html.unescape(_ANGLE.sub(replace, text or ""))

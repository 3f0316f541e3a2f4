"""Fitting recall results into an agent's context: a token budget filled in tiers.

Used by MCP `recall` and REST recall (and so by the coding-agent hooks) with the same rule:
full content for the best results while it fits, then snippets, then ids only — the text
never exceeds the budget, estimated at four characters a token.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

CHARS_PER_TOKEN = 4  # the usual estimate for English text; packing stays under the budget by it
MIN_MAX_TOKENS = 100


def estimate_tokens(text: str) -> int:
    return math.ceil(len(text) / CHARS_PER_TOKEN)


def _hit_lines(rank: int, hit: Any, body: str, cite: Callable[[Any], str]) -> list[str]:
    return [
        "",
        f"[{rank}] {hit.memory.title} ({hit.confidence.value} match {hit.match:.2f}; "
        f"score {hit.score:.3f}: relevance {hit.relevance:.3f}, recency {hit.recency:.3f})",
        *[f"    {line}" for line in body.splitlines() or [""]],
        *(
            [f"    (Found through an earlier version it replaced: {hit.earlier_version.title})"]
            if hit.earlier_version is not None
            else []
        ),
        f"    Cite: {cite(hit.memory)}",
    ]


def pack(
    header: str, hits: list[Any], max_tokens: int | None, *, cite: Callable[[Any], str]
) -> tuple[list[str], dict[str, str], list[str]]:
    """The answer's lines, each shown hit's tier ("full" or "preview"), and the dropped ids.

    Without a budget every hit is a preview. With one, tiers go down in rank order and never
    back up: full content while it fits, then snippets, then ids only — and room for the list
    of dropped ids is kept at every step, so the whole text stays within `max_tokens`.
    """
    lines: list[str] = [header]
    tiers: dict[str, str] = {}
    dropped: list[str] = []
    if max_tokens is None:
        for rank, hit in enumerate(hits, start=1):
            lines += _hit_lines(rank, hit, hit.snippet, cite)
            tiers[str(hit.memory.pk)] = "preview"
        return lines, tiers, dropped
    budget = max_tokens * CHARS_PER_TOKEN
    used = len(header)
    tier = "full"
    for index, hit in enumerate(hits):
        # What listing every later hit as dropped would cost: an id and a separator each, plus the label.
        reserve = (len(hits) - index - 1) * 38 + 60
        if tier == "full":
            block = "\n".join(_hit_lines(index + 1, hit, hit.memory.content, cite))
            if used + 1 + len(block) + reserve > budget:
                tier = "preview"
        if tier == "preview":
            block = "\n".join(_hit_lines(index + 1, hit, hit.snippet, cite))
            if used + 1 + len(block) + reserve > budget:
                tier = "dropped"
        if tier == "dropped":
            dropped.append(str(hit.memory.pk))
            continue
        lines += block.split("\n")
        used += 1 + len(block)
        tiers[str(hit.memory.pk)] = tier
    if dropped:
        lines += ["", f"Did not fit (read them by id): {', '.join(dropped)}"]
    return lines, tiers, dropped

"""Paragraph-aware chunking with exact character spans.

Content of at most SINGLE_CHUNK_MAX characters is one chunk. Longer content is packed
from paragraphs into chunks of about TARGET characters; a paragraph longer than that is
split at sentence ends, and a sentence longer than that at spaces. Consecutive chunks
overlap by about OVERLAP characters (whole sentences or words where possible), so a fact
that straddles a boundary is still whole in one chunk. Every chunk's text is exactly
`content[start:end]`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

SINGLE_CHUNK_MAX = 1400
TARGET = 1200
OVERLAP = 150

_PARAGRAPH_BREAK = re.compile(r"\n[ \t]*\n\s*")
_SENTENCE_END = re.compile(r"(?<=[.!?:;])\s+|\n")
_SPACE = re.compile(r"\s+")


@dataclass(frozen=True)
class Chunk:
    index: int
    start: int
    end: int
    text: str


def _trimmed(content: str, start: int, end: int) -> tuple[int, int]:
    while start < end and content[start].isspace():
        start += 1
    while end > start and content[end - 1].isspace():
        end -= 1
    return start, end


def _split(content: str, start: int, end: int, pattern: re.Pattern[str]) -> list[tuple[int, int]]:
    pieces = []
    cursor = start
    for match in pattern.finditer(content, start, end):
        if match.start() > cursor:
            pieces.append((cursor, match.start()))
        cursor = match.end()
    if cursor < end:
        pieces.append((cursor, end))
    return [span for span in (_trimmed(content, s, e) for s, e in pieces) if span[1] > span[0]]


def _hard_windows(start: int, end: int, size: int) -> list[tuple[int, int]]:
    return [(s, min(s + size, end)) for s in range(start, end, size)]


def _units(content: str) -> list[tuple[int, int]]:
    """Spans no longer than TARGET: paragraphs, else sentences, else word runs, else hard cuts."""
    units: list[tuple[int, int]] = []
    for p_start, p_end in _split(content, 0, len(content), _PARAGRAPH_BREAK):
        if p_end - p_start <= TARGET:
            units.append((p_start, p_end))
            continue
        for s_start, s_end in _split(content, p_start, p_end, _SENTENCE_END):
            if s_end - s_start <= TARGET:
                units.append((s_start, s_end))
                continue
            words = _split(content, s_start, s_end, _SPACE)
            run_start, run_end = words[0]
            for w_start, w_end in words[1:]:
                if w_end - run_start > TARGET:
                    units.extend(_hard_windows(run_start, run_end, TARGET))
                    run_start = w_start
                run_end = w_end
            units.extend(_hard_windows(run_start, run_end, TARGET))
    return units


def chunk_text(content: str) -> list[Chunk]:
    """Split content into chunks; an empty or blank content gives no chunks."""
    start, end = _trimmed(content, 0, len(content))
    if start == end:
        return []
    if end - start <= SINGLE_CHUNK_MAX:
        return [Chunk(0, start, end, content[start:end])]

    units = _units(content)
    chunks: list[Chunk] = []
    first = 0  # the unit the current chunk starts in
    must_reach = 0  # the chunk must end at or after this unit, so every chunk makes progress
    start = units[0][0]
    while True:
        last = max(first, must_reach)
        while last + 1 < len(units) and units[last + 1][1] - start <= TARGET:
            last += 1
        end = units[last][1]
        chunks.append(Chunk(len(chunks), start, end, content[start:end]))
        if last + 1 >= len(units):
            return chunks
        # Overlap with whole trailing units when they fit in OVERLAP...
        next_first = last + 1
        while next_first - 1 > first and end - units[next_first - 1][0] <= OVERLAP:
            next_first -= 1
        if next_first <= last:
            start = units[next_first][0]
        else:
            # ...else carry over the last words of the final unit.
            start = _word_start_at_or_after(content, max(units[last][0], end - OVERLAP), end)
            next_first = last
            if start >= end:
                start, next_first = units[last + 1][0], last + 1
        first, must_reach = next_first, last + 1


def _word_start_at_or_after(content: str, position: int, limit: int) -> int:
    while position < limit and not (content[position - 1].isspace() and not content[position].isspace()):
        position += 1
    return position

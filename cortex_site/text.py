"""Text as PostgreSQL and JSON can carry it.

JSON may escape what neither can hold: half of a surrogate pair ("\\ud83d", an emoji cut in two),
which is not UTF-8, and a NUL, which text and jsonb columns refuse. What arrives from outside is
cleaned before it is stored (connectors) or echoed back (error answers), never refused for it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from typing import Any

LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def map_strings(value: Any, change: Callable[[str], str]) -> Any:
    """`value` with `change` applied to every string in it: dict keys and values and list items,
    throughout (dicts and lists come back as plain ones)."""
    if isinstance(value, str):
        return change(value)
    if isinstance(value, Mapping):
        return {map_strings(k, change): map_strings(v, change) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [map_strings(v, change) for v in value]
    return value


def encodable(value: Any) -> Any:
    """`value` that JSON can be encoded from as UTF-8: every lone surrogate becomes U+FFFD."""
    return map_strings(value, lambda text: LONE_SURROGATE.sub("\ufffd", text))


def storable(value: Any) -> Any:
    """`value` as PostgreSQL can store it: lone surrogates become U+FFFD and NULs are dropped."""
    return map_strings(value, lambda text: LONE_SURROGATE.sub("\ufffd", text.replace("\x00", "")))


def strings_in(value: Any) -> Iterator[str]:
    """Every string in a decoded JSON value: dict keys and values and list items, throughout."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for key, item in value.items():
            yield from strings_in(key)
            yield from strings_in(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from strings_in(item)

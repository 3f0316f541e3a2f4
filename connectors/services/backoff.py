"""A connector's Retry-After, shared through Redis so every worker of that connector backs off together."""

from __future__ import annotations

import time
from typing import Any

from django.core.cache import cache

_MAX_WAIT = 3600.0  # a source asking for more than an hour is treated as an hour; the run retries then


def _key(connector_id: Any) -> str:
    return f"connectors:backoff:{connector_id}"


def set(connector_id: Any, seconds: float) -> float:  # the contract names it backoff.set(...)
    """Hold every call to this connector's source for `seconds` (never shortening a longer hold)."""
    seconds = max(0.0, min(float(seconds), _MAX_WAIT))
    until = time.time() + seconds
    current = cache.get(_key(connector_id))
    if current is not None and float(current) >= until:
        return float(current)
    cache.set(_key(connector_id), until, timeout=int(seconds) + 1)
    return until


def wait_until(connector_id: Any) -> float | None:
    """The epoch time before which this connector's source must not be called, or None."""
    until = cache.get(_key(connector_id))
    if until is None or float(until) <= time.time():
        return None
    return float(until)


def remaining(connector_id: Any) -> float:
    """Seconds left to wait (0 when the connector may call its source now)."""
    until = wait_until(connector_id)
    return 0.0 if until is None else max(0.0, until - time.time())


def clear(connector_id: Any) -> None:
    cache.delete(_key(connector_id))

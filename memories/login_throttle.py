"""Failed-authentication throttling, per account and per client address, in Redis (the cache).

Checked *before* a failure is processed, so a flood of guesses is answered 429 without
writing one audit row per guess: only failures inside the budget are audited, plus one
`auth.login_throttled` event when a budget is first exhausted in a window.
Fixed windows keep it two Redis round-trips and give an exact Retry-After.
"""

from __future__ import annotations

import hashlib
import time

from django.conf import settings
from django.core.cache import cache


def _window() -> tuple[int, int]:
    length = settings.CORTEX_LOGIN_WINDOW_SECONDS
    now = int(time.time())
    return now // length, length - now % length


def _keys(kind: str, account: str, address: str | None) -> list[tuple[str, int]]:
    index, _ = _window()
    keys = []
    if account:
        digest = hashlib.sha256(account.strip().lower().encode()).hexdigest()[:32]
        keys.append((f"authfail:{kind}:acct:{digest}:{index}", settings.CORTEX_LOGIN_FAILURES_PER_ACCOUNT))
    if address:
        keys.append((f"authfail:{kind}:addr:{address}:{index}", settings.CORTEX_LOGIN_FAILURES_PER_ADDRESS))
    return keys


def retry_after(kind: str, *, account: str = "", address: str | None = None) -> int | None:
    """Seconds to wait when this account or address has used up its failures in the window, else None."""
    keys = _keys(kind, account, address)
    counts = cache.get_many([key for key, _ in keys])
    if any(counts.get(key, 0) >= limit for key, limit in keys):
        return _window()[1]
    return None


def note_failure(kind: str, *, account: str = "", address: str | None = None) -> bool:
    """Count one failure; True when it used up a budget (the caller records that once)."""
    exhausted = False
    ttl = settings.CORTEX_LOGIN_WINDOW_SECONDS + 5
    for key, limit in _keys(kind, account, address):
        cache.add(key, 0, ttl)
        if cache.incr(key) == limit:
            exhausted = True
    return exhausted


def clear_account(kind: str, account: str) -> None:
    """A successful sign-in forgives the account's failures (not the address's)."""
    cache.delete_many([key for key, _ in _keys(kind, account, None)])

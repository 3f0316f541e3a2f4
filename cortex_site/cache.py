"""Django's Redis cache, degrading to "no cache" while Redis is unreachable.

Cortex caches only what it can recompute (recall's term statistics, connector backoff and user
lookups) and keeps rate-limit and sign-in counters there. When Redis is down a read is a miss, a
write is skipped and a counter starts from zero, so requests — writes above all — keep working on
PostgreSQL alone; the price is that rate limits and sign-in throttles are not enforced until Redis
returns (fail open, logged at most once a minute per process). Errors other than an unreachable
server (a bad value, a wrong key) still raise.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any, TypeVar

from django.core.cache.backends.base import DEFAULT_TIMEOUT
from django.core.cache.backends.redis import RedisCache
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

logger = logging.getLogger(__name__)
T = TypeVar("T")
UNREACHABLE = (RedisConnectionError, RedisTimeoutError)
_WARN_EVERY_SECONDS = 60.0


class FailSoftRedisCache(RedisCache):
    _last_warning = 0.0

    def _soft(self, operation: Callable[[], T], fallback: T) -> T:
        try:
            return operation()
        except UNREACHABLE:
            now = time.monotonic()
            if now - FailSoftRedisCache._last_warning > _WARN_EVERY_SECONDS:
                FailSoftRedisCache._last_warning = now
                logger.warning("Redis (cache) is unreachable; serving without the cache until it returns", exc_info=True)
            return fallback

    def add(self, key: Any, value: Any, timeout: Any = DEFAULT_TIMEOUT, version: int | None = None) -> bool:
        return self._soft(lambda: super(FailSoftRedisCache, self).add(key, value, timeout, version), False)

    def get(self, key: Any, default: Any = None, version: int | None = None) -> Any:
        return self._soft(lambda: super(FailSoftRedisCache, self).get(key, default, version), default)

    def set(self, key: Any, value: Any, timeout: Any = DEFAULT_TIMEOUT, version: int | None = None) -> None:
        self._soft(lambda: super(FailSoftRedisCache, self).set(key, value, timeout, version), None)

    def touch(self, key: Any, timeout: Any = DEFAULT_TIMEOUT, version: int | None = None) -> bool:
        return self._soft(lambda: super(FailSoftRedisCache, self).touch(key, timeout, version), False)

    def delete(self, key: Any, version: int | None = None) -> bool:
        return self._soft(lambda: super(FailSoftRedisCache, self).delete(key, version), False)

    def get_many(self, keys: Any, version: int | None = None) -> dict[Any, Any]:
        return self._soft(lambda: super(FailSoftRedisCache, self).get_many(keys, version), {})

    def has_key(self, key: Any, version: int | None = None) -> bool:
        return self._soft(lambda: super(FailSoftRedisCache, self).has_key(key, version), False)

    def incr(self, key: Any, delta: int = 1, version: int | None = None) -> int:
        # A counter that cannot be read counts from zero: the first call of a window.
        return self._soft(lambda: super(FailSoftRedisCache, self).incr(key, delta, version), delta)

    def set_many(self, data: dict[Any, Any], timeout: Any = DEFAULT_TIMEOUT, version: int | None = None) -> list[Any]:
        return self._soft(lambda: super(FailSoftRedisCache, self).set_many(data, timeout, version), [])

    def delete_many(self, keys: Any, version: int | None = None) -> None:
        self._soft(lambda: super(FailSoftRedisCache, self).delete_many(keys, version), None)

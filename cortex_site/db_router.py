"""Read replicas: recall, memory lists and memory pages read from a streaming replica when one is set.

`DATABASE_REPLICA_URL` adds the `replica` database. Nothing else changes unless it is set: every
read and write then stays on the primary, as on one machine.

With a replica, a read goes to it only when all of these hold:

- the request is one of REPLICA_ROUTES (recall, the memory list, a memory's page, with the
  methods listed): reads made by writes, tasks, the CLI and every other page stay on the primary;
- the model is content (memories, chunks, conflicts, entities, ...), not one that decides who may
  read: sessions, people, memberships, scopes, grants and tokens are always read from the primary,
  so a revoked token or grant, a signed-out session or a lowered clearance count at once;
- no transaction is open on the primary (a read inside a transaction belongs to that transaction);
- neither this request nor, within DATABASE_REPLICA_PIN_SECONDS, an earlier one by the same caller
  (session or bearer token) wrote anything: read-your-own-writes;
- the replica answered its last health check (at most every DATABASE_REPLICA_CHECK_SECONDS) and is
  no further behind than DATABASE_REPLICA_MAX_LAG_SECONDS. A replica that is down or lags more is
  skipped until a later check finds it back.

The replica's lag is the replica's own measure: 0 when it has replayed all WAL it received,
otherwise the time since the last transaction it replayed was committed on the primary.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, DatabaseError, connections, router

if TYPE_CHECKING:
    from collections.abc import Callable

    from django.db.backends.base.base import BaseDatabaseWrapper
    from django.db.models import Model
    from django.http import HttpRequest, HttpResponse

logger = logging.getLogger(__name__)

PRIMARY = DEFAULT_DB_ALIAS
REPLICA = "replica"

# url name → the methods whose reads may come from the replica (POST /api/recall is a read).
REPLICA_ROUTES: dict[str, frozenset[str]] = {
    "api-recall": frozenset({"GET", "HEAD", "POST"}),
    "api-memories": frozenset({"GET", "HEAD"}),
    "api-memory": frozenset({"GET", "HEAD"}),
    "memory-list": frozenset({"GET", "HEAD"}),
    "memory-detail": frozenset({"GET", "HEAD"}),
}

SAFE_METHODS = frozenset({"GET", "HEAD"})

# Reads that decide access are always fresh: they come from the primary even on replica routes.
PRIMARY_ONLY_READS = frozenset(
    {
        "sessions.session",
        "memories.user",
        "memories.organization",
        "memories.membership",
        "memories.clearancelevel",
        "memories.scope",
        "memories.scopegrant",
        "memories.apitoken",
        "memories.apitoken_scopes",
        "memories.oauthgrant",
        "memories.embeddingsignature",
    }
)
PRIMARY_ONLY_APPS = frozenset({"auth", "oauth2_provider", "contenttypes"})

# Writes that do not pin the caller to the primary: bookkeeping every read does (its audit event,
# a token's last-used stamp), which the reads served by the replica never read back.
UNPINNED_WRITES = frozenset({"audit.auditevent", "audit.auditcheckpoint", "memories.apitoken"})


@dataclass
class RequestRouting:
    """Where this request's reads may go, and whether it wrote (then it reads the primary)."""

    replica_allowed: bool = False
    pinned: bool = False
    wrote: bool = False
    used: set[str] = field(default_factory=set)


_routing: ContextVar[RequestRouting | None] = ContextVar("cortex_db_routing", default=None)


def replica_configured() -> bool:
    return REPLICA in settings.DATABASES


@dataclass
class _Health:
    checked_at: float = float("-inf")
    usable: bool = False
    lag_seconds: float | None = None
    reason: str = "not checked yet"


class ReplicaHealth:
    """The replica's last known state in this process, refreshed at most every CHECK seconds."""

    LAG_SQL = (
        "SELECT CASE WHEN NOT pg_is_in_recovery() OR pg_last_wal_receive_lsn() = pg_last_wal_replay_lsn() THEN 0 "
        "ELSE COALESCE(EXTRACT(EPOCH FROM now() - pg_last_xact_replay_timestamp()), 0) END"
    )

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._state = _Health()

    def reset(self) -> None:
        with self._lock:
            self._state = _Health()

    def snapshot(self) -> _Health:
        return self._state

    def usable(self) -> bool:
        state = self._state
        if time.monotonic() - state.checked_at < settings.DATABASE_REPLICA_CHECK_SECONDS:
            return state.usable
        with self._lock:
            if time.monotonic() - self._state.checked_at >= settings.DATABASE_REPLICA_CHECK_SECONDS:
                self._state = self._check()
            return self._state.usable

    def recheck(self) -> bool:
        """Check now, whenever the last check was (after a request that read the replica failed)."""
        with self._lock:
            self._state = self._check()
            return self._state.usable

    def _check(self) -> _Health:
        now = time.monotonic()
        connection = connections[REPLICA]
        try:
            with connection.cursor() as cursor:
                cursor.execute(self.LAG_SQL)
                row = cursor.fetchone()
        except DatabaseError as exc:
            # Down, restarting or unreachable: drop the broken connection so the next check reconnects.
            with contextlib.suppress(DatabaseError):
                connection.close()
            logger.warning("read replica unavailable, reading from the primary: %s", type(exc).__name__)
            return _Health(checked_at=now, usable=False, reason=f"unavailable ({type(exc).__name__})")
        lag = float(row[0]) if row and row[0] is not None else 0.0
        bound = settings.DATABASE_REPLICA_MAX_LAG_SECONDS
        if lag > bound:
            logger.warning("read replica %.1f s behind (bound %.1f s), reading from the primary", lag, bound)
            return _Health(checked_at=now, usable=False, lag_seconds=lag, reason=f"lagging {lag:.1f} s")
        return _Health(checked_at=now, usable=True, lag_seconds=lag, reason="ok")


health = ReplicaHealth()


def _eligible(label: str) -> bool:
    state = _routing.get()
    if state is None or not state.replica_allowed or state.pinned or state.wrote:
        return False
    if label in PRIMARY_ONLY_READS or label.partition(".")[0] in PRIMARY_ONLY_APPS:
        return False
    if connections[PRIMARY].in_atomic_block:
        return False
    if not health.usable():
        return False
    state.used.add(REPLICA)
    return True


class ReplicaRouter:
    """Django's database router for the rules above (settings.DATABASE_ROUTERS)."""

    def db_for_read(self, model: type[Model], **hints: Any) -> str | None:
        if not replica_configured():
            return None
        return REPLICA if _eligible(model._meta.label_lower) else PRIMARY

    def db_for_write(self, model: type[Model], **hints: Any) -> str:
        state = _routing.get()
        if state is not None and model._meta.label_lower not in UNPINNED_WRITES:
            state.wrote = True
        return PRIMARY

    def allow_relation(self, obj1: Model, obj2: Model, **hints: Any) -> bool:
        # The replica holds the primary's rows: an object read there is the same row.
        return True

    def allow_migrate(self, db: str, app_label: str, model_name: str | None = None, **hints: Any) -> bool:
        return db == PRIMARY


def content_read_connection() -> BaseDatabaseWrapper:
    """The connection for raw-SQL content reads (recall's retrieval queries), chosen by the same rules."""
    from memories.models import MemoryChunk

    return connections[router.db_for_read(MemoryChunk) or PRIMARY]


@contextmanager
def replica_reads() -> Iterator[RequestRouting]:
    """Let the reads inside go to the replica (when the rules above allow): for interfaces outside
    Django's request cycle, such as MCP's read-only tools."""
    state = RequestRouting(replica_allowed=replica_configured())
    token = _routing.set(state)
    try:
        yield state
    finally:
        _routing.reset(token)


def _pin_keys(request: HttpRequest, response: HttpResponse | None = None) -> list[str]:
    """Who the caller is, for read-your-own-writes: their session and/or bearer token (hashed)."""
    callers = []
    authorization = request.headers.get("Authorization", "")
    if authorization:
        callers.append("bearer:" + authorization)
    session = request.COOKIES.get(settings.SESSION_COOKIE_NAME)
    if session:
        callers.append("session:" + session)
    if response is not None and settings.SESSION_COOKIE_NAME in response.cookies:
        # A sign-in or a rotated session: its next request comes with the new key.
        callers.append("session:" + response.cookies[settings.SESSION_COOKIE_NAME].value)
    return ["cortex-db-pin:" + hashlib.sha256(caller.encode()).hexdigest() for caller in callers]


class ReplicaRoutingMiddleware:
    """Sets up RequestRouting for each request; pins a caller who wrote to the primary for a while."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if not replica_configured():
            return self.get_response(request)
        from django.core.cache import cache
        from redis.exceptions import RedisError

        state = RequestRouting()
        keys = _pin_keys(request)
        try:
            state.pinned = bool(keys) and bool(cache.get_many(keys))
        except RedisError:
            # Without the pins we cannot promise read-your-own-writes: read the primary.
            state.pinned = True
        response = self._serve(request, state)
        if response.status_code >= 500 and REPLICA in state.used and request.method in SAFE_METHODS and not health.recheck():
            # The replica went away between its last check and this request's reads: a read-only
            # request can be served again, from the primary (a POST's body is already consumed).
            logger.warning("a request failed on the read replica, which is now down; served again from the primary")
            state = RequestRouting(pinned=True)
            response = self._serve(request, state)
        if state.wrote:
            try:
                cache.set_many(dict.fromkeys(_pin_keys(request, response), 1), timeout=settings.DATABASE_REPLICA_PIN_SECONDS)
            except RedisError:
                logger.warning("could not pin a writer to the primary: the cache is unavailable")
        return response

    def _serve(self, request: HttpRequest, state: RequestRouting) -> HttpResponse:
        token = _routing.set(state)
        try:
            return self.get_response(request)
        finally:
            _routing.reset(token)

    def process_view(self, request: HttpRequest, view_func: Any, view_args: Any, view_kwargs: Any) -> None:
        state = _routing.get()
        match = request.resolver_match
        if state is not None and match is not None and request.method in REPLICA_ROUTES.get(match.url_name or "", ()):
            state.replica_allowed = True

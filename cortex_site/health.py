"""GET /healthz: is every part Cortex needs up? 200 when all are, 503 otherwise, JSON either way."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.db import connection
from django.http import HttpRequest, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET


def _database() -> dict[str, Any]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_setting('server_version')")
        (version,) = cursor.fetchone()
    return {"server_version": version}


def _pgvector() -> dict[str, Any]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
        row = cursor.fetchone()
    if row is None:
        raise RuntimeError("the vector extension is not installed (run migrations)")
    return {"version": row[0]}


def _broker() -> dict[str, Any]:
    import redis

    client = redis.Redis.from_url(settings.REDIS_URL, socket_timeout=2, socket_connect_timeout=2)
    try:
        client.ping()
    finally:
        client.close()
    return {}


def _embedder() -> dict[str, Any]:
    from memories.embeddings.factory import get_embedder

    embedder = get_embedder()
    return {"provider": embedder.name, "model": embedder.model, "dim": embedder.dim}


CHECKS: dict[str, Callable[[], dict[str, Any]]] = {
    "database": _database,
    "pgvector": _pgvector,
    "broker": _broker,
    "embedder": _embedder,
}


@never_cache
@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    results: dict[str, Any] = {}
    healthy = True
    for name, check in CHECKS.items():
        started = time.perf_counter()
        try:
            detail = check()
            results[name] = {"ok": True, **detail}
        except Exception as exc:  # noqa: BLE001 - a health check reports any failure instead of raising
            healthy = False
            results[name] = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
        results[name]["ms"] = round((time.perf_counter() - started) * 1000, 1)
    return JsonResponse({"status": "ok" if healthy else "unavailable", "checks": results}, status=200 if healthy else 503)

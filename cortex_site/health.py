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

    client = redis.Redis.from_url(str(settings.REDIS_URL), socket_timeout=2, socket_connect_timeout=2)
    try:
        client.ping()
    finally:
        client.close()
    return {}


# Providers that run in this process: probing them costs a few milliseconds once the model is
# loaded. Remote providers are not called from a health probe (it would bill every probe).
_LOCAL_EMBEDDERS = {"local", "hash"}


def _embedder() -> dict[str, Any]:
    from memories.embeddings.factory import get_embedder

    embedder = get_embedder()
    detail: dict[str, Any] = {"provider": embedder.name, "model": embedder.model, "dim": embedder.dim}
    if embedder.name in _LOCAL_EMBEDDERS:
        # Building an embedder never loads its model; only an embedding proves the files load.
        vectors = embedder.embed(["health check"])
        if vectors.shape != (1, embedder.dim):
            raise RuntimeError(f"the embedder returned shape {vectors.shape}, expected (1, {embedder.dim})")
        detail["probe"] = "embedded"
    return detail


def _without_secrets(message: str) -> str:
    """The endpoint is anonymous: a driver's error text must never carry a service password."""
    from urllib.parse import unquote, urlsplit

    secrets = {str(settings.DATABASES["default"].get("PASSWORD") or "")}
    for url in (settings.REDIS_URL, settings.CELERY_BROKER_URL):
        password = urlsplit(str(url or "")).password
        if password:
            secrets |= {password, unquote(password)}
    for secret in sorted(secrets - {""}, key=len, reverse=True):
        message = message.replace(secret, "***")
    return message


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
            results[name] = {"ok": False, "error": _without_secrets(f"{type(exc).__name__}: {exc}")}
        results[name]["ms"] = round((time.perf_counter() - started) * 1000, 1)
    return JsonResponse({"status": "ok" if healthy else "unavailable", "checks": results}, status=200 if healthy else 503)

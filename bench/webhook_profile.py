"""Where a GitHub webhook answer's time goes (not a test): each part of it timed in-process.

    .venv/bin/python bench/github_webhooks.py --profile --deliveries 300

The same fresh database, organization and connector as the burst (bench/github_webhooks.py), and
no web server: the parts of an answer are timed one by one against the real PostgreSQL and Redis —
opening a database connection (what every request under ASGI did without a pool) against borrowing
one from a pool, decrypting the connector's credentials, the signature check, JSON parsing,
the Celery publish with and without a result subscription, the whole service call
(`delivery_receive`: lookup, verify, Delivery row, audit event, commit, publish) with each SQL
statement and the commit timed, how long the organization's audit-chain lock is held, and the
view through Django's whole middleware stack (the test client) under cProfile.
"""

from __future__ import annotations

import cProfile
import io
import json
import os
import pstats
import time
import uuid
from collections import defaultdict
from collections.abc import Callable
from typing import Any, cast

from recall import percentiles

PROFILE_QUEUE = "bench-webhook-profile"


def _timed(fn: Callable[[], Any], times: int) -> list[float]:
    """Milliseconds of each of `times` calls."""
    out = []
    for _ in range(times):
        t0 = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t0) * 1000)
    return out


def _statement_kind(sql: str) -> str:
    words = sql.split()
    head = words[0].upper() if words else "?"
    if "pg_advisory_xact_lock" in sql:
        return "advisory lock (audit chain)"
    if "::jsonb" in sql:
        return "audit details as stored (SELECT jsonb)"
    for table in ("connectors_connector", "connectors_delivery", "audit_auditevent", "audit_auditcheckpoint"):
        if table in sql:
            return f"{head} {table}"
    return head


def profile(count: int) -> dict[str, Any]:
    os.environ["ALLOWED_HOSTS"] = "127.0.0.1,localhost,testserver"  # the test client's host
    from github_webhooks import setup

    _org, connector, bodies, stub = setup(count)
    try:
        return _measure(connector, bodies, count)
    finally:
        stub.stop()


def _measure(connector: Any, bodies: list[bytes], count: int) -> dict[str, Any]:
    import psycopg
    import redis
    from django.conf import settings
    from django.db import connection
    from django.test import Client
    from github_webhooks import signed_headers
    from psycopg_pool import ConnectionPool

    from connectors.models import Connector
    from connectors.registry import source_for
    from connectors.services.deliveries import delivery_receive
    from connectors.tasks import process_delivery

    result: dict[str, Any] = {"phase": "webhook_profile", "deliveries": count}
    url = os.environ["DATABASE_URL"]

    # 1. A connection per request (CONN_MAX_AGE=0, or any value under ASGI) against a pool.
    def fresh() -> None:
        with psycopg.connect(url) as conn:
            conn.execute("SELECT 1")

    result["new_connection_ms"] = percentiles(_timed(fresh, 50))
    with ConnectionPool(url, min_size=2, max_size=2, open=True, check=ConnectionPool.check_connection) as pool:
        pool.wait()

        def borrow() -> None:
            with pool.connection() as conn:
                conn.execute("SELECT 1")

        result["pool_borrow_ms"] = percentiles(_timed(borrow, 200))

    # 2. Credentials (Fernet), signature, JSON.
    stored = Connector.objects.get(pk=connector.pk)
    result["decrypt_credentials_ms"] = percentiles(_timed(lambda: stored.credentials, 1000))
    source = source_for(stored)
    headers = signed_headers(bodies[0])
    result["verify_signature_ms"] = percentiles(_timed(lambda: source.verify_delivery(headers=headers, body=bodies[0]), 1000))
    result["json_parse_ms"] = percentiles(_timed(lambda: json.loads(bodies[0]), 1000))
    result["body_bytes"] = len(bodies[0])

    # 3. The Celery publish, on a throwaway queue (deleted afterwards; no worker runs here).
    def publish(ignore: bool) -> Callable[[], Any]:
        return lambda: process_delivery.apply_async(args=(str(uuid.uuid4()),), queue=PROFILE_QUEUE, ignore_result=ignore)

    _timed(publish(True), 20)  # the producer pool's first connection
    result["publish_with_result_subscription_ms"] = percentiles(_timed(publish(False), 300))
    result["publish_without_result_ms"] = percentiles(_timed(publish(True), 300))
    redis.Redis.from_url(settings.CELERY_BROKER_URL).delete(PROFILE_QUEUE)

    # 4. The whole service call, statement by statement, and the audit-chain lock's hold time.
    statements: dict[str, list[float]] = defaultdict(list)
    lock_taken: list[float] = []
    holds: list[float] = []
    commits: list[float] = []

    def wrapper(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            now = time.perf_counter()
            statements[_statement_kind(sql)].append((now - t0) * 1000)
            if "pg_advisory_xact_lock" in sql:
                lock_taken.append(now)

    connection.ensure_connection()
    wrapped = cast(Any, connection)  # the commit is timed where Django makes it (a bench, not a test)
    real_commit = wrapped._commit

    def timed_commit() -> Any:
        t0 = time.perf_counter()
        try:
            return real_commit()
        finally:
            now = time.perf_counter()
            commits.append((now - t0) * 1000)
            if lock_taken:
                holds.append((now - lock_taken.pop()) * 1000)

    wrapped._commit = timed_commit
    third = count // 3
    service: list[float] = []
    with connection.execute_wrapper(wrapper):
        for body in bodies[10 : 10 + third]:
            headers = signed_headers(body)
            t0 = time.perf_counter()
            answer = delivery_receive(kind="github", connector_id=connector.pk, headers=headers, body=body)
            service.append((time.perf_counter() - t0) * 1000)
            assert answer.status == 200, answer
    wrapped._commit = real_commit
    result["delivery_receive_ms"] = percentiles(service)
    result["statements_ms_per_answer"] = {
        kind: round(sum(times) / len(service), 3) for kind, times in sorted(statements.items(), key=lambda kv: -sum(kv[1]))
    }
    result["statements_per_answer"] = round(sum(len(t) for t in statements.values()) / len(service), 1)
    result["commit_ms"] = percentiles(commits) if commits else None  # None: the insert runs in autocommit
    # None since the answer writes no audit event (the worker records it): nothing takes the lock.
    result["audit_chain_lock_held_ms"] = percentiles(holds) if holds else None

    # 5. The view through every middleware (Django's test client), profiled.
    client = Client()
    path = f"/api/webhooks/github/{connector.pk}"
    plain, profiled = bodies[10 + third : 10 + 2 * third], bodies[10 + 2 * third : 10 + count]

    def post(body: bytes) -> None:
        headers = signed_headers(body)
        response = client.post(
            path,
            data=body,
            content_type="application/json",
            headers={k: v for k, v in headers.items() if k != "Content-Type"},
        )
        assert response.status_code == 200, response.content

    view: list[float] = []
    for body in plain:
        t0 = time.perf_counter()
        post(body)
        view.append((time.perf_counter() - t0) * 1000)
    result["view_through_middleware_ms"] = percentiles(view)
    profiler = cProfile.Profile()
    for body in profiled:
        profiler.enable()
        post(body)
        profiler.disable()
    text = io.StringIO()
    pstats.Stats(profiler, stream=text).sort_stats("cumulative").print_stats(40)
    result["cprofile_top_cumulative"] = text.getvalue().splitlines()[-48:]
    text = io.StringIO()
    pstats.Stats(profiler, stream=text).sort_stats("tottime").print_stats(20)
    result["cprofile_top_own_time"] = text.getvalue().splitlines()[-28:]
    for key in ("cprofile_top_cumulative", "cprofile_top_own_time"):
        print("\n".join(result[key]), flush=True)
    return result

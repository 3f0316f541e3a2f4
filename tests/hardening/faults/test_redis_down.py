"""Redis down: writes and reads still answer, and the post-write work catches up when it returns.

"Down" is real: the cache and the Celery broker point at a loopback port nobody listens on, so
redis-py and kombu fail to connect exactly as with a stopped server (connection refused). The
embedded Redis of the test run stays up for the other tests; "it returns" points them back.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.conf import settings as django_settings
from django.core.cache import cache

from audit.models import AuditEvent
from cortex_site.celery import app
from cortex_site.embedded import free_port
from memories.models import EntityMention, Memory
from memories.services.post_write import post_write_sweep

pytestmark = pytest.mark.django_db

DECISION = "Ada Lovelace decided that payments-api moves to PostgreSQL 16 after INC-4821, with Globex Corp."


def _reset_broker_pools() -> None:
    # Celery keeps its broker connection pools once made; a new broker URL needs new ones (the old
    # ones stay open for whoever holds them: kombu's producer pools are keyed by connection).
    app._pool = None  # type: ignore[attr-defined]
    app.amqp._producer_pool = None  # type: ignore[attr-defined]


@pytest.fixture
def redis_down(settings: Any) -> Iterator[Callable[[], None]]:
    """Cache and broker unreachable until the returned function is called (Redis is back)."""
    dead = f"redis://127.0.0.1:{free_port()}/0"
    live_caches = django_settings.CACHES
    settings.CACHES = {"default": {**live_caches["default"], "LOCATION": dead}}
    was_eager, live_broker = app.conf.task_always_eager, app.conf.broker_url
    app.conf.update(task_always_eager=False, broker_url=dead)
    _reset_broker_pools()

    def back() -> None:
        settings.CACHES = live_caches
        app.conf.update(task_always_eager=was_eager, broker_url=live_broker)
        _reset_broker_pools()

    yield back
    if app.conf.broker_url == dead:
        back()


def test_redis_is_really_unreachable_in_the_fixture(redis_down: Callable[[], None]) -> None:
    from redis import Redis
    from redis.exceptions import ConnectionError as RedisConnectionError

    with pytest.raises(RedisConnectionError):
        Redis.from_url(app.conf.broker_url, socket_connect_timeout=1).ping()
    assert cache.get("anything", "miss") == "miss"  # the cache degrades to a miss instead of raising


def test_remember_succeeds_while_redis_is_down_and_the_sweep_catches_up(
    acme: dict[str, Any],
    outsider: Any,
    api: Callable[..., Any],
    redis_down: Callable[[], None],
    django_capture_on_commit_callbacks: Any,
) -> None:
    eve = api(acme["employee"])
    # The on-commit enqueue really runs (and fails on the broker): the answer is still 201.
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        answer = eve.post("/api/memories", {"title": "Payments database", "content": DECISION, "scope": "engineering"})
    assert answer.status_code == 201, answer.content
    assert len(callbacks) == 1
    memory = Memory.objects.get(pk=answer.json()["id"])
    # Stored with its audit event, and marked: its post-write task never reached a broker.
    assert memory.post_write_pending
    assert AuditEvent.objects.filter(action="memory.create", target_id=str(memory.pk)).exists()
    assert not EntityMention.objects.filter(memory=memory).exists()

    # Reads work on PostgreSQL alone too: recall (its term statistics live in the cache), list, detail.
    assert eve.post("/api/recall", {"query": "payments database"}).json()["results"][0]["memory"]["id"] == str(memory.pk)
    assert eve.get(f"/api/memories/{memory.pk}").status_code == 200
    # Someone without rights still gets nothing, Redis or not: another organization, a read-only grant.
    assert api(outsider).get(f"/api/memories/{memory.pk}").status_code == 404
    carl = api(acme["contractor"])
    refused = carl.post("/api/memories", {"content": "Contractor note", "scope": "engineering"})
    assert refused.status_code == 403
    assert not Memory.objects.filter(content="Contractor note").exists()

    # The sweep cannot enqueue while the broker is down: it stops, and the memory stays pending.
    assert post_write_sweep(batch_size=10, grace_seconds=0) == []
    assert Memory.objects.get(pk=memory.pk).post_write_pending

    redis_down()  # Redis is back (tasks run in-process, as the test settings say)
    assert post_write_sweep(batch_size=10, grace_seconds=0) == [str(memory.pk)]
    memory.refresh_from_db()
    assert not memory.post_write_pending
    mentioned = set(EntityMention.objects.filter(memory=memory).values_list("entity__name", flat=True))
    assert {"Ada Lovelace", "INC-4821"} <= mentioned
    # Idempotent: nothing left to sweep, and a second run of the task adds nothing.
    assert post_write_sweep(batch_size=10, grace_seconds=0) == []
    count = EntityMention.objects.filter(memory=memory).count()
    from memories.tasks import after_memory_write

    after_memory_write.apply(args=(str(memory.pk),)).get()
    assert EntityMention.objects.filter(memory=memory).count() == count


def test_sweep_waits_for_the_grace_period_and_skips_inactive_memories(
    acme: dict[str, Any], api: Callable[..., Any], redis_down: Callable[[], None], django_capture_on_commit_callbacks: Any
) -> None:
    eve = api(acme["employee"])
    with django_capture_on_commit_callbacks(execute=True):
        fresh = eve.post("/api/memories", {"content": "A fresh note about the VPN.", "scope": "engineering"}).json()
        old = eve.post("/api/memories", {"content": "The release train leaves on Thursdays.", "scope": "engineering"}).json()
        replaced = eve.post(f"/api/memories/{old['id']}/supersede", {"content": "The release train leaves on Wednesdays."})
    assert replaced.status_code == 201, replaced.content
    redis_down()
    # Within the grace period the on-commit task may still be on its way: nothing is swept.
    assert post_write_sweep(batch_size=10, grace_seconds=300) == []
    swept = post_write_sweep(batch_size=10, grace_seconds=0)
    # The superseded version is not worth the work; the active ones are.
    assert set(swept) == {fresh["id"], replaced.json()["id"]}
    assert Memory.objects.get(pk=old["id"]).post_write_pending


def test_post_write_task_clears_the_marker_on_the_normal_path(
    acme: dict[str, Any], api: Callable[..., Any], django_capture_on_commit_callbacks: Any
) -> None:
    # Redis up, tasks in-process: the on-commit task ran and cleared the marker.
    with django_capture_on_commit_callbacks(execute=True):
        body = api(acme["employee"]).post("/api/memories", {"content": DECISION, "scope": "engineering"}).json()
    assert not Memory.objects.get(pk=body["id"]).post_write_pending
    assert post_write_sweep(batch_size=10, grace_seconds=0) == []

"""The read-replica router's rules that need no replica (the real standby is in test_replica.py)."""

from __future__ import annotations

from django.db import router
from django.test import RequestFactory
from django.urls import resolve, reverse

from cortex_site import db_router
from memories.models import Membership, Memory


def test_without_a_replica_every_read_and_write_goes_to_the_primary() -> None:
    assert not db_router.replica_configured()
    with db_router.replica_reads() as state:
        assert router.db_for_read(Memory) == "default"
        assert router.db_for_write(Memory) == "default"
        assert state.used == set()


def test_the_replica_routes_are_real_pages_and_endpoints() -> None:
    paths = {
        "api-recall": "/api/recall",
        "api-memories": "/api/memories",
        "api-memory": "/api/memories/00000000-0000-0000-0000-000000000001",
        "memory-list": "/memories/",
        "memory-detail": "/memories/00000000-0000-0000-0000-000000000001/",
    }
    assert set(paths) == set(db_router.REPLICA_ROUTES)
    for name, path in paths.items():
        assert resolve(path).url_name == name
    assert reverse("memory-list") == "/memories/"
    # Writes never come from the replica routes' methods, except recall, which only reads.
    assert all(methods <= {"GET", "HEAD"} for name, methods in db_router.REPLICA_ROUTES.items() if name != "api-recall")


def test_access_models_are_never_read_from_the_replica() -> None:
    with db_router.replica_reads() as state:
        state.replica_allowed = True
        # Decided before any health check: these never even ask whether the replica is usable.
        assert not db_router._eligible(Membership._meta.label_lower)
        for label in ("memories.scopegrant", "memories.apitoken", "sessions.session", "memories.scope", "auth.permission"):
            assert not db_router._eligible(label)
        assert state.used == set()


def test_a_write_marks_the_request_and_bookkeeping_writes_do_not() -> None:
    from audit.models import AuditEvent

    with db_router.replica_reads() as state:
        router.db_for_write(AuditEvent)
        assert not state.wrote
        router.db_for_write(Memory)
        assert state.wrote


def test_pins_are_keyed_by_a_digest_never_by_the_credential() -> None:
    request = RequestFactory().get("/api/memories", HTTP_AUTHORIZATION="Bearer ctx_abcd1234_secretpart")
    request.COOKIES["sessionid"] = "session-key-value"
    keys = db_router._pin_keys(request)
    assert len(keys) == 2
    assert all(key.startswith("cortex-db-pin:") and "secret" not in key and "session-key" not in key for key in keys)

"""GET /healthz: 200 when the database, pgvector, the broker and the embedder all work; 503 naming the broken part.

The endpoint is anonymous (load balancers and docker call it), so it must never show a secret.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest
from django.conf import settings
from django.test import Client, override_settings

from cortex_site.embedded import free_port
from memories.embeddings.factory import get_embedder

CHECK_NAMES = {"database", "pgvector", "broker", "embedder"}


@pytest.fixture(autouse=True)
def _fresh_embedder() -> Iterator[None]:
    # get_embedder() is cached per process and reads settings once; each test picks its own.
    get_embedder.cache_clear()
    yield
    get_embedder.cache_clear()


def _with_password(url: str, password: str, port: int | None = None) -> str:
    parts = urlsplit(url)
    host = f"{parts.hostname}:{port or parts.port}"
    return urlunsplit((parts.scheme, f":{password}@{host}", parts.path, parts.query, parts.fragment))


def _health(client: Client) -> tuple[int, dict[str, Any], str]:
    response = client.get("/healthz")
    assert response["Content-Type"].startswith("application/json")
    assert "no-cache" in response["Cache-Control"] or "max-age=0" in response["Cache-Control"]
    return response.status_code, response.json(), response.content.decode()


@pytest.mark.django_db
@override_settings(CORTEX_EMBEDDER="hash")
def test_healthz_is_200_when_every_part_works(client: Client) -> None:
    status, body, _raw = _health(client)
    assert status == 200, body
    assert body["status"] == "ok"
    checks = body["checks"]
    assert set(checks) == CHECK_NAMES
    assert all(check["ok"] for check in checks.values()), checks
    assert checks["database"]["server_version"]
    assert checks["pgvector"]["version"].startswith("0.8.")
    assert checks["embedder"]["provider"] == "hash"
    assert checks["embedder"]["probe"] == "embedded"


@pytest.mark.django_db
@override_settings(CORTEX_EMBEDDER="local")
def test_healthz_loads_the_local_model_for_real(client: Client) -> None:
    status, body, _raw = _health(client)
    assert status == 200, body
    assert body["checks"]["embedder"] == {
        **body["checks"]["embedder"],
        "ok": True,
        "provider": "local",
        "dim": 384,
        "probe": "embedded",
    }


@pytest.mark.django_db
@override_settings(CORTEX_EMBEDDER="hash")
def test_unreachable_broker_is_503_naming_the_broker_without_its_password(client: Client) -> None:
    closed = _with_password(str(settings.REDIS_URL), "pw-that-must-not-leak-1", port=free_port())
    with override_settings(REDIS_URL=closed, CELERY_BROKER_URL=closed):
        status, body, raw = _health(client)
    assert status == 503
    assert body["status"] == "unavailable"
    assert body["checks"]["broker"]["ok"] is False
    assert "ConnectionError" in body["checks"]["broker"]["error"]
    # The other parts are still reported as working: the operator sees which one broke.
    assert all(body["checks"][name]["ok"] for name in CHECK_NAMES - {"broker"})
    assert "pw-that-must-not-leak-1" not in raw


@pytest.mark.django_db
@override_settings(CORTEX_EMBEDDER="hash")
def test_wrong_broker_password_is_503_and_no_password_appears(client: Client) -> None:
    real_password = urlsplit(str(settings.REDIS_URL)).password
    assert real_password
    wrong = _with_password(str(settings.REDIS_URL), "wrong-pw-that-must-not-leak")
    with override_settings(REDIS_URL=wrong, CELERY_BROKER_URL=wrong):
        status, body, raw = _health(client)
    assert status == 503
    assert body["checks"]["broker"]["ok"] is False
    assert "wrong-pw-that-must-not-leak" not in raw
    assert real_password not in raw


@pytest.mark.django_db
@override_settings(CORTEX_EMBEDDER="local", CORTEX_EMBED_DIM=768)
def test_misconfigured_embedder_is_503_naming_the_embedder(client: Client) -> None:
    status, body, _raw = _health(client)
    assert status == 503
    assert body["checks"]["embedder"]["ok"] is False
    assert "384" in body["checks"]["embedder"]["error"]
    assert body["checks"]["database"]["ok"] is True


@pytest.mark.django_db
@override_settings(CORTEX_EMBEDDER="hash")
def test_healthz_shows_no_connection_strings_or_tenant_data(client: Client, make_org: Any, make_member: Any) -> None:
    make_member(make_org("secret-tenant", "Secret Tenant Inc"), email="insider@secret.test")
    _status, body, raw = _health(client)
    assert set(body) == {"status", "checks"}
    for needle in (
        settings.REDIS_URL,
        f"{settings.DATABASES['default']['NAME']}?",
        "secret-tenant",
        "Secret Tenant",
        "insider@",
        settings.SECRET_KEY,
    ):
        assert needle and needle not in raw


@pytest.mark.django_db
def test_healthz_only_answers_get(client: Client) -> None:
    assert client.post("/healthz").status_code == 405

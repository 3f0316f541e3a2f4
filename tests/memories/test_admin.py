"""Django admin for staff: read-mostly, and never memory content."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from memories.models import Memory


@pytest.fixture
def staff_client(django_user_model: Any) -> Client:
    staff = django_user_model.objects.create_user("ops@example.test", password="pw-for-tests-1", is_staff=True, is_superuser=True)
    client = Client()
    client.force_login(staff)
    return client


@pytest.mark.django_db
def test_staff_see_tenancy_but_cannot_add_or_change_it(staff_client: Client, acme: dict[str, Any]) -> None:
    for path in (
        "/admin/memories/organization/",
        "/admin/memories/membership/",
        "/admin/memories/scope/",
        "/admin/memories/apitoken/",
        "/admin/audit/auditevent/",
    ):
        assert staff_client.get(path).status_code == 200, path
    assert staff_client.get("/admin/memories/organization/add/").status_code == 403
    assert staff_client.get("/admin/memories/scope/add/").status_code == 403
    assert staff_client.get("/admin/audit/auditevent/add/").status_code == 403


@pytest.mark.django_db
def test_admin_never_shows_memory_content_or_token_hashes(staff_client: Client, acme: dict[str, Any], api: Any) -> None:
    body = (
        api(acme["exec"])
        .post("/api/memories", {"title": "Board secret title", "content": "Acquisition of Initech closes in May."})
        .json()
    )
    memory = Memory.objects.get(pk=body["id"])
    listing = staff_client.get("/admin/memories/memory/").content.decode()
    detail = staff_client.get(f"/admin/memories/memory/{memory.pk}/change/").content.decode()
    assert "Initech" not in listing + detail and "Board secret title" not in listing + detail
    tokens = staff_client.get("/admin/memories/apitoken/").content.decode()
    assert "secret_hash" not in tokens


@pytest.mark.django_db
def test_non_staff_members_cannot_open_the_admin(acme: dict[str, Any]) -> None:
    client = Client()
    client.force_login(acme["exec"].user)
    assert client.get("/admin/").status_code == 302

"""Helpers shared by tests (import as `from support import ...`)."""

from __future__ import annotations

from typing import Any

from django.test import Client

from memories.access import CliPrincipal, Principal
from memories.models import Membership, Memory
from memories.services.memories import MemoryDraft, memory_create


def principal(membership: Membership) -> Principal:
    """The Principal a member acts as, loaded afresh (as a request would)."""
    return Principal(Membership.objects.select_related("organization", "user").get(pk=membership.pk))


def signed_in(membership: Membership) -> Client:
    """A browser session for the member."""
    client = Client()
    client.force_login(membership.user)
    return client


def remember(membership: Membership, content: str, **fields: Any) -> Memory:
    """Store a memory as the member through the write pipeline."""
    return memory_create(principal=principal(membership), draft=MemoryDraft(content=content, **fields)).memory


def imported(membership: Membership, content: str, **fields: Any) -> Memory:
    """Store a memory as an import by the member through the operator CLI (which may state an author_name)."""
    acting = CliPrincipal(Membership.objects.select_related("organization", "user").get(pk=membership.pk))
    return memory_create(principal=acting, draft=MemoryDraft(content=content, **fields)).memory


def assert_envelope(response: Any, status: int, error_code: str | None = None) -> dict[str, Any]:
    """An API error is the envelope, with the right status and the response's request id."""
    assert response.status_code == status, (response.status_code, response.content[:500])
    assert response["Content-Type"].startswith("application/json")
    body = response.json()
    assert set(body) == {"error_code", "message", "request_id", "details"}, body
    assert body["request_id"] == response["X-Request-ID"]
    assert body["message"]
    if error_code is not None:
        assert body["error_code"] == error_code, body
    return body

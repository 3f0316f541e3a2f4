"""Assertions shared by tests (import as `from support import ...`)."""

from __future__ import annotations

from typing import Any


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

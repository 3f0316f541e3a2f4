"""Per-request (or per-task) context: the request id and client ip that audit events and logs carry."""

from __future__ import annotations

import contextvars
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

request_id_var: contextvars.ContextVar[str | None] = contextvars.ContextVar("cortex_request_id", default=None)
client_ip_var: contextvars.ContextVar[str | None] = contextvars.ContextVar("cortex_client_ip", default=None)


def new_request_id() -> str:
    return uuid.uuid4().hex


def current_request_id() -> str | None:
    return request_id_var.get()


def current_client_ip() -> str | None:
    return client_ip_var.get()


@contextmanager
def bound(*, request_id: str | None, client_ip: str | None = None) -> Iterator[None]:
    """Bind a request id (and ip) for the duration of a block — used by Celery tasks and MCP calls."""
    rid_token = request_id_var.set(request_id)
    ip_token = client_ip_var.set(client_ip)
    try:
        yield
    finally:
        request_id_var.reset(rid_token)
        client_ip_var.reset(ip_token)

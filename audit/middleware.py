"""Request ids: accept the client's X-Request-ID when it is sane, else make one; echo it on every response."""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable
from functools import lru_cache
from typing import Union

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.http import HttpRequest, HttpResponse

from audit.context import client_ip_var, new_request_id, request_id_var

IPNetwork = Union[ipaddress.IPv4Network, ipaddress.IPv6Network]  # noqa: UP007 - a runtime alias

_VALID_REQUEST_ID = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")


@lru_cache(maxsize=1)
def _trusted_proxies() -> tuple[IPNetwork, ...]:
    networks = []
    for entry in settings.CORTEX_TRUSTED_PROXIES:
        try:
            networks.append(ipaddress.ip_network(entry, strict=False))
        except ValueError:
            raise ImproperlyConfigured(f"CORTEX_TRUSTED_PROXIES: {entry!r} is not an address or network.") from None
    return tuple(networks)


def _trusted(address: str | None, proxies: tuple[IPNetwork, ...]) -> bool:
    try:
        ip = ipaddress.ip_address(address or "")
    except ValueError:
        return False
    return any(ip in network for network in proxies)


def client_ip(request: HttpRequest) -> str | None:
    """The address audit events record: REMOTE_ADDR, unless it is a configured proxy.

    Only then is X-Forwarded-For read, right to left, skipping our own proxies: the first address
    that is not one of them is the client. A header from anyone else is ignored, so a client
    cannot choose the address it is audited under.
    """
    remote = request.META.get("REMOTE_ADDR") or None
    proxies = _trusted_proxies()
    if not proxies or not _trusted(remote, proxies):
        return remote
    hops = [hop.strip() for hop in request.META.get("HTTP_X_FORWARDED_FOR", "").split(",") if hop.strip()]
    for hop in reversed(hops):
        if not _trusted(hop, proxies):
            try:
                return str(ipaddress.ip_address(hop))
            except ValueError:
                return remote  # garbage where an address should be: keep the proxy's own
    return hops[0] if hops else remote


class RequestIdMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        supplied = request.headers.get("X-Request-ID", "")
        request_id = supplied if _VALID_REQUEST_ID.match(supplied) else new_request_id()
        request.request_id = request_id  # type: ignore[attr-defined]
        rid_token = request_id_var.set(request_id)
        ip_token = client_ip_var.set(client_ip(request))
        try:
            response = self.get_response(request)
        finally:
            request_id_var.reset(rid_token)
            client_ip_var.reset(ip_token)
        response["X-Request-ID"] = request_id
        return response

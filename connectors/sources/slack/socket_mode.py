"""Slack Socket Mode: events over a WebSocket Cortex opens, for installs without a public address.

slack-sdk's SocketModeClient (builtin transport) opens the connection with the app-level token
(``apps.connections.open`` at the connector's ``api_url``), pings it, and reconnects when Slack asks
(``disconnect`` envelopes) or the link drops. Each ``events_api`` envelope is acknowledged at once
(Slack's 3 seconds), then handled exactly like a webhook delivery: parsed by the same SlackSource,
stored as a Delivery unique per (connector, event_id) — so Slack's redeliveries never duplicate —
and processed by the connectors worker.

The socket replaces the webhook's signature: it is authenticated by the app-level token, and
only this connector's socket delivers into this connector.

Run by the worker side: ``python manage.py slack_socket_mode`` keeps one client per active
Slack connector in socket mode (see connectors/management/commands/slack_socket_mode.py).
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from django.db import close_old_connections
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError
from slack_sdk.socket_mode.builtin.client import SocketModeClient
from slack_sdk.socket_mode.client import BaseSocketModeClient
from slack_sdk.socket_mode.request import SocketModeRequest
from slack_sdk.socket_mode.response import SocketModeResponse

from connectors.base import ParsedDelivery
from connectors.errors import PermanentSourceError
from connectors.models import Connector, Delivery
from connectors.services.connectors import connector_set_error
from connectors.services.deliveries import delivery_accept
from connectors.sources.slack.client import DEFAULT_API_URL, translate_error
from connectors.sources.slack.source import SlackSource

logger = logging.getLogger(__name__)


def socket_delivery_receive(*, connector: Connector, parsed: ParsedDelivery) -> tuple[Delivery, bool]:
    """Store one event from the socket as a Delivery (deduplicated) and enqueue it on commit —
    the same bookkeeping as a verified webhook delivery; returns the delivery and whether it was new."""
    delivery, action, _reason = delivery_accept(connector=connector, parsed=parsed, via="socket_mode")
    return delivery, action != "webhook.duplicate"


class SlackSocketModeRunner:
    """One connector's Socket Mode connection; ``start()`` returns once connected, ``close()`` ends it."""

    def __init__(self, connector_id: Any, *, ping_interval: float = 10.0) -> None:
        self.connector_id = connector_id
        self.ping_interval = ping_interval
        self.client: SocketModeClient | None = None
        self.handled = threading.Event()  # set after each envelope is stored (tests wait on it)

    def start(self) -> None:
        """Connect; a refused app token puts the connector in error (PermanentSourceError) with a sentence."""
        connector = Connector.objects.get(pk=self.connector_id)
        app_token = connector.credentials.get("app_token", "")
        base_url = ((connector.config or {}).get("api_url") or DEFAULT_API_URL).rstrip("/") + "/"
        client = SocketModeClient(
            app_token=app_token,
            web_client=WebClient(base_url=base_url, timeout=10, retry_handlers=[]),
            auto_reconnect_enabled=True,
            ping_interval=self.ping_interval,
            concurrency=2,
        )
        client.socket_mode_request_listeners.append(self._on_request)
        try:
            client.connect()
        except SlackApiError as error:
            client.close()
            failure = translate_error(error, "apps.connections.open", {})
            if isinstance(failure, PermanentSourceError):
                code = (error.response.data or {}).get("error") if isinstance(error.response.data, dict) else None
                message = (
                    f"Socket Mode could not connect: Slack refused the app-level token ({code or error.response.status_code}). "
                    "Create one under Basic Information → App-Level Tokens with connections:write and paste it."
                )
                connector_set_error(connector=connector, message=message)
                raise PermanentSourceError(message) from error
            raise failure from error
        self.client = client

    def close(self) -> None:
        if self.client is not None:
            self.client.close()
            self.client = None

    def is_connected(self) -> bool:
        return self.client is not None and self.client.is_connected()

    def _on_request(self, client: BaseSocketModeClient, request: SocketModeRequest) -> None:
        try:
            if request.type == "events_api":  # slash commands and interactivity are not synced
                close_old_connections()  # the SDK's thread pool: its own, possibly stale, DB connection
                connector = Connector.objects.select_related("organization").get(pk=self.connector_id)
                parsed = SlackSource(connector).parse_payload(dict(request.payload or {}))
                socket_delivery_receive(connector=connector, parsed=parsed)
        except Exception:
            # Not acknowledged: Slack sends the envelope again (and the event id keeps it from doubling).
            logger.exception("slack socket mode: connector %s: envelope %s not stored", self.connector_id, request.envelope_id)
            return
        finally:
            close_old_connections()
        # Acknowledged once stored (milliseconds), well inside Slack's 3 seconds.
        client.send_socket_mode_response(SocketModeResponse(envelope_id=request.envelope_id))
        self.handled.set()


def socket_mode_connectors() -> list[Connector]:
    """Active Slack connectors configured for Socket Mode."""
    return [
        connector
        for connector in Connector.objects.filter(kind="slack", status=Connector.Status.ACTIVE)
        if (connector.config or {}).get("mode") == "socket"
    ]


class SocketModeSupervisor:
    """Keeps one SlackSocketModeRunner per active socket-mode connector, re-reading the list every
    ``refresh_seconds`` (a connector created, paused, fixed or deleted is picked up there)."""

    def __init__(self, *, refresh_seconds: float = 30.0) -> None:
        self.refresh_seconds = refresh_seconds
        self.runners: dict[str, SlackSocketModeRunner] = {}

    def refresh(self) -> None:
        wanted = {str(connector.pk) for connector in socket_mode_connectors()}
        for connector_id in sorted(set(self.runners) - wanted):
            self.runners.pop(connector_id).close()
        for connector_id in sorted(wanted - set(self.runners)):
            runner = SlackSocketModeRunner(connector_id)
            try:
                runner.start()
            except Exception:
                # Permanent failures put the connector in error (it leaves `wanted`); others are tried again.
                logger.exception("slack socket mode: connector %s could not connect", connector_id)
                continue
            self.runners[connector_id] = runner

    def run(self, stop: threading.Event) -> None:
        try:
            while not stop.is_set():
                self.refresh()
                stop.wait(self.refresh_seconds)
        finally:
            self.close()

    def close(self) -> None:
        for runner in self.runners.values():
            runner.close()
        self.runners.clear()

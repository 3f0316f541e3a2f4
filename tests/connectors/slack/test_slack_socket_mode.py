"""Socket Mode: slack-sdk's SocketModeClient really connects (apps.connections.open on the HTTP stub,
then the loopback WebSocket), and events arriving over it are processed like webhook deliveries."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from support.slack_workspace import BOT_TOKEN, FakeSlack, fixture
from support.socket_mode_stub import SocketModeStub
from support.stub_server import StubResponse

from connectors.errors import PermanentSourceError
from connectors.models import Connector, Delivery
from connectors.services.connectors import connector_pause
from connectors.sources.slack.socket_mode import SlackSocketModeRunner, SocketModeSupervisor
from memories.models import Memory

# The client's threads use their own database connections: the data must really be committed.
pytestmark = pytest.mark.django_db(transaction=True)

APP_TOKEN = "xapp-1-A111-test"


@pytest.fixture
def socket_connector(
    acme: dict[str, Any], make_slack_connector: Callable[..., Connector], slack: FakeSlack, socket_mode_stub: SocketModeStub
) -> Connector:
    def open_connection(request: Any) -> StubResponse:
        if request.headers.get("authorization") != f"Bearer {APP_TOKEN}":
            return StubResponse(json={"ok": False, "error": "invalid_auth"})
        return StubResponse(json={"ok": True, "url": socket_mode_stub.url})

    slack.stub.route("POST", "/api/apps.connections.open", open_connection)
    return make_slack_connector(
        acme["exec"], config={"mode": "socket"}, credentials={"bot_token": BOT_TOKEN, "app_token": APP_TOKEN}
    )


@pytest.fixture
def supervisor() -> Iterator[SocketModeSupervisor]:
    running = SocketModeSupervisor(refresh_seconds=0.1)
    try:
        yield running
    finally:
        running.close()


def slack_memories() -> list[Memory]:
    return list(Memory.objects.filter(source="Slack").order_by("created_at"))


def test_events_over_the_socket_become_memories_and_redeliveries_do_not_double(
    socket_connector: Connector, slack: FakeSlack, socket_mode_stub: SocketModeStub, supervisor: SocketModeSupervisor
) -> None:
    slack.post("C06NRA6JLER", "1719209506.817929", "Hello, this is a normal text message", user="U06NU4E26M9")
    supervisor.refresh()
    assert list(supervisor.runners) == [str(socket_connector.pk)]
    socket_mode_stub.wait_for(lambda: socket_mode_stub.connections == 1)

    body = fixture("event_callback__message")
    first = socket_mode_stub.send_event(body)
    socket_mode_stub.wait_for(lambda: len(slack_memories()) == 1 and first in socket_mode_stub.acks)
    [memory] = slack_memories()
    assert memory.title == "#general: Hello, this is a normal text message"
    assert memory.author_name == "Grace Hopper"
    assert memory.external_id == "C06NRA6JLER:1719209506.817929"

    # Slack redelivers the same event (retry_attempt 1): acknowledged, stored once.
    again = socket_mode_stub.send_event(body, retry_attempt=1)
    socket_mode_stub.wait_for(lambda: again in socket_mode_stub.acks)
    assert Delivery.objects.filter(connector=socket_connector).count() == 1
    assert len(slack_memories()) == 1

    # A bot's message over the socket is filtered like a webhook's.
    bot = fixture("event_callback__message")
    bot["event_id"] = "Ev0BOT"
    bot["event"].update(subtype="bot_message", bot_id="B111", ts="1719209600.000100")
    ignored = socket_mode_stub.send_event(bot)
    socket_mode_stub.wait_for(lambda: ignored in socket_mode_stub.acks)
    assert Delivery.objects.get(connector=socket_connector, delivery_id="Ev0BOT").status == Delivery.Status.IGNORED
    assert len(slack_memories()) == 1


def test_the_client_reconnects_when_slack_asks_and_keeps_processing(
    socket_connector: Connector, slack: FakeSlack, socket_mode_stub: SocketModeStub, supervisor: SocketModeSupervisor
) -> None:
    supervisor.refresh()
    socket_mode_stub.wait_for(lambda: socket_mode_stub.connections == 1)

    socket_mode_stub.ask_to_reconnect()
    socket_mode_stub.wait_for(lambda: socket_mode_stub.connections == 2)
    assert len(slack.stub.requests_to("/api/apps.connections.open")) == 2

    slack.post("C111", "1626342092.008500", "Ship on Friday", user="U111")
    body = fixture("event_callback__message")
    body["event"].update(channel="C111", ts="1626342092.008500", text="Ship on Friday", user="U111")
    socket_mode_stub.send_event(body)
    socket_mode_stub.wait_for(lambda: len(slack_memories()) == 1)
    assert slack_memories()[0].content == "Ship on Friday"


def test_a_paused_connector_is_disconnected_on_the_next_refresh(
    acme: dict[str, Any], socket_connector: Connector, socket_mode_stub: SocketModeStub, supervisor: SocketModeSupervisor
) -> None:
    from support import principal

    supervisor.refresh()
    runner = supervisor.runners[str(socket_connector.pk)]
    assert runner.is_connected()
    connector_pause(principal=principal(acme["exec"]), connector_id=socket_connector.pk)
    supervisor.refresh()
    assert supervisor.runners == {}
    assert not runner.is_connected()


def test_a_refused_app_token_puts_the_connector_in_error(
    acme: dict[str, Any], socket_connector: Connector, socket_mode_stub: SocketModeStub
) -> None:
    socket_connector.set_credentials({"bot_token": BOT_TOKEN, "app_token": "xapp-1-revoked"})
    socket_connector.save()
    with pytest.raises(PermanentSourceError):
        SlackSocketModeRunner(socket_connector.pk).start()
    socket_connector.refresh_from_db()
    assert socket_connector.status == Connector.Status.ERROR
    assert socket_connector.last_error.startswith(
        "Socket Mode could not connect: Slack refused the app-level token (invalid_auth)."
    )
    assert socket_mode_stub.connections == 0

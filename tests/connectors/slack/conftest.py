"""Fixtures for the Slack tests: the loopback workspace (support/slack_workspace.py) and connectors on it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from support.slack_workspace import BOT_TOKEN, SIGNING_SECRET, FakeSlack
from support.socket_mode_stub import socket_mode_stub  # noqa: F401  (fixture)
from support.stub_server import StubServer

from connectors.models import Connector
from connectors.services.connectors import connector_create
from memories.models import Membership


@pytest.fixture
def slack(stub_server: StubServer) -> FakeSlack:
    """The workspace of the recorded fixtures: #general (C06NRA6JLER, the event_callback capture),
    #eng (C111, the message_changed / message_deleted events), and their authors."""
    workspace = FakeSlack(stub_server)
    workspace.install()
    workspace.add_channel("C06NRA6JLER", "general")
    workspace.add_channel("C111", "eng")
    workspace.add_channel("G0PRIVATE1", "leadership", private=True)
    workspace.add_user("U06NU4E26M9", "Grace Hopper", "grace@acme.test")
    workspace.add_user("U111", "Ada Lovelace", "ada@acme.test")
    workspace.add_user("U012AB3CDE", "Alan Turing", "alan@acme.test")
    workspace.add_user("U061F7AUR", "Edsger Dijkstra", "edsger@acme.test")
    return workspace


@pytest.fixture
def make_slack_connector(slack: FakeSlack) -> Callable[..., Connector]:
    def make(admin: Membership, *, channels: list[str] | None = None, **options: Any) -> Connector:
        from support import principal

        config = {"channels": channels or ["C06NRA6JLER", "C111"], "api_url": slack.api_url, **options.pop("config", {})}
        credentials = options.pop("credentials", {"bot_token": BOT_TOKEN, "signing_secret": SIGNING_SECRET})
        created = connector_create(
            principal=principal(admin),
            kind="slack",
            name=options.pop("name", "Acme Slack"),
            config=config,
            credentials=credentials,
            **options,
        )
        return created.connector

    return make

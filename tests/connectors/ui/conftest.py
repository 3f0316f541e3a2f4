"""Connectors made through the real services, as an admin of acme would make them in the form."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from support import principal
from support.slack_workspace import FakeSlack
from support.stub_server import StubServer
from ui_browser.conftest import browser, open_page, team  # noqa: F401  (the browser tests' fixtures, shared)

from connectors.models import Connector
from connectors.services.connectors import connector_create
from memories.models import Membership

GMAIL_CREDENTIALS = {"client_id": "client-1", "client_secret": "client-secret-1", "refresh_token": "refresh-token-1"}


@pytest.fixture
def make_connector() -> Callable[..., Connector]:
    def make(admin: Membership, kind: str = "gmail", name: str = "Team inbox", **fields: Any) -> Connector:
        fields.setdefault("config", {"label": "team"} if kind == "gmail" else {})
        fields.setdefault("credentials", dict(GMAIL_CREDENTIALS) if kind == "gmail" else {})
        return connector_create(principal=principal(admin), kind=kind, name=name, **fields).connector

    return make


@pytest.fixture
def inbox(acme: dict[str, Any], make_connector: Callable[..., Connector]) -> Connector:
    """A Gmail connector of acme, installed by its Executive admin, writing into engineering."""
    return make_connector(acme["exec"], scope="engineering", clearance_min="Employee")


@pytest.fixture
def slack(stub_server: StubServer) -> FakeSlack:
    """A loopback Slack workspace (slack-sdk really runs against it): #general, #eng and private #leadership."""
    workspace = FakeSlack(stub_server)
    workspace.install()
    workspace.add_channel("C06NRA6JLER", "general")
    workspace.add_channel("C111", "eng")
    workspace.add_channel("G0PRIVATE1", "leadership", private=True)
    workspace.add_user("U111", "Ada Lovelace", "ada@acme.test")
    return workspace

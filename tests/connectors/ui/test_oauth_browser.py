""" "Connect Google account" in a real browser (headless Chromium): the form post, the page that moves
on to the consent screen under Cortex's Content-Security-Policy (form-action 'self' would block a
redirected post), the consent at the loopback stub, and the way back to the connector's page."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import expect
from support.gmail_mailbox import FakeMailbox
from support.oauth_providers import FakeGoogle
from support.stub_server import StubServer

from connectors.models import Connector

pytestmark = pytest.mark.slow


def test_an_admin_connects_a_google_account_from_the_gmail_form(
    team: Any, open_page: Any, stub_server: StubServer, settings: Any
) -> None:
    settings.CORTEX_GOOGLE_OAUTH_AUTH_URI = f"{stub_server.url}/o/oauth2/v2/auth"
    google = FakeGoogle(stub_server, FakeMailbox(stub_server))
    google.install()
    page = open_page(team.people["ada"])
    page.goto("/connectors/new/gmail/")
    page.locator("#id_name").fill("Team inbox")
    page.locator("#id_client_id").fill(google.client[0])
    page.locator("#id_client_secret").fill(google.client[1])
    page.locator("#id_token_uri").fill(f"{stub_server.url}/token")
    page.locator("#id_scope").select_option("engineering")
    page.get_by_text("Schedule and advanced").click()
    page.locator("#id_api_url").fill(stub_server.url)
    page.get_by_role("button", name="Connect Google account").click()

    expect(page.get_by_role("heading", level=1)).to_have_text("Team inbox")
    expect(page.get_by_text("Team inbox is connected to Google.")).to_be_visible()
    connector = Connector.objects.get()
    assert page.url.endswith(f"/connectors/{connector.pk}/")
    assert connector.credentials["refresh_token"] == google.refresh_token
    assert google.refresh_token not in page.content() and google.client[1] not in page.content()

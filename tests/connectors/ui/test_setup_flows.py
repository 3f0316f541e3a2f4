"""Setting up Slack and GitHub from the page: what to paste into the source, the secret shown once,
Test the connection through the real SDK against a loopback workspace, and refusals in plain words."""

from __future__ import annotations

import re
from typing import Any

import pytest
from support import signed_in
from support.slack_workspace import BOT_TOKEN, SIGNING_SECRET, FakeSlack

from connectors.models import Connector

pytestmark = pytest.mark.django_db

HX = {"HX-Request": "true"}


def slack_form(slack: FakeSlack, **overrides: Any) -> dict[str, Any]:
    data = {
        "name": "Acme Slack",
        "channels": "C06NRA6JLER\nC111",
        "mode": "webhook",
        "bot_token": BOT_TOKEN,
        "signing_secret": SIGNING_SECRET,
        "app_token": "",
        "api_url": slack.api_url,
        "scope": "engineering",
        "clearance_min": "Employee",
        "per_run_cap": "",
    }
    data.update(overrides)
    return data


def test_slack_setup_shows_the_request_url_to_paste_and_test_the_connection_reaches_slack(
    acme: dict[str, Any], slack: FakeSlack
) -> None:
    client = signed_in(acme["exec"])
    response = client.post("/connectors/new/slack/", slack_form(slack), follow=True)
    assert response.redirect_chain[0][1] == 302  # nothing shown once, so the page is safe to reload
    connector = Connector.objects.get()
    assert response.redirect_chain[0][0] == f"/connectors/{connector.pk}/"
    html = response.content.decode()
    assert f'value="http://127.0.0.1:8000/api/webhooks/slack/{connector.pk}"' in html and "Request URL" in html
    assert connector.config["channels"] == ["C06NRA6JLER", "C111"] and connector.config["mode"] == "webhook"
    assert connector.credentials["signing_secret"] not in html and connector.credentials["bot_token"] not in html

    result = client.post(f"/connectors/{connector.pk}/test/", headers=HX).content.decode()
    assert "Connected" in result and "Connected to the Slack workspace Acme as cortex; 2 channels readable." in result
    assert slack.calls("auth.test")

    slack.revoked = True
    refused = client.post(f"/connectors/{connector.pk}/test/", headers=HX).content.decode()
    assert "Could not connect" in refused and "revoked" in refused.lower()
    connector.refresh_from_db()
    assert connector.status == Connector.Status.ACTIVE  # a test changes nothing


def test_a_private_slack_channel_into_an_all_members_scope_is_refused_on_the_channels_field(
    acme: dict[str, Any], slack: FakeSlack
) -> None:
    response = signed_in(acme["exec"]).post("/connectors/new/slack/", slack_form(slack, channels="C111\nG0PRIVATE1 handbook"))
    assert response.status_code == 400
    html = response.content.decode()
    error = html.split('id="id_channels_error"')[1][:600]
    assert "#leadership is a private Slack channel" in error and "granted scope" in error
    assert not Connector.objects.exists()
    # Mapped to a granted scope it is accepted.
    accepted = signed_in(acme["exec"]).post("/connectors/new/slack/", slack_form(slack, channels="C111\nG0PRIVATE1 sales"))
    assert accepted.status_code == 302
    assert Connector.objects.get().config["channel_scopes"] == {"G0PRIVATE1": "sales"}


def test_slack_socket_mode_needs_an_app_token(acme: dict[str, Any], slack: FakeSlack) -> None:
    response = signed_in(acme["exec"]).post("/connectors/new/slack/", slack_form(slack, mode="socket", signing_secret=""))
    assert response.status_code == 400
    assert "Required in this mode." in response.content.decode().split('id="id_app_token_error"')[1][:400]
    assert not Connector.objects.exists()


def test_github_setup_shows_the_payload_url_and_a_generated_secret_once(acme: dict[str, Any]) -> None:
    client = signed_in(acme["exec"])
    data = {
        "name": "Firmware PRs",
        "repositories": "acme/firmware\nacme/docs",
        "mode": "webhook",
        "token": "",
        "webhook_secret": "",
        "api_url": "",
        "scope": "engineering",
        "clearance_min": "Employee",
        "interval_minutes": "",
    }
    response = client.post("/connectors/new/github/", data)
    assert response.status_code == 201 and response["Cache-Control"] == "no-store"
    html = response.content.decode()
    connector = Connector.objects.get()
    secret = connector.credentials["webhook_secret"]
    assert re.search(rf'id="new-secret" type="text" value="{re.escape(secret)}"', html)
    assert f"/api/webhooks/github/{connector.pk}" in html and "Payload URL" in html and "Pull requests" in html
    assert connector.config == {"repositories": ["acme/firmware", "acme/docs"], "mode": "webhook"}
    # Never again: the detail page does not show it.
    assert secret not in client.get(f"/connectors/{connector.pk}/").content.decode()
    # A new one replaces it, shown once.
    rotated = client.post(f"/connectors/{connector.pk}/rotate/").content.decode()
    connector.refresh_from_db()
    new_secret = connector.credentials["webhook_secret"]
    assert new_secret != secret and f'value="{new_secret}"' in rotated
    # A webhook-only connector has no schedule: no Backfill, and its card says it is real time.
    card = client.get(f"/connectors/{connector.pk}/card/").content.decode()
    assert "real time (webhook)" in card and "Backfill" not in card and "Sync now" not in card


def test_a_bad_repository_name_is_refused_on_its_field(acme: dict[str, Any]) -> None:
    data = {"name": "PRs", "repositories": "not a repo", "mode": "webhook", "clearance_min": "Employee"}
    response = signed_in(acme["exec"]).post("/connectors/new/github/", data)
    assert response.status_code == 400
    assert "is not a repository name" in response.content.decode().split('id="id_repositories_error"')[1][:400]
    assert not Connector.objects.exists()


def test_an_edit_refused_by_the_source_keeps_the_old_secrets_too(acme: dict[str, Any], slack: FakeSlack) -> None:
    client = signed_in(acme["exec"])
    client.post("/connectors/new/slack/", slack_form(slack))
    connector = Connector.objects.get()
    edit = slack_form(slack, channels="C111\nG0PRIVATE1 handbook", signing_secret="a-new-signing-secret", bot_token="")
    response = client.post(f"/connectors/{connector.pk}/edit/", edit)
    assert response.status_code == 400
    assert "private Slack channel" in response.content.decode().split('id="id_channels_error"')[1][:600]
    connector.refresh_from_db()
    # One change or none: the new signing secret was rolled back with the refused channels.
    assert connector.credentials["signing_secret"] == SIGNING_SECRET
    assert connector.config["channels"] == ["C06NRA6JLER", "C111"]


def test_slack_in_socket_mode_says_what_to_run_instead_of_a_url(acme: dict[str, Any], slack: FakeSlack) -> None:
    data = slack_form(slack, mode="socket", signing_secret="", app_token="xapp-1-A111-socket-token")
    response = signed_in(acme["exec"]).post("/connectors/new/slack/", data, follow=True)
    html = response.content.decode()
    assert "python manage.py slack_socket_mode" in html and "data-webhook-url" not in html
    assert Connector.objects.get().credentials["app_token"] == "xapp-1-A111-socket-token"

"""Setting up a Slack connector: what Slack says about each channel decides where it may go."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from support import assert_envelope
from support.slack_workspace import BOT_TOKEN, SIGNING_SECRET, FakeSlack, fixture, sign

from connectors.models import Connector
from connectors.registry import source_for
from connectors.services.connectors import connector_test
from connectors.sources.slack.source import SlackSource
from cortex_site.errors import CortexError, Unprocessable
from memories.models import Memory

pytestmark = pytest.mark.django_db

PRIVATE = "G0PRIVATE1"


def test_channels_are_looked_up_for_names_and_privacy(
    acme: dict[str, Any], make_slack_connector: Callable[..., Connector]
) -> None:
    connector = make_slack_connector(
        acme["exec"], channels=["C111", PRIVATE], config={"channel_scopes": {PRIVATE: "engineering"}}
    )
    assert connector.config["channel_names"] == {"C111": "eng", PRIVATE: "leadership"}
    assert connector.config["private_channels"] == [PRIVATE]
    assert connector.config["mode"] == "webhook"
    assert connector.credentials == {"bot_token": BOT_TOKEN, "signing_secret": SIGNING_SECRET}


@pytest.mark.parametrize(
    "scopes", [{}, {PRIVATE: "handbook"}, {PRIVATE: "public-docs"}], ids=["no-scope", "all-members", "public-docs"]
)
def test_a_private_channel_into_a_scope_everyone_reads_is_refused(
    acme: dict[str, Any], make_slack_connector: Callable[..., Connector], scopes: dict[str, str]
) -> None:
    with pytest.raises(Unprocessable) as refused:
        make_slack_connector(acme["exec"], channels=[PRIVATE], config={"channel_scopes": scopes})
    assert refused.value.error_code == "PRIVATE_CHANNEL_NEEDS_GRANTED_SCOPE"
    assert "#leadership is a private Slack channel" in refused.value.message
    assert not Connector.objects.exists()


def test_the_api_answers_the_refusal_as_an_envelope(acme: dict[str, Any], api: Any, slack: FakeSlack) -> None:
    response = api(acme["exec"]).post(
        "/api/connectors",
        {
            "kind": "slack",
            "name": "Leadership",
            "config": {"channels": [PRIVATE], "api_url": slack.api_url, "channel_scopes": {PRIVATE: "handbook"}},
            "credentials": {"bot_token": BOT_TOKEN, "signing_secret": SIGNING_SECRET},
        },
    )
    assert_envelope(response, 422, "PRIVATE_CHANNEL_NEEDS_GRANTED_SCOPE")
    assert BOT_TOKEN not in response.content.decode() and SIGNING_SECRET not in response.content.decode()
    assert not Connector.objects.exists()


@pytest.mark.parametrize(
    ("config", "credentials", "error_code"),
    [
        ({"channels": []}, {"bot_token": BOT_TOKEN, "signing_secret": SIGNING_SECRET}, "INVALID_CONFIG"),
        ({"channels": ["#general"]}, {"bot_token": BOT_TOKEN, "signing_secret": SIGNING_SECRET}, "INVALID_CONFIG"),
        ({"channels": ["C111"]}, {"signing_secret": SIGNING_SECRET}, "INVALID_CREDENTIALS"),
        ({"channels": ["C111"]}, {"bot_token": BOT_TOKEN}, "INVALID_CREDENTIALS"),
        ({"channels": ["C111"], "mode": "socket"}, {"bot_token": BOT_TOKEN}, "INVALID_CREDENTIALS"),
        ({"channels": ["C111"], "mode": "rtm"}, {"bot_token": BOT_TOKEN}, "INVALID_CONFIG"),
        (
            {"channels": ["C111"], "channel_scopes": {"C999": "engineering"}},
            {"bot_token": BOT_TOKEN, "signing_secret": "s"},
            "INVALID_CONFIG",
        ),
        (
            {"channels": ["C111"], "channel_scopes": {"C111": "nope"}},
            {"bot_token": BOT_TOKEN, "signing_secret": "s"},
            "UNKNOWN_SCOPE",
        ),
        ({"channels": ["C404"]}, {"bot_token": BOT_TOKEN, "signing_secret": SIGNING_SECRET}, "SOURCE_REFUSED"),
        ({"channels": ["C111"]}, {"bot_token": "xoxb-wrong", "signing_secret": SIGNING_SECRET}, "SOURCE_REFUSED"),
    ],
)
def test_bad_configuration_is_refused_with_a_reason(
    acme: dict[str, Any],
    make_slack_connector: Callable[..., Connector],
    config: dict[str, Any],
    credentials: dict[str, str],
    error_code: str,
) -> None:
    with pytest.raises(CortexError) as refused:  # UNKNOWN_SCOPE is a NotFound, the others ValidationFailed
        make_slack_connector(acme["exec"], config=config, credentials=credentials)  # config's channels win
    assert refused.value.error_code == error_code
    assert not Connector.objects.exists()


def test_test_connection_names_the_workspace(acme: dict[str, Any], make_slack_connector: Callable[..., Connector]) -> None:
    from support import principal

    connector = make_slack_connector(acme["exec"])
    result = connector_test(principal=principal(acme["exec"]), connector_id=connector.pk)
    assert result.ok
    assert result.message == "Connected to the Slack workspace Acme as cortex; 2 channels readable."


def test_source_reads_socket_mode_config(acme: dict[str, Any], make_slack_connector: Callable[..., Connector]) -> None:
    connector = make_slack_connector(
        acme["exec"], config={"mode": "socket"}, credentials={"bot_token": BOT_TOKEN, "app_token": "xapp-1-test"}
    )
    assert connector.config["mode"] == "socket"
    source = source_for(connector)
    assert isinstance(source, SlackSource)
    assert source.channels == ["C06NRA6JLER", "C111"]


def test_adding_a_private_channel_later_is_refused_the_same_way(
    acme: dict[str, Any],
    api: Any,
    client: Any,
    slack: FakeSlack,
    make_slack_connector: Callable[..., Connector],
    django_capture_on_commit_callbacks: Any,
    make_member: Any,
    outsider: Any,
) -> None:
    connector = make_slack_connector(acme["exec"], channels=["C111"])
    before = dict(connector.config)
    response = api(acme["exec"]).patch(
        f"/api/connectors/{connector.pk}",
        {"config": {"channels": ["C111", PRIVATE], "api_url": slack.api_url, "channel_scopes": {PRIVATE: "handbook"}}},
    )
    assert_envelope(response, 422, "PRIVATE_CHANNEL_NEEDS_GRANTED_SCOPE")
    connector.refresh_from_db()
    assert connector.config == before

    # Mapped to a granted scope it is accepted, and its messages go there.
    response = api(acme["exec"]).patch(
        f"/api/connectors/{connector.pk}",
        {"config": {"channels": ["C111", PRIVATE], "api_url": slack.api_url, "channel_scopes": {PRIVATE: "engineering"}}},
    )
    assert response.status_code == 200, response.content
    connector.refresh_from_db()
    assert connector.config["private_channels"] == [PRIVATE]
    slack.post(PRIVATE, "1719209506.817929", "Board meeting moved to Thursday", user="U111")
    body = fixture("event_callback__message")
    body["event"].update(channel=PRIVATE, channel_type="group", text="Board meeting moved to Thursday", user="U111")
    raw = json.dumps(body).encode()
    with django_capture_on_commit_callbacks(execute=True):
        assert (
            client.post(
                f"/api/webhooks/slack/{connector.pk}", raw, content_type="application/json", headers=sign(raw)
            ).status_code
            == 200
        )
    memory = Memory.objects.get(source="Slack", external_id=f"{PRIVATE}:1719209506.817929")
    assert memory.scope.slug == "engineering"
    # A member without the engineering grant cannot read it, nor can another organization.
    assert api(make_member(acme["org"], "Executive")).get(f"/api/memories/{memory.pk}").status_code == 404
    assert api(outsider).get(f"/api/memories/{memory.pk}").status_code == 404
    assert api(acme["employee"]).get(f"/api/memories/{memory.pk}").status_code == 200  # granted engineering

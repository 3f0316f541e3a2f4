"""Setting up a GitHub connector: what the source refuses before anything is stored or sent."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from support import assert_envelope
from support.stub_server import StubResponse, StubServer

from connectors.models import Connector

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    "token",
    ["ghp_first-half\nghp_second-half", "github_pat_\u2026copied-from-the-docs", "ghp_abc\x00def"],
    ids=["line-break", "ellipsis", "nul"],
)
def test_a_token_that_cannot_be_sent_to_github_is_refused_without_echoing_it(
    acme: dict[str, Any], api: Callable[..., Any], stub_server: StubServer, token: str
) -> None:
    # Accepted, it would fail every call GitHub-side unseen (and a line break puts the token in the logs).
    body = {
        "kind": "github",
        "name": "Robots",
        "config": {"repositories": ["acme/robots"], "api_url": stub_server.url},
        "credentials": {"token": token},
    }

    response = api(acme["exec"]).post("/api/connectors", body)

    answer = assert_envelope(response, 422, "INVALID_CREDENTIALS")
    assert "token" in answer["message"] and token not in json.dumps(answer)
    assert not Connector.objects.filter(organization=acme["org"]).exists()
    assert stub_server.received == []


def test_test_connection_says_when_a_repository_is_not_visible(
    acme: dict[str, Any], api: Callable[..., Any], make_github: Callable[..., Connector], stub_server: StubServer
) -> None:
    connector = make_github(acme["exec"], repositories=["acme/robots"])
    stub_server.route("GET", "/user", StubResponse(json={"login": "robot"}))
    stub_server.route("GET", "/repos/acme/robots", StubResponse(status=404, json={"message": "Not Found"}))

    answer = api(acme["exec"]).post(f"/api/connectors/{connector.pk}/test", {}).json()

    assert answer["ok"] is False and "404" in answer["message"] and "acme/robots" in answer["message"]
    assert len(stub_server.requests_to("/repos/acme/robots")) == 1


def test_test_connection_says_when_api_url_is_not_githubs_api(
    acme: dict[str, Any], api: Callable[..., Any], make_github: Callable[..., Connector], stub_server: StubServer
) -> None:
    # A GitHub Enterprise Server address without /api/v3 answers its sign-in page.
    connector = make_github(acme["exec"])
    page = StubResponse(body=b"<!DOCTYPE html><title>Sign in</title>", headers={"Content-Type": "text/html"})
    stub_server.route("GET", r"/.*", page)

    answer = api(acme["exec"]).post(f"/api/connectors/{connector.pk}/test", {}).json()

    assert answer["ok"] is False and "api_url" in answer["message"] and "None" not in answer["message"]

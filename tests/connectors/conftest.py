"""Fixtures for connector tests: a GitHub connector configured through the service."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from github_webhooks import WEBHOOK_SECRET
from support.stub_server import StubServer

from connectors.models import Connector
from connectors.services.connectors import connector_create
from memories.access import Principal
from memories.models import Membership


@pytest.fixture
def make_github(stub_server: StubServer) -> Callable[..., Connector]:
    """`make_github(admin_membership, repositories=[...], **options)` → a GitHub connector pointed at the stub."""

    def make(
        membership: Membership,
        *,
        repositories: list[str] | None = None,
        token: str | None = "ghp_test-token-not-real",
        mode: str = "webhook",
        scope: str | None = "engineering",
        **options: Any,
    ) -> Connector:
        credentials: dict[str, Any] = {"webhook_secret": WEBHOOK_SECRET}
        if token:
            credentials["token"] = token
        created = connector_create(
            principal=Principal(membership),
            kind="github",
            name=options.pop("name", "Robots"),
            config={
                "repositories": repositories or ["robvanderleek/create-issue-branch"],
                "api_url": stub_server.url,
                "mode": mode,
            },
            credentials=credentials,
            scope=scope,
            **options,
        )
        return created.connector

    return make


@pytest.fixture
def post_github(django_capture_on_commit_callbacks: Any) -> Callable[..., Any]:
    """Post a signed delivery as GitHub would; what the view enqueues on commit runs (eagerly) before it returns."""
    from github_webhooks import post_github as post

    def deliver(*args: Any, **kwargs: Any) -> Any:
        with django_capture_on_commit_callbacks(execute=True):
            return post(*args, **kwargs)

    return deliver

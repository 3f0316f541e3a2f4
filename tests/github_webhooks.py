"""GitHub test helpers: recorded payloads, signatures, posting a delivery (import as `from github_webhooks import ...`)."""

from __future__ import annotations

import hashlib
import hmac
import json
import uuid
from pathlib import Path
from typing import Any

from django.test import Client

from connectors.models import Connector

GITHUB_FIXTURES = Path(__file__).parent / "connectors" / "github" / "fixtures"
WEBHOOK_SECRET = "test-webhook-secret-not-real"


def github_fixture(name: str) -> bytes:
    """A recorded payload, byte for byte."""
    return (GITHUB_FIXTURES / name).read_bytes()


def github_json(name: str) -> dict[str, Any]:
    return json.loads(github_fixture(name))


def github_signature(body: bytes, secret: str = WEBHOOK_SECRET) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def post_github(
    connector: Connector,
    body: bytes,
    *,
    event: str = "pull_request",
    delivery: str | None = None,
    signature: str | None = None,
    client: Client | None = None,
) -> Any:
    headers = {
        "X-GitHub-Event": event,
        "X-GitHub-Delivery": delivery or str(uuid.uuid4()),
        "X-Hub-Signature-256": github_signature(body) if signature is None else signature,
    }
    if signature == "":
        headers.pop("X-Hub-Signature-256")
    return (client or Client()).post(
        f"/api/webhooks/github/{connector.pk}", data=body, content_type="application/json", headers=headers
    )

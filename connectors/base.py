"""The Source contract every connector kind implements (see sources/github/ for a full example).

A source is built per connector by `registry.source_for(connector)`. Pull sources answer
`fetch_page(checkpoint, limit=..., first_run_since=...)` with a `Page`; push sources verify and
parse webhook deliveries and turn a stored delivery's payload into items. The framework does the
rest: upserting items into memories as the connector, checkpoints, runs, errors and audit.
Every outbound call lives in the source's client.py (official SDK, timeout, `config["api_url"]`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:
    from connectors.models import Connector
    from memories.models import Organization


@dataclass(frozen=True)
class SourceItem:
    """One thing at the source that becomes (or updates) one memory."""

    external_id: str
    title: str
    content: str
    source_url: str = ""
    author_name: str = ""
    author_email: str = ""  # links to a member when it matches
    valid_from: datetime | None = None
    category: str = "note"
    tags: tuple[str, ...] = ()
    scope: str | None = None  # per-channel / per-repository override, else the connector's scope
    deleted: bool = False  # True: redact the item's memory ("deleted in <Source>")
    # A note for the run about this item that did not stop it being stored
    # (e.g. "changed files could not be fetched: 403 ..."); recorded in the run's failures.
    warning: str = ""


@dataclass(frozen=True)
class Page:
    items: list[SourceItem]
    checkpoint: dict[str, Any]  # the cursor to save with these items (same transaction)
    done: bool  # no more pages for this run
    total_hint: int | None = None  # remaining items when the source tells (progress/ETA)
    failures: list[tuple[str, str]] = field(default_factory=list)  # (external_id, reason) unreadable items


@dataclass(frozen=True)
class ParsedDelivery:
    """What a push source makes of one verified webhook request."""

    delivery_id: str
    event: str
    payload: dict[str, Any] = field(default_factory=dict)
    ignored: bool = False
    reason: str = ""  # why it is ignored (recorded on the Delivery and in the audit log)
    immediate_response: dict[str, Any] | None = None  # answered as is (Slack's url_verification challenge)


class Source:
    """Base class: one instance per connector."""

    kind: ClassVar[str]
    label: ClassVar[str]  # "GitHub", "Slack", ... = MemoryDraft.source
    default_cap: ClassVar[int | None] = None
    default_first_run_days: ClassVar[int | None] = None
    default_interval_minutes: ClassVar[int] = 15
    push: ClassVar[bool] = False
    pull: ClassVar[bool] = True
    # Headers every genuine delivery carries; a signed request without one is refused (MISSING_HEADER).
    delivery_headers: ClassVar[tuple[str, ...]] = ()
    # The form field that carries the JSON of a form-encoded delivery (GitHub's "payload", its
    # webhooks' default content type); None: deliveries are JSON bodies only.
    delivery_form_field: ClassVar[str | None] = None

    def __init__(self, connector: Connector) -> None:
        self.connector = connector

    @property
    def config(self) -> dict[str, Any]:
        return self.connector.config or {}

    @property
    def credentials(self) -> dict[str, Any]:
        return self.connector.credentials

    @classmethod
    def validate_config(
        cls, config: dict[str, Any], credentials: dict[str, Any], *, organization: Organization
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """Clean config and credentials for storage; raise cortex_site.errors.ValidationFailed with an error_code."""
        return dict(config), dict(credentials)

    def test_connection(self) -> str:
        """A sentence saying what was reached; raises Permanent/RetryableSourceError."""
        raise NotImplementedError

    def uses_pull(self) -> bool:
        """Whether this connector (with its config) is synced by scheduled/manual runs of fetch_page."""
        return self.pull

    # -- pull ----------------------------------------------------------------------------------
    def fetch_page(self, checkpoint: dict[str, Any], *, limit: int, first_run_since: datetime | None) -> Page:
        raise NotImplementedError(f"{self.kind} does not pull")

    # -- push ----------------------------------------------------------------------------------
    def verify_delivery(self, *, headers: Mapping[str, str], body: bytes) -> None:
        """Raise connectors.errors.InvalidSignature unless the request is authentic (before any parsing)."""
        raise NotImplementedError(f"{self.kind} has no webhooks")

    def parse_delivery(self, *, headers: Mapping[str, str], body: bytes, payload: dict[str, Any]) -> ParsedDelivery:
        """What a verified delivery asks of Cortex; `payload` is its body, already parsed (a JSON object)."""
        raise NotImplementedError(f"{self.kind} has no webhooks")

    def items_from_delivery(self, payload: dict[str, Any]) -> list[SourceItem]:
        """Run by the worker for a stored delivery; may call the source's API through client.py."""
        raise NotImplementedError(f"{self.kind} has no webhooks")

"""Kind → source class, imported on first use (nothing is imported at start-up for side effects)."""

from __future__ import annotations

from functools import cache
from importlib import import_module
from typing import TYPE_CHECKING

from cortex_site.errors import ValidationFailed

if TYPE_CHECKING:
    from connectors.base import Source
    from connectors.models import Connector

SOURCES: dict[str, str] = {
    "github": "connectors.sources.github.source.GitHubSource",
    "slack": "connectors.sources.slack.source.SlackSource",
    "gmail": "connectors.sources.gmail.source.GmailSource",
    "drive": "connectors.sources.drive.source.DriveSource",
    "notion": "connectors.sources.notion.source.NotionSource",
}


@cache
def source_class(kind: str) -> type[Source]:
    path = SOURCES.get(kind)
    if path is None:
        raise ValidationFailed(
            f"Unknown connector kind {kind!r}; choose one of: {', '.join(sorted(SOURCES))}.", error_code="UNKNOWN_KIND"
        )
    module_name, _, class_name = path.rpartition(".")
    cls: type[Source] = getattr(import_module(module_name), class_name)
    return cls


def source_for(connector: Connector) -> Source:
    return source_class(connector.kind)(connector)

"""Checks on what a caller wants stored: text limits, tags, category, source, URL, clearance, validity.

Each either returns the cleaned value or raises a CortexError with a specific error_code.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.utils import timezone

from cortex_site.errors import NotFound, PayloadTooLarge, PermissionDenied, Unprocessable, ValidationFailed
from memories.access import CliPrincipal, Principal, clearance_names
from memories.models.memory import MAX_TAGS

_CATEGORY = re.compile(r"^[a-z][a-z0-9_-]{0,49}$")
_TAG = re.compile(r"^[^\s,]{1,50}$")


def content_hash(content: str) -> str:
    normalised = content.replace("\r\n", "\n").strip()
    return hashlib.sha256(normalised.encode()).hexdigest()


def derive_title(content: str, limit: int = 80) -> str:
    """A title from the first non-empty line, without Markdown heading marks, cut at a word."""
    first = next((line.strip() for line in content.splitlines() if line.strip()), "")
    first = re.sub(r"^(#+|[-*>]|\d+[.)])\s*", "", first).strip() or first
    if len(first) <= limit:
        return first
    cut = first[:limit].rsplit(" ", 1)[0] or first[:limit]
    return cut.rstrip(" ,.;:") + "…"


def normalise_tags(tags: Sequence[str]) -> list[str]:
    cleaned: list[str] = []
    for raw in tags:
        if not isinstance(raw, str):
            raise ValidationFailed("Tags must be strings.", error_code="INVALID_TAGS")
        tag = raw.strip().lower().lstrip("#")
        if not tag:
            continue
        if not _TAG.match(tag):
            raise ValidationFailed(
                f"Tag {raw!r} is not valid: a tag is 1–50 characters without spaces or commas.",
                error_code="INVALID_TAGS",
                details={"tag": raw},
            )
        if tag not in cleaned:
            cleaned.append(tag)
    if len(cleaned) > MAX_TAGS:
        raise ValidationFailed(f"At most {MAX_TAGS} tags.", error_code="INVALID_TAGS")
    return cleaned


def clean_category(category: str | None) -> str:
    value = (category or "note").strip().lower()
    if not _CATEGORY.match(value):
        raise ValidationFailed(
            f"Category {category!r} is not valid: a word of lowercase "
            "letters, digits, '-' or '_' (e.g. decision, policy, incident).",
            error_code="INVALID_CATEGORY",
        )
    return value


def clean_source_url(url: str) -> str:
    url = (url or "").strip()
    if not url:
        return ""
    try:
        parts = urlsplit(url)
    except ValueError:  # a bracketed host that is not an IPv6 address ("http://[x")
        parts = None
    if parts is None or parts.scheme not in {"http", "https"} or not parts.netloc or len(url) > 2000:
        raise ValidationFailed("source_url must be an http(s) URL of at most 2,000 characters.", error_code="INVALID_SOURCE_URL")
    return url


def clean_source(source: str) -> str:
    value = (source or "").strip()
    # Printable ASCII: a source is a system's name, and the rule is one the OpenAPI schema can state exactly.
    if not value or len(value) > 50 or not (value.isascii() and value.isprintable()):
        raise ValidationFailed(
            "source must be 1–50 printable ASCII characters (e.g. Manual, GitHub, Slack).", error_code="INVALID_SOURCE"
        )
    return value


def clearance_rank_of(principal: Principal, name: str | None, *, ladder: dict[int, str] | None = None) -> int:
    """The rank for a clearance name (default: the lowest rung); never above the principal's own.

    `ladder` is the organization's (rank → name), when the caller has already read it for a batch.
    """
    if ladder is None:
        ladder = clearance_names(principal.organization_id)
    if name is None or name == "":
        return min(ladder) if ladder else 0
    for rank, rung in ladder.items():
        if rung.lower() == str(name).strip().lower():
            if rank > principal.clearance_rank:
                raise PermissionDenied(
                    f"You cannot store a memory at clearance {rung}: it is above your own ({principal.clearance}).",
                    error_code="CLEARANCE_ABOVE_OWN",
                )
            return rank
    raise NotFound(
        f"Unknown clearance {name!r}. This organization's ladder is: {' < '.join(ladder[r] for r in sorted(ladder))}.",
        error_code="UNKNOWN_CLEARANCE",
    )


def check_validity(valid_from: datetime, valid_until: datetime | None) -> None:
    for value, name in ((valid_from, "valid_from"), (valid_until, "valid_until")):
        if value is not None and timezone.is_naive(value):
            raise ValidationFailed(f"{name} must include a timezone (e.g. 2025-01-15T10:30:00Z).", error_code="INVALID_DATE")
    if valid_until is not None and valid_until <= valid_from:
        raise Unprocessable("valid_until must be after valid_from.", error_code="INVALID_VALIDITY_WINDOW")


# How far ahead of this server's clock a caller's valid_from may be (clocks drift a little).
CLOCK_SKEW = timedelta(minutes=5)


def states_provenance(principal: Principal) -> str:
    """Who may state where knowledge came from — an author other than the writer, a future valid_from:
    "import" (a member through the operator CLI), "connector" (a source's own metadata), else ""."""
    if isinstance(principal, CliPrincipal):
        return "import"
    if principal.connector is not None:
        return "connector"
    return ""


def check_provenance(principal: Principal, draft: Any) -> tuple[str, str]:
    """The author name to store and who gave it ("import", "connector" or "" for the writer's own).

    From REST, MCP and the UI a writer is the author: another person's name is refused
    (AUTHOR_NAME_NOT_ALLOWED) and their own name is the same as none; a valid_from more than
    CLOCK_SKEW in the future is refused (VALID_FROM_IN_FUTURE) — it would keep recency 1.0 and
    win recency-decided conflicts. Imports and connectors state a source's own metadata.
    """
    given_by = states_provenance(principal)
    name = (draft.author_name or "").strip()
    if name and name.lower() in {principal.user.display_name.lower(), principal.user.email.lower()}:
        name = ""
    if name and not given_by:
        raise PermissionDenied(
            "author_name can only be given by imports and connectors; a memory written here is cited as yours.",
            error_code="AUTHOR_NAME_NOT_ALLOWED",
        )
    valid_from = draft.valid_from
    if valid_from is not None and not given_by and timezone.is_aware(valid_from) and valid_from > timezone.now() + CLOCK_SKEW:
        raise Unprocessable(
            "valid_from is in the future; only imports and connectors may state a time ahead of now.",
            error_code="VALID_FROM_IN_FUTURE",
        )
    return name, given_by if name else ""


def check_text(title: str, content: str) -> None:
    if not content.strip():
        raise ValidationFailed("Content is empty.", error_code="EMPTY_CONTENT")
    if len(content) > settings.CORTEX_MAX_CONTENT_CHARS:
        raise PayloadTooLarge(
            f"Content is {len(content):,} characters; the limit is {settings.CORTEX_MAX_CONTENT_CHARS:,}.",
            error_code="CONTENT_TOO_LONG",
        )
    if len(title) > settings.CORTEX_MAX_TITLE_CHARS:
        raise PayloadTooLarge(
            f"Title is {len(title):,} characters; the limit is {settings.CORTEX_MAX_TITLE_CHARS:,}.", error_code="TITLE_TOO_LONG"
        )
    if "\x00" in content or "\x00" in title:
        raise ValidationFailed("Text must not contain NUL characters.", error_code="INVALID_TEXT")

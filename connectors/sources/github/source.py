"""GitHub: merged pull requests become memories — in real time from webhooks, or polled.

Webhook (default): `pull_request` closed-and-merged (or edited after merging) on a configured
repository is stored as a Delivery and turned into a memory by a worker; `ping` is answered
200; everything else is answered 202 and recorded as ignored. Poll mode (`config.mode =
"poll"`, for a Cortex no webhook can reach): every interval, PRs merged since the checkpoint.
Either way the changed files are fetched with the token; if that fails the memory is still
written from what GitHub sent, and the run says why.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any, ClassVar
from urllib.parse import urlsplit

from django.conf import settings
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from connectors.base import Page, ParsedDelivery, Source, SourceItem
from connectors.errors import InvalidSignature, PermanentSourceError, SourceError
from connectors.sources.github.client import DEFAULT_API_URL, ChangedFile, GitHubClient, NotFoundAtGitHub
from cortex_site.errors import ValidationFailed
from memories.services.memories import MAX_TAGS

REPOSITORY = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})/[A-Za-z0-9._-]{1,100}$")
LINKED = re.compile(r"(?i)\b(?:close[sd]?|fix(?:e[sd])?|resolve[sd]?)\s*:?\s+((?:[\w.-]+/[\w.-]+)?#\d+)")
REVERTS = re.compile(r"(?im)^\s*Reverts\s+([\w.-]+/[\w.-]+)#(\d+)\b")
# A token goes into an HTTP header: one line of printable ASCII.
TOKEN = re.compile(r"^[\x21-\x7e]+$")
MODES = ("webhook", "poll")

# What each event does. Anything not listed is answered 202 and recorded as ignored.
EVENTS: dict[str, str] = {
    "ping": "answered 200: GitHub checks the hook",
    "pull_request": "closed with merged: true (or edited after merging) on a configured repository → a memory",
}
IGNORED_EVENTS: dict[str, str] = {
    "push": "commits are not memories; their merged pull request is",
    "pull_request_review": "reviews are not stored",
    "issues": "issues are not stored",
}


def _when(value: Any) -> datetime | None:
    if isinstance(value, datetime):
        return value
    return parse_datetime(value) if isinstance(value, str) and value else None


class GitHubSource(Source):
    kind: ClassVar[str] = "github"
    label: ClassVar[str] = "GitHub"
    default_cap: ClassVar[int | None] = None
    default_first_run_days: ClassVar[int | None] = None  # no backfill: merged PRs from now on
    default_interval_minutes: ClassVar[int] = 5
    push: ClassVar[bool] = True
    delivery_headers: ClassVar[tuple[str, ...]] = ("X-GitHub-Event", "X-GitHub-Delivery")
    # A new GitHub webhook sends application/x-www-form-urlencoded unless told otherwise.
    delivery_form_field = "payload"
    pull: ClassVar[bool] = True

    # -- configuration ---------------------------------------------------------------------------
    @classmethod
    def validate_config(
        cls, config: dict[str, Any], credentials: dict[str, Any], *, organization: Any
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        unknown = set(config) - {"repositories", "api_url", "mode"}
        if unknown:
            raise ValidationFailed(
                f"Unknown GitHub settings: {', '.join(sorted(unknown))}; use repositories, api_url and mode.",
                error_code="UNKNOWN_FIELDS",
            )
        repositories = config.get("repositories")
        if not isinstance(repositories, list) or not repositories:
            raise ValidationFailed('List the repositories to follow, as "owner/name".', error_code="REPOSITORIES_REQUIRED")
        clean_repos: list[str] = []
        for name in repositories:
            if not isinstance(name, str) or not REPOSITORY.match(name.strip()):
                raise ValidationFailed(f'{name!r} is not a repository name like "owner/name".', error_code="INVALID_REPOSITORY")
            if name.strip().lower() not in {r.lower() for r in clean_repos}:
                clean_repos.append(name.strip())
        clean: dict[str, Any] = {"repositories": clean_repos, "mode": config.get("mode") or "webhook"}
        if clean["mode"] not in MODES:
            raise ValidationFailed('mode is "webhook" (GitHub posts events) or "poll".', error_code="INVALID_MODE")
        api_url = config.get("api_url")
        if api_url:
            parts = urlsplit(str(api_url))
            if parts.scheme not in ("http", "https") or not parts.netloc:
                raise ValidationFailed(
                    "api_url is the REST API's address, e.g. https://github.example.com/api/v3.", error_code="INVALID_API_URL"
                )
            clean["api_url"] = str(api_url).rstrip("/")
        unknown_credentials = set(credentials) - {"token", "webhook_secret"}
        if unknown_credentials:
            raise ValidationFailed(
                f"Unknown GitHub credentials: {', '.join(sorted(unknown_credentials))}; use token and webhook_secret.",
                error_code="UNKNOWN_FIELDS",
            )
        clean_credentials: dict[str, Any] = {}
        for key in ("token", "webhook_secret"):
            value = credentials.get(key)
            if value is not None and not isinstance(value, str):
                raise ValidationFailed(f"{key} must be a string.", error_code="INVALID_CREDENTIALS")
            if value and value.strip():
                clean_credentials[key] = value.strip()
        if "token" in clean_credentials and not TOKEN.match(clean_credentials["token"]):
            # Never echoed: the value is a secret, and it may be most of one.
            raise ValidationFailed(
                "The token has spaces, line breaks or characters a GitHub token never has: copy it again from GitHub.",
                error_code="INVALID_CREDENTIALS",
            )
        if clean["mode"] == "poll" and not clean_credentials.get("token"):
            raise ValidationFailed("Poll mode reads pull requests through the API: give a token.", error_code="TOKEN_REQUIRED")
        if "webhook_secret" not in clean_credentials:
            # GitHub signs deliveries with it; shown once, to paste into the hook's settings.
            clean_credentials["webhook_secret"] = secrets.token_urlsafe(32)
        return clean, clean_credentials

    # -- helpers -----------------------------------------------------------------------------------
    @property
    def repositories(self) -> list[str]:
        return list(self.config.get("repositories") or [])

    def _configured(self, full_name: str) -> bool:
        return full_name.lower() in {r.lower() for r in self.repositories}

    def client(self) -> GitHubClient | None:
        token = self.credentials.get("token")
        return GitHubClient(token=token, api_url=self.config.get("api_url") or DEFAULT_API_URL) if token else None

    def uses_pull(self) -> bool:
        return self.config.get("mode") == "poll"

    def test_connection(self) -> str:
        client = self.client()
        if client is None:
            return (
                "No token: Cortex stores merged pull requests from webhook payloads, without their changed files. "
                "Paste the webhook URL and secret into each repository's Settings → Webhooks (content type application/json, "
                "event: Pull requests)."
            )
        login = client.whoami()
        for name in self.repositories:
            client.repository_visible(name)
        return (
            f"Connected as @{login}; {len(self.repositories)} repositor{'y' if len(self.repositories) == 1 else 'ies'} visible."
        )

    # -- webhooks ------------------------------------------------------------------------------------
    def verify_delivery(self, *, headers: Mapping[str, str], body: bytes) -> None:
        secret = self.credentials.get("webhook_secret") or ""
        signature = headers.get("X-Hub-Signature-256") or ""
        if not secret:
            raise InvalidSignature("This connector has no webhook secret; rotate its credentials to make one.")
        if not signature.startswith("sha256="):
            raise InvalidSignature("The X-Hub-Signature-256 header is missing; set the webhook's secret in GitHub.")
        expected = "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
        if not hmac.compare_digest(expected.encode(), signature.strip().encode()):
            raise InvalidSignature("X-Hub-Signature-256 does not match: the webhook's secret differs from the connector's.")

    def parse_delivery(self, *, headers: Mapping[str, str], body: bytes, payload: dict[str, Any]) -> ParsedDelivery:
        event = (headers.get("X-GitHub-Event") or "").strip()
        delivery_id = (headers.get("X-GitHub-Delivery") or "").strip()
        if not delivery_id:
            # GitHub always sends one; without it dedupe falls back to the body's digest.
            delivery_id = "sha256:" + hashlib.sha256(body).hexdigest()
        if event == "ping":
            return ParsedDelivery(
                delivery_id, event, immediate_response={"ok": True, "pong": True, "zen": payload.get("zen", "")}
            )
        if event != "pull_request":
            return ParsedDelivery(
                delivery_id, event, ignored=True, reason=IGNORED_EVENTS.get(event, f"{event or 'unnamed'} events are not stored")
            )
        action = payload.get("action") or ""
        pull = payload.get("pull_request") or {}
        about = payload.get("repository") or {}
        if not isinstance(pull, dict) or not isinstance(about, dict):
            reason = "the delivery is not a pull request as GitHub sends one"
            return ParsedDelivery(delivery_id, event, ignored=True, reason=reason)
        repository = about.get("full_name") or ""
        if not self._configured(repository):
            return ParsedDelivery(delivery_id, event, ignored=True, reason=f"{repository or 'the repository'} is not configured")
        if not pull.get("merged"):
            return ParsedDelivery(delivery_id, event, ignored=True, reason=f"pull request {action} without being merged")
        if action not in ("closed", "edited"):
            return ParsedDelivery(delivery_id, event, ignored=True, reason=f"pull_request {action} is not stored")
        return ParsedDelivery(delivery_id, f"{event}.{action}", payload={"repository": repository, "pull_request": pull})

    def items_from_delivery(self, payload: dict[str, Any]) -> list[SourceItem]:
        return self._items_for(payload["repository"], payload["pull_request"])

    # -- mapping --------------------------------------------------------------------------------------
    def _items_for(self, repository: str, pull: dict[str, Any]) -> list[SourceItem]:
        client = self.client()
        files: list[ChangedFile] | None = None
        warning = ""
        if client is None:
            warning = "Changed files not listed: the connector has no GitHub token."
        else:
            try:
                files = client.changed_files(repository, int(pull["number"]))
            except SourceError as exc:
                warning = f"Changed files not listed: {exc.message}"
        items = [pr_item(repository, pull, files=files, warning=warning)]
        reverted = REVERTS.search(pull.get("body") or "")
        if reverted and client is not None and self._configured(reverted.group(1)):
            # The reverted PR's memory gets a new version saying it was reverted.
            try:
                original = client.pull_payload(reverted.group(1), int(reverted.group(2)))
                if original.get("merged"):
                    items.append(pr_item(reverted.group(1), original, files=None, reverted_by=(repository, pull)))
            except SourceError as exc:
                items[0] = pr_item(
                    repository,
                    pull,
                    files=files,
                    warning=f"{warning} The reverted pull request could not be updated: {exc.message}".strip(),
                )
        return items

    # -- poll ---------------------------------------------------------------------------------------------
    def fetch_page(self, checkpoint: dict[str, Any], *, limit: int, first_run_since: datetime | None) -> Page:
        client = self.client()
        if client is None:
            raise PermanentSourceError("Polling needs a GitHub token: add one with read access to the repositories.")
        start = first_run_since or self.connector.created_at or timezone.now()
        candidates: list[tuple[datetime, str, int]] = []
        cursors: dict[str, dict[str, Any]] = {}
        for repository in self.repositories:
            cursor = dict(checkpoint.get(f"repo:{repository}") or {})
            since = _when(cursor.get("merged_since")) or start
            seen = set(cursor.get("seen") or [])  # PRs merged at exactly `since`, already stored
            cursors[repository] = {"merged_since": since.isoformat(), "seen": sorted(seen)}
            for number, merged_at in client.merged_since(repository, since):
                if merged_at == since and number in seen:
                    continue
                candidates.append((merged_at, repository, number))
        candidates.sort()
        taken = candidates[:limit]
        items: list[SourceItem] = []
        failures: list[tuple[str, str]] = []
        for merged_at, repository, number in taken:
            # Read in full (merged_by, labels, body as now): the list's copy is abridged.
            try:
                items.extend(self._items_for(repository, client.pull_payload(repository, number)))
            except NotFoundAtGitHub as exc:  # gone since it was listed: that PR only, the run goes on
                failures.append((f"{repository}#{number}", exc.message))
            cursor = cursors[repository]
            if cursor["merged_since"] != merged_at.isoformat():
                cursor.update(merged_since=merged_at.isoformat(), seen=[])
            cursor["seen"] = sorted({*cursor["seen"], number})
        done = len(candidates) <= limit
        if done:
            # Nothing left: the next run only needs PRs merged from now on (minus a minute of clock skew).
            floor = timezone.now() - timedelta(minutes=1)
            for cursor in cursors.values():
                if (_when(cursor["merged_since"]) or floor) < floor:
                    cursor.update(merged_since=floor.isoformat(), seen=[])
        new_checkpoint = {f"repo:{repository}": cursor for repository, cursor in cursors.items()}
        return Page(items=items, checkpoint=new_checkpoint, done=done, total_hint=len(candidates) - len(taken), failures=failures)


def _spelled_by_github(pull: dict[str, Any]) -> str | None:
    """The full name of the pull request's repository as GitHub answers it (its base), if given."""
    base = pull.get("base")
    repo = base.get("repo") if isinstance(base, dict) else None
    name = repo.get("full_name") if isinstance(repo, dict) else None
    return name if isinstance(name, str) else None


def pr_item(
    repository: str,
    pull: dict[str, Any],
    *,
    files: list[ChangedFile] | None,
    warning: str = "",
    reverted_by: tuple[str, dict[str, Any]] | None = None,
) -> SourceItem:
    """One merged pull request as a memory: its body, then the merge facts, then the changed files.

    The memory is named after the repository as GitHub spells it (the PR's base), whatever case the
    connector's settings or a "Reverts" line typed it in, so webhooks and polls name one PR alike."""
    canonical = _spelled_by_github(pull)
    repository = canonical if canonical and canonical.lower() == repository.lower() else repository
    number = pull.get("number")
    title = (pull.get("title") or "").strip() or f"{repository}#{number}"
    limit = settings.CORTEX_MAX_TITLE_CHARS
    title = title if len(title) <= limit else title[: limit - 1] + "…"
    body = (pull.get("body") or "").strip()
    merged_at = _when(pull.get("merged_at"))
    merged_by = (pull.get("merged_by") or {}).get("login") or ""
    author = (pull.get("user") or {}).get("login") or ""
    labels = [label.get("name", "") for label in pull.get("labels") or [] if label.get("name")]
    base = (pull.get("base") or {}).get("ref") or ""
    head = (pull.get("head") or {}).get("ref") or ""
    linked = sorted(set(LINKED.findall(body)))
    # One sentence of facts, and one of files, each naming this PR: two PRs' facts are then about
    # different subjects, so conflict detection never reads "#117" vs "#118" as a contradiction.
    ref = f"{repository}#{number}"
    facts = f"{ref} was opened by @{author or 'unknown'}" + (f" and merged by @{merged_by}" if merged_by else " and merged")
    facts += f" into {base} from {head}" if base and head else ""
    facts += f" on {merged_at.isoformat()}" if merged_at else ""
    facts += f"; labels of {ref}: {', '.join(labels)}" if labels else ""
    facts += f"; {ref} closes {', '.join(linked)}" if linked else ""
    sections = [body or "(no description)", facts + "."]
    if reverted_by is not None:
        other_repo, other = reverted_by
        sections.append(
            f"Reverted by {other_repo}#{other.get('number')} ({other.get('html_url', '')}) "
            f"on {(_when(other.get('merged_at')) or timezone.now()).isoformat()}."
        )
    if files:
        listed = ", ".join(f"{f.filename} ({f.status}, +{f.additions} −{f.deletions})" for f in files)
        total = pull.get("changed_files")
        more = total - len(files) if isinstance(total, int) else 0  # the list stops at 300
        sections.append(f"Files changed in {ref}: {listed}" + (f", and {more} more." if more > 0 else "."))
    tags = ["pull-request", *(re.sub(r"[\s,]+", "-", label.lower())[:50] for label in labels)]
    if reverted_by is not None:
        tags.insert(1, "reverted")
    # A memory has at most MAX_TAGS tags; every label is still in the facts above.
    tags = list(dict.fromkeys(tags))[:MAX_TAGS]
    return SourceItem(
        external_id=f"{repository}#{number}",
        title=title,
        content="\n\n".join(sections),
        source_url=pull.get("html_url") or "",
        author_name=f"@{author}" if author else "",
        valid_from=merged_at,
        category="pr",
        tags=tuple(tags),
        warning=warning,
    )

"""Every call Cortex makes to GitHub, through PyGithub: the connector's token, a timeout, and
`config["api_url"]` as base URL (GitHub Enterprise Server, or a loopback stub in tests).

PyGithub's own retry (which sleeps inside the call on rate limits) is off: a rate limit becomes
a RetryableSourceError with the reset time, so the framework shares the wait through Redis and
the worker is free meanwhile. Errors are sentences saying what to fix, never the token.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

import requests
from django.conf import settings
from github import Auth, Github, GithubException, RateLimitExceededException
from github.PullRequest import PullRequest

from connectors.errors import PermanentSourceError, RetryableSourceError

DEFAULT_API_URL = "https://api.github.com"
# GitHub: when a rate limit answer says neither Retry-After nor a reset time, wait at least a minute.
RATE_LIMIT_WAIT = 60.0
NOT_THE_API = (
    "The API address did not answer as GitHub's REST API does: check api_url (GitHub Enterprise Server: https://<host>/api/v3)."
)
T = TypeVar("T")


class NotFoundAtGitHub(PermanentSourceError):
    """A 404: permanent for that object; whether it stops the connector is the caller's call."""


@dataclass(frozen=True)
class ChangedFile:
    filename: str
    status: str
    additions: int
    deletions: int


def _retry_after(headers: dict[str, str] | None) -> float | None:
    headers = {k.lower(): v for k, v in (headers or {}).items()}
    if headers.get("retry-after", "").strip().isdigit():
        return float(headers["retry-after"])
    reset = headers.get("x-ratelimit-reset", "").strip()
    if reset.isdigit():
        return max(1.0, float(reset) - time.time())
    return None


class GitHubClient:
    def __init__(self, *, token: str | None, api_url: str | None = None, what: str = "") -> None:
        self.api_url = (api_url or DEFAULT_API_URL).rstrip("/")
        self.github = Github(
            auth=Auth.Token(token) if token else None,
            base_url=self.api_url,
            timeout=int(settings.CORTEX_CONNECTOR_HTTP_TIMEOUT),
            retry=None,
            seconds_between_requests=None,
            seconds_between_writes=None,
            per_page=50,
            lazy=True,  # objects are fetched when read, so a call names exactly the endpoint it needs
        )
        self.what = what

    def call(self, action: Callable[[], T], *, about: str) -> T:
        """Run one SDK call (or a few), turning GitHub's answers into the framework's two error kinds."""
        try:
            return action()
        except RateLimitExceededException as exc:
            wait = _retry_after(exc.headers) or RATE_LIMIT_WAIT
            raise RetryableSourceError(f"GitHub's rate limit was reached while {about}.", retry_after=wait) from None
        except GithubException as exc:
            raise self._translate(exc, about) from None
        except (requests.Timeout, requests.ConnectionError):
            raise RetryableSourceError(f"GitHub did not answer in time while {about}.") from None
        except (TypeError, AttributeError, KeyError, ValueError):
            # The SDK could not read the answer as GitHub's (a JSON object for a list, a web page): the
            # address is not GitHub's API — a proxy, a sign-in page, Enterprise Server without /api/v3.
            raise PermanentSourceError(f"{NOT_THE_API} (while {about})") from None

    def _translate(self, exc: GithubException, about: str) -> Exception:
        status = exc.status
        if status == 401:
            return PermanentSourceError(
                "GitHub refused the token (401 Bad credentials): it was revoked or has expired. "
                "Create a new token with read access to the repositories and rotate the connector's credentials."
            )
        if status in (403, 429):
            wait = _retry_after(exc.headers) or RATE_LIMIT_WAIT
            lowered = {k.lower(): v for k, v in (exc.headers or {}).items()}
            # 429, a secondary rate limit (403 + Retry-After) or the primary one (403 + 0 remaining).
            if status == 429 or "retry-after" in lowered or lowered.get("x-ratelimit-remaining") == "0":
                return RetryableSourceError(f"GitHub asked Cortex to slow down while {about}.", retry_after=wait)
            return PermanentSourceError(
                f"GitHub refused access while {about} (403): give the token read access to the repository "
                "(Contents and Pull requests: read) and rotate the connector's credentials."
            )
        if status == 404:
            return NotFoundAtGitHub(
                f"GitHub found nothing while {about} (404): check the repository name, or give the token access to it."
            )
        if status >= 500:
            return RetryableSourceError(f"GitHub had a server error ({status}) while {about}.")
        return PermanentSourceError(f"GitHub refused the request while {about} ({status}).")

    # -- calls -------------------------------------------------------------------------------------
    def whoami(self) -> str:
        login = self.call(lambda: self.github.get_user().login, about="checking the token")
        if not isinstance(login, str) or not login:  # a 200 that is not JSON (a web page, a proxy)
            raise PermanentSourceError(NOT_THE_API)
        return login

    def repository_visible(self, full_name: str) -> str:
        # raw_data reads the repository: a lazy object's full_name comes from its address, unread.
        return self.call(
            lambda: str(self.github.get_repo(full_name).raw_data.get("full_name") or full_name), about=f"opening {full_name}"
        )

    def changed_files(self, full_name: str, number: int, *, limit: int = 300) -> list[ChangedFile]:
        def fetch() -> list[ChangedFile]:
            pull = self.github.get_repo(full_name).get_pull(number)
            files: list[ChangedFile] = []
            for item in pull.get_files():
                files.append(ChangedFile(item.filename, item.status, item.additions, item.deletions))
                if len(files) >= limit:
                    break
            return files

        return self.call(fetch, about=f"fetching the changed files of {full_name}#{number}")

    def pull_payload(self, full_name: str, number: int) -> dict[str, Any]:
        """One pull request as the REST API gives it (the same shape as a webhook's pull_request)."""
        return self.call(
            lambda: dict(self.github.get_repo(full_name).get_pull(number).raw_data),
            about=f"fetching {full_name}#{number}",
        )

    def merged_since(self, full_name: str, since: datetime) -> Iterator[tuple[int, datetime]]:
        """(number, merged_at) of the repository's PRs merged at or after `since`, newest update first.

        Closed PRs are listed by last update (descending), so the walk stops at the first one
        updated before `since`: a PR merged after `since` was necessarily updated after it. Only
        the list is read here; the PRs a page takes are then read one by one (pull_payload).
        """
        pulls = self.call(
            lambda: self.github.get_repo(full_name).get_pulls(state="closed", sort="updated", direction="desc"),
            about=f"listing the pull requests of {full_name}",
        )
        iterator = iter(pulls)
        while True:
            pull: PullRequest | None = self.call(lambda: next(iterator, None), about=f"listing the pull requests of {full_name}")
            if pull is None:
                return
            if pull.updated_at is not None and pull.updated_at < since:
                return
            if pull.merged_at is not None and pull.merged_at >= since:
                yield pull.number, pull.merged_at

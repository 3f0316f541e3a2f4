"""What the Gmail and Drive clients share: building a google-api-python-client service from a
connector's credentials and endpoint, and turning Google's failures into the framework's two kinds.

Credentials are either OAuth user credentials (`refresh_token`, `client_id`, `client_secret`,
optionally a current `token` and a `token_uri` override: google-auth's `authorized_user` format)
or, for Workspace admins, a service account key (`type: service_account`, `client_email`,
`private_key`, `token_uri`) with domain-wide delegation acting as `subject` (the user whose mail
or files are read). The access token is obtained by google-auth against `token_uri` through the
same HTTP layer, so a revoked grant or a missing delegation surfaces here as a RefreshError.
Discovery documents are the ones the library ships (`static_discovery=True`): building a service never touches the network.
"""

from __future__ import annotations

import email.utils
import json
import ssl
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, TypeVar

import google.auth.credentials
import google_auth_httplib2
import httplib2
from google.auth.exceptions import RefreshError, TransportError
from google.oauth2 import service_account
from google.oauth2.credentials import Credentials
from googleapiclient.discovery import build
from googleapiclient.errors import HttpError

from connectors.errors import PermanentSourceError, RetryableSourceError
from cortex_site.errors import ValidationFailed

DEFAULT_TOKEN_URI = "https://oauth2.googleapis.com/token"  # noqa: S105 - an address, not a secret
TIMEOUT_SECONDS = 30.0
T = TypeVar("T")

# 403 reasons that mean "slow down", not "forbidden" (Google answers quota problems with 403).
_RATE_LIMIT_REASONS = frozenset({"rateLimitExceeded", "userRateLimitExceeded", "quotaExceeded", "dailyLimitExceeded"})
# 403 reasons Drive gives for one file it will not hand over (too large to export, export or
# download disabled by its owner): that file's problem, not the account's access.
_FILE_REFUSAL_REASONS = frozenset({"exportSizeLimitExceeded", "cannotExportFile", "cannotDownloadFile", "fileNotDownloadable"})


class NotFound(Exception):
    """The API answered 404 for one object (a deleted thread or file, an expired history id)."""


USER_KEYS = frozenset({"token", "refresh_token", "client_id", "client_secret", "token_uri"})
SERVICE_ACCOUNT_KEYS = frozenset(
    {"type", "client_email", "private_key", "private_key_id", "token_uri", "subject", "project_id", "client_id"}
)


def clean_credentials(credentials: dict[str, Any], *, product: str, needs_subject: bool) -> dict[str, str]:
    """The credential keys Cortex keeps, checked enough to fail at setup rather than at the first run."""
    if credentials.get("type") == "service_account":
        secret = {key: str(value) for key, value in credentials.items() if key in SERVICE_ACCOUNT_KEYS and value}
        missing = [key for key in ("client_email", "private_key") if not secret.get(key)]
        if needs_subject and not secret.get("subject"):
            missing.append("subject")
        if missing:
            raise ValidationFailed(
                f"The service account key for {product} lacks {', '.join(missing)}"
                + (" (subject: the user whose mailbox is read, by domain-wide delegation)" if "subject" in missing else "")
                + ".",
                error_code="MISSING_CREDENTIALS",
                details={"fields": missing},
            )
        secret.setdefault("token_uri", DEFAULT_TOKEN_URI)
        try:
            service_account.Credentials.from_service_account_info(secret, scopes=[])  # type: ignore[no-untyped-call]
        except (ValueError, TypeError) as exc:
            raise ValidationFailed(
                "The service account's private_key could not be read "
                f"({type(exc).__name__}): paste the key file's JSON as it is.",
                error_code="INVALID_CREDENTIALS",
                details={"field": "private_key"},
            ) from None
        return secret
    secret = {key: str(value) for key, value in credentials.items() if key in USER_KEYS and value}
    if not secret.get("refresh_token") and not secret.get("token"):
        raise ValidationFailed(
            f"{product} needs an OAuth refresh token (with client_id and client_secret): connect the Google account, "
            "paste the authorized-user JSON, or a service account key with domain-wide delegation.",
            error_code="MISSING_CREDENTIALS",
            details={"field": "refresh_token"},
        )
    return secret


def credentials_from(data: dict[str, Any], *, scopes: list[str]) -> google.auth.credentials.Credentials:
    if data.get("type") == "service_account":
        info = {**data, "token_uri": data.get("token_uri") or DEFAULT_TOKEN_URI}
        try:
            return service_account.Credentials.from_service_account_info(  # type: ignore[no-untyped-call,no-any-return]
                info, scopes=scopes, subject=data.get("subject") or None
            )
        except (ValueError, TypeError, KeyError) as exc:
            raise PermanentSourceError(
                f"The stored service account key could not be read ({type(exc).__name__}): paste the key file's JSON again."
            ) from exc
    missing = [name for name in ("refresh_token", "client_id", "client_secret") if not data.get(name)]
    if missing and not data.get("token"):
        raise PermanentSourceError(
            f"The Google credentials lack {', '.join(missing)}: connect the Google account again, or paste the "
            "authorized-user JSON (refresh_token, client_id, client_secret)."
        )
    return Credentials(  # type: ignore[no-untyped-call]
        token=data.get("token") or None,
        refresh_token=data.get("refresh_token") or None,
        token_uri=data.get("token_uri") or DEFAULT_TOKEN_URI,
        client_id=data.get("client_id") or None,
        client_secret=data.get("client_secret") or None,
        scopes=scopes,
    )


def build_service(
    api: str,
    version: str,
    *,
    credentials: google.auth.credentials.Credentials,
    api_url: str | None,
    timeout: float | None = None,
) -> Any:
    """A google-api-python-client resource whose requests (and token refreshes) go through httplib2
    with a timeout, to `api_url` when the connector sets one."""
    http = google_auth_httplib2.AuthorizedHttp(credentials, http=httplib2.Http(timeout=timeout or TIMEOUT_SECONDS))
    options = {"api_endpoint": api_url.rstrip("/") + "/"} if api_url else None
    return build(api, version, http=http, static_discovery=True, cache_discovery=False, client_options=options)


def execute(request: Callable[[], T], *, what: str, product: str) -> T:
    """Run one API call; NotFound for a 404, Retryable for timeouts/5xx/429/rate-limit 403s,
    Permanent (a sentence saying what to fix) for refused credentials and other 4xx."""
    try:
        return request()
    except HttpError as exc:
        status = int(exc.resp.status)
        reason, message = _error_detail(exc)
        if status == 404:
            raise NotFound(what) from exc
        retry_after = retry_after_seconds(exc.resp.get("retry-after"))
        if status == 429 or status >= 500 or (status == 403 and reason in _RATE_LIMIT_REASONS):
            raise RetryableSourceError(
                f"{product} answered {status} to {what} ({message or reason}).", retry_after=retry_after
            ) from exc
        if status == 401:
            raise PermanentSourceError(
                f"{product} refused the connector's Google authorization (401) while reading {what}: "
                "reconnect the Google account in the connector's settings."
            ) from exc
        if status == 403 and reason in _FILE_REFUSAL_REASONS:
            raise PermanentSourceError(f"{product} refused {what} (403: {message or reason}).") from exc
        if status == 403:
            raise PermanentSourceError(
                f"{product} forbade reading {what} (403: {message or reason}): check that the Google account granted "
                f"read access to {product} and that the API is enabled for the OAuth client."
            ) from exc
        raise PermanentSourceError(f"{product} refused {what} ({status}: {message or reason}).") from exc
    except RefreshError as exc:
        if _refresh_is_transient(exc):
            raise RetryableSourceError(f"Google's token endpoint failed while refreshing access for {product}.") from exc
        raise PermanentSourceError(
            f"Google refused to refresh the connector's access to {product} ({_refresh_reason(exc)}): the authorization "
            "was revoked or has expired; reconnect the Google account in the connector's settings."
        ) from exc
    except (TransportError, httplib2.HttpLib2Error, TimeoutError, ConnectionError, ssl.SSLError, OSError) as exc:
        raise RetryableSourceError(f"{product} could not be reached for {what} ({type(exc).__name__}).") from exc


def retry_after_seconds(value: str | None) -> float | None:
    """Retry-After as seconds: either a number or an HTTP date."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


def _error_detail(exc: HttpError) -> tuple[str, str]:
    try:
        body = json.loads(exc.content.decode("utf-8", "replace")) if exc.content else {}
    except ValueError:
        return "", ""
    error = body.get("error") if isinstance(body, dict) else None
    if not isinstance(error, dict):
        return "", ""
    reasons = [str(item.get("reason", "")) for item in error.get("errors") or [] if isinstance(item, dict)]
    return (reasons[0] if reasons else str(error.get("status", ""))), str(error.get("message", ""))[:200]


def _refresh_reason(exc: RefreshError) -> str:
    args = exc.args
    if len(args) > 1 and isinstance(args[1], dict) and args[1].get("error"):
        return str(args[1]["error"])
    return str(args[0]).split(":", 1)[0] if args else "refused"


def _refresh_is_transient(exc: RefreshError) -> bool:
    if getattr(exc, "retryable", False):
        return True
    # google-auth marks any non-JSON answer to a user credential's refresh as final, whatever its
    # status. Google refuses a grant with a JSON error (RFC 6749 §5.2): an HTML or empty answer is an
    # outage page (a 502 from Google or a proxy), not a revoked authorization.
    args = exc.args
    return len(args) == 1 and isinstance(args[0], str) and (not args[0].strip() or args[0].lstrip().startswith("<"))

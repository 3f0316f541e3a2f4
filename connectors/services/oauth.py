"""Connecting a connector through the provider's OAuth consent: "Connect Google account" (Gmail,
Drive) and "Connect Notion workspace" (a Notion public integration).

`oauth_start` keeps what the callback needs (the OAuth client, the PKCE verifier, the redirect
URI, which connector — or, for a new one, its settings) in the cache for a few minutes, encrypted
with the connector key, under a random nonce; the `state` sent to the provider is that nonce,
signed with the secret key and timestamped. `oauth_complete` accepts a state only when its
signature holds, it is younger than CORTEX_OAUTH_STATE_SECONDS, the pending sign-in still exists
and is taken now (deleting it is atomic in Redis, so a state works once), it started in this
browser session (the hash of a per-session secret must match) and the same admin of the same
organization is signed in. Only then is the code exchanged; the token it brings is stored through
the ordinary services (`connector_create`, `connector_rotate_credentials`), encrypted, and never
appears in an answer, a log line, an audit detail or an error message.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.core import signing
from django.core.cache import cache
from django.db import transaction

from audit.models import AuditEvent
from audit.services import record
from connectors import crypto
from connectors.errors import RetryableSourceError
from connectors.models import Connector
from connectors.selectors import access_connector
from connectors.services.connectors import (
    _clean_name,
    _clearance,
    _scope_for,
    connector_create,
    connector_rotate_credentials,
    require_admin,
)
from connectors.sources.gmail import google_oauth
from connectors.sources.gmail.google_http import SERVICE_ACCOUNT_KEYS
from connectors.sources.gmail.google_oauth import OAuthRefused
from connectors.sources.notion import oauth as notion_oauth
from cortex_site.errors import CortexError, ValidationFailed
from memories.access import Principal

PROVIDERS = {"gmail": "google", "drive": "google", "notion": "notion"}
PROVIDER_LABELS = {"google": "Google", "notion": "Notion"}
STATE_SALT = "connectors.oauth.state"
CACHE_PREFIX = "connectors:oauth:"
# Settings a new connector is created with once the provider answers (what connector_create takes).
DRAFT_KEYS = ("name", "config", "scope", "clearance_min", "per_run_cap", "first_run_days", "interval_minutes")

# What the provider's error codes mean for the admin; anything else gets the generic sentence.
PROVIDER_ERRORS = {
    "access_denied": "{provider} sign-in was cancelled or access was not granted, so nothing was connected.",
    "invalid_grant": "{provider} refused the sign-in code (invalid_grant): it expired or was already used. "
    "Start again with Connect.",
    "invalid_client": "{provider} refused the OAuth client (invalid_client): check the client id and secret.",
    "unauthorized_client": "{provider} refused the OAuth client (unauthorized_client): check the client id and secret.",
    "redirect_uri_mismatch": "{provider} refused the redirect address (redirect_uri_mismatch): register the callback "
    "address shown in the README with the OAuth client.",
    "no_refresh_token": "Google answered without a refresh token, so Cortex could not keep access. Start again "
    "with Connect Google account.",
    "scope_not_granted": "The Google account did not grant read access ({scope}); start again and leave the "
    "read permission checked.",
    "no_access_token": "Notion answered without an access token; start again with Connect Notion workspace.",
}
STATE_REFUSED = (
    "This sign-in link is not valid any more (it expired, was already used, or was started in another "
    "session): start again with Connect."
)


class OAuthFailed(CortexError):
    """The sign-in could not be completed; nothing changed. `connector_id` / `kind` say where to say so."""

    status = 400
    error_code = "OAUTH_FAILED"

    def __init__(self, message: str, *, error_code: str, connector_id: str | None = None, kind: str | None = None) -> None:
        super().__init__(message, error_code=error_code)
        self.connector_id = connector_id
        self.kind = kind


@dataclass(frozen=True)
class OAuthStarted:
    authorize_url: str
    provider: str


@dataclass(frozen=True)
class OAuthConnected:
    connector: Connector
    created: bool
    provider: str


def provider_of(kind: str) -> str | None:
    return PROVIDERS.get(kind)


def client_from_environment(provider: str) -> bool:
    """Whether the instance has an OAuth client of its own for this provider (then the form may leave it empty)."""
    if provider == "google":
        return bool(settings.CORTEX_GOOGLE_OAUTH_CLIENT_ID and settings.CORTEX_GOOGLE_OAUTH_CLIENT_SECRET)
    return bool(settings.CORTEX_NOTION_OAUTH_CLIENT_ID and settings.CORTEX_NOTION_OAUTH_CLIENT_SECRET)


def _binding_hash(binding: str) -> str:
    return hashlib.sha256(f"connectors.oauth:{binding}".encode()).hexdigest()


def _client_for(provider: str, connector: Connector | None, client_id: str, client_secret: str) -> tuple[str, str]:
    """Typed in > stored with the connector (Google: a refresh token only works with its own client) > environment."""
    if client_id and client_secret:
        return client_id, client_secret
    if client_id or client_secret:
        raise ValidationFailed(
            "Give both the OAuth client id and its secret (or leave both empty to use the configured client).",
            error_code="OAUTH_CLIENT_INCOMPLETE",
            details={"field": "client_secret" if client_id else "client_id"},
        )
    if provider == "google" and connector is not None:
        stored = connector.credentials
        if stored.get("type") != "service_account" and stored.get("client_id") and stored.get("client_secret"):
            return str(stored["client_id"]), str(stored["client_secret"])
    if client_from_environment(provider):
        if provider == "google":
            return str(settings.CORTEX_GOOGLE_OAUTH_CLIENT_ID), str(settings.CORTEX_GOOGLE_OAUTH_CLIENT_SECRET)
        return str(settings.CORTEX_NOTION_OAUTH_CLIENT_ID), str(settings.CORTEX_NOTION_OAUTH_CLIENT_SECRET)
    variable = "CORTEX_GOOGLE_OAUTH_CLIENT_ID" if provider == "google" else "CORTEX_NOTION_OAUTH_CLIENT_ID"
    raise ValidationFailed(
        f"Connecting needs an OAuth client: type its client id and secret, or set {variable} and its _SECRET for this Cortex.",
        error_code="OAUTH_CLIENT_REQUIRED",
        details={"field": "client_id"},
    )


def _validated_draft(principal: Principal, kind: str, draft: dict[str, Any]) -> dict[str, Any]:
    """A new connector's settings, checked now (name, scope, clearance) so a refusal comes before the consent screen."""
    unknown = set(draft) - set(DRAFT_KEYS)
    if unknown:
        raise ValidationFailed(f"Unknown settings: {', '.join(sorted(unknown))}.", error_code="UNKNOWN_FIELDS")
    _clean_name(draft.get("name"))
    _scope_for(principal, principal, draft.get("scope"))
    _clearance(principal, principal, draft.get("clearance_min"))
    return {key: draft.get(key) for key in DRAFT_KEYS if key in draft}


def oauth_start(
    *,
    principal: Principal,
    kind: str,
    binding: str,
    redirect_uri: str,
    connector_id: Any = None,
    draft: dict[str, Any] | None = None,
    client_id: str = "",
    client_secret: str = "",
    token_uri: str = "",
    api_url: str = "",
) -> OAuthStarted:
    """Begin the consent: for an existing connector (`connector_id`) or a new one (`draft`: its settings).

    Returns the provider's authorization address to send the browser to; changes nothing stored.
    """
    require_admin(principal)
    connector = access_connector(principal, connector_id) if connector_id is not None else None
    kind = connector.kind if connector is not None else kind
    provider = provider_of(kind)
    if provider is None:
        raise ValidationFailed(f"{kind} connectors do not connect through OAuth.", error_code="OAUTH_NOT_SUPPORTED")
    if connector is None and draft is None:
        raise ValidationFailed("Give the new connector's settings.", error_code="SETTINGS_REQUIRED")
    pending: dict[str, Any] = {
        "provider": provider,
        "kind": kind,
        "organization_id": str(principal.organization_id),
        "membership_id": str(principal.membership.pk),
        "binding": _binding_hash(binding),
        "connector_id": str(connector.pk) if connector is not None else None,
        "draft": _validated_draft(principal, kind, draft or {}) if connector is None else None,
        "redirect_uri": redirect_uri,
    }
    pending["client_id"], pending["client_secret"] = _client_for(provider, connector, client_id.strip(), client_secret.strip())
    nonce = secrets.token_urlsafe(24)
    state = signing.dumps({"n": nonce}, salt=STATE_SALT)
    if provider == "google":
        stored_uri = str(connector.credentials.get("token_uri") or "") if connector is not None else ""
        pending["token_uri"] = token_uri.strip() or stored_uri or str(settings.CORTEX_GOOGLE_OAUTH_TOKEN_URI)
        pending["code_verifier"] = secrets.token_urlsafe(64)  # 86 characters: within PKCE's 43-128
        url = google_oauth.authorization_url(
            kind=kind,
            client_id=pending["client_id"],
            auth_uri=str(settings.CORTEX_GOOGLE_OAUTH_AUTH_URI),
            redirect_uri=redirect_uri,
            state=state,
            code_verifier=pending["code_verifier"],
        )
    else:
        stored_url = str((connector.config or {}).get("api_url") or "") if connector is not None else ""
        pending["api_url"] = api_url.strip() or stored_url
        url = notion_oauth.authorization_url(
            client_id=pending["client_id"], api_url=pending["api_url"] or None, redirect_uri=redirect_uri, state=state
        )
    cache.set(CACHE_PREFIX + nonce, crypto.encrypt_json(pending), timeout=settings.CORTEX_OAUTH_STATE_SECONDS)
    return OAuthStarted(authorize_url=url, provider=provider)


def _failed(principal: Principal, provider: str, reason: str, message: str, pending: dict[str, Any] | None) -> OAuthFailed:
    """Audit the failure (the reason code only) and make the error that says it on the page."""
    connector_id = (pending or {}).get("connector_id")
    kind = (pending or {}).get("kind")
    record(
        "connector.oauth_failed",
        organization=principal.organization_id,
        actor=principal.actor,
        target_type="connector" if connector_id else "",
        target_id=connector_id or "",
        outcome=AuditEvent.Outcome.ERROR,
        details={"provider": provider, "kind": kind, "reason": reason},
    )
    return OAuthFailed(message, error_code=f"OAUTH_{reason.upper()}", connector_id=connector_id, kind=kind)


def _reason(code: str) -> str:
    """A provider's error code as Cortex repeats it: lower-case letters and underscores, short."""
    cleaned = re.sub(r"[^a-z0-9_]", "", code.lower())[:40]
    return cleaned or "provider_error"


def _take_pending(principal: Principal, provider: str, binding: str, state: str) -> dict[str, Any]:
    try:
        nonce = signing.loads(state, salt=STATE_SALT, max_age=settings.CORTEX_OAUTH_STATE_SECONDS)["n"]
    except signing.SignatureExpired:
        raise _failed(principal, provider, "state_expired", STATE_REFUSED, None) from None
    except (signing.BadSignature, KeyError, TypeError):
        raise _failed(principal, provider, "invalid_state", STATE_REFUSED, None) from None
    key = CACHE_PREFIX + str(nonce)
    stored = cache.get(key)
    if stored is None:
        raise _failed(principal, provider, "state_used_or_expired", STATE_REFUSED, None)
    try:
        pending = crypto.decrypt_json(stored)
    except crypto.CredentialsUnreadable:
        raise _failed(principal, provider, "invalid_state", STATE_REFUSED, None) from None
    same_session = hmac.compare_digest(str(pending.get("binding", "")), _binding_hash(binding))
    same_admin = pending.get("organization_id") == str(principal.organization_id) and pending.get("membership_id") == str(
        principal.membership.pk
    )
    # Checked before the state is taken, so someone else holding the link cannot spend it.
    if not (same_session and same_admin and pending.get("provider") == provider):
        raise _failed(principal, provider, "state_not_this_session", STATE_REFUSED, None)
    # Whoever deletes the key took the state; a second callback with it finds nothing.
    if not cache.delete(key):
        raise _failed(principal, provider, "state_used_or_expired", STATE_REFUSED, None)
    return pending


def oauth_complete(
    *, principal: Principal, provider: str, binding: str, state: str, code: str = "", error: str = ""
) -> OAuthConnected:
    """The provider's answer: exchange the code and store the token (or raise OAuthFailed, changing nothing)."""
    require_admin(principal)
    if provider not in PROVIDER_LABELS:
        raise ValidationFailed("Unknown sign-in provider.", error_code="OAUTH_NOT_SUPPORTED")
    label = PROVIDER_LABELS[provider]
    pending = _take_pending(principal, provider, binding, state)
    if error or not code:
        reason = _reason(error or "no_code")
        message = PROVIDER_ERRORS.get(reason, "{provider} did not complete the sign-in ({reason}); nothing was connected.")
        raise _failed(principal, provider, reason, message.format(provider=label, reason=reason, scope=""), pending)
    kind = pending["kind"]
    try:
        if provider == "google":
            grant = google_oauth.exchange_code(
                kind=kind,
                client_id=pending["client_id"],
                client_secret=pending["client_secret"],
                token_uri=pending["token_uri"],
                redirect_uri=pending["redirect_uri"],
                code=code,
                code_verifier=pending["code_verifier"],
            )
            credentials: dict[str, Any] = {
                # The refresh token works only with the client that obtained it, so the client is kept with it.
                "client_id": pending["client_id"],
                "client_secret": pending["client_secret"],
                "refresh_token": grant.refresh_token,
                "token_uri": pending["token_uri"],
            }
            connected: dict[str, Any] = {"scopes": list(grant.scopes)}
        else:
            notion_grant = notion_oauth.exchange_code(
                client_id=pending["client_id"],
                client_secret=pending["client_secret"],
                api_url=pending.get("api_url") or None,
                redirect_uri=pending["redirect_uri"],
                code=code,
            )
            credentials = {"token": notion_grant.access_token}
            connected = {
                "workspace_name": notion_grant.workspace_name,
                "workspace_id": notion_grant.workspace_id,
                "bot_id": notion_grant.bot_id,
            }
    except OAuthRefused as refused:
        reason = _reason(refused.code)
        message = PROVIDER_ERRORS.get(reason, "{provider} refused the sign-in ({reason}); nothing was connected.")
        scope = google_oauth.SCOPES.get(kind, "")
        raise _failed(principal, provider, reason, message.format(provider=label, reason=reason, scope=scope), pending) from None
    except RetryableSourceError as exc:
        raise _failed(
            principal, provider, "provider_unreachable", f"{exc.message} Nothing was connected; try again.", pending
        ) from None
    return _store(principal, pending, credentials, connected)


def _store(
    principal: Principal, pending: dict[str, Any], credentials: dict[str, Any], connected: dict[str, Any]
) -> OAuthConnected:
    provider, kind = pending["provider"], pending["kind"]
    try:
        with transaction.atomic():
            if pending.get("connector_id"):
                # Whatever the connector held before (pasted JSON, a service account key) gives way to the grant.
                replaced = dict.fromkeys((*SERVICE_ACCOUNT_KEYS, "token", "access_token")) if provider == "google" else {}
                connector = connector_rotate_credentials(
                    principal=principal, connector_id=pending["connector_id"], credentials={**replaced, **credentials}
                ).connector
                created = False
            else:
                draft = pending.get("draft") or {}
                connector = connector_create(principal=principal, kind=kind, credentials=credentials, **draft).connector
                created = True
            record(
                "connector.oauth_connected",
                organization=connector.organization_id,
                actor=principal.actor,
                target_type="connector",
                target_id=connector.pk,
                details={"provider": provider, "kind": kind, "name": connector.name, "created": created, **connected},
            )
    except CortexError as exc:
        # The connector changed or went away meanwhile, or its settings are no longer allowed.
        raise _failed(principal, provider, "not_stored", exc.message, pending) from None
    return OAuthConnected(connector=connector, created=created, provider=provider)

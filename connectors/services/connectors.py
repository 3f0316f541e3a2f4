"""Connector configuration: create, update, pause, resume, delete, rotate credentials, test.

Admins only (and not through a read-only token). A connector acts as the member who installed
it, so its scope must be one that member (and the admin configuring it) may write, and its
clearance at most theirs. Credentials are validated by the source, encrypted, and never
appear in answers, logs, audit details or error messages: only the names of their keys do.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db import transaction
from django.utils import timezone

from audit.models import AuditEvent
from audit.services import record
from connectors.base import Source
from connectors.errors import PermanentSourceError, RetryableSourceError
from connectors.models import Connector, SyncRun
from connectors.registry import source_class, source_for
from connectors.selectors import access_connector
from cortex_site.errors import NotFound, PermissionDenied, Unprocessable, ValidationFailed
from memories.access import Principal, clearance_names
from memories.models import Scope
from memories.services.memories import clearance_rank_of

MAX_NAME = 150
MAX_INTERVAL_MINUTES = 7 * 24 * 60
MAX_CAP = 10_000
MAX_FIRST_RUN_DAYS = 3650
# Fields PATCH may change; credentials change only through connector_rotate_credentials.
UPDATABLE = {"name", "config", "scope", "clearance_min", "per_run_cap", "first_run_days", "interval_minutes", "status"}


@dataclass(frozen=True)
class ConfiguredConnector:
    connector: Connector
    # A secret Cortex generated (e.g. GitHub's webhook secret): shown once, to paste into the source.
    webhook_secret: str | None = None


def require_admin(principal: Principal) -> None:
    if principal.read_only:
        raise PermissionDenied("This token is read-only; it cannot configure connectors.", error_code="TOKEN_READ_ONLY")
    if not principal.is_admin:
        raise PermissionDenied("Only organization admins can configure or run connectors.", error_code="ADMIN_REQUIRED")


def _clean_name(name: Any) -> str:
    if not isinstance(name, str) or not name.strip():
        raise ValidationFailed("Give the connector a name.", error_code="NAME_REQUIRED")
    if len(name.strip()) > MAX_NAME:
        raise ValidationFailed(f"The name is at most {MAX_NAME} characters.", error_code="NAME_TOO_LONG")
    return name.strip()


def _clean_int(value: Any, field: str, *, minimum: int, maximum: int, nullable: bool) -> int | None:
    if value is None and nullable:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not minimum <= value <= maximum:
        raise ValidationFailed(
            f"{field} must be a whole number from {minimum} to {maximum}{' (or null for the default)' if nullable else ''}.",
            error_code="INVALID_NUMBER",
            details={"field": field},
        )
    return value


def _clean_dict(value: Any, field: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ValidationFailed(f"{field} must be a JSON object.", error_code="INVALID_FIELD", details={"field": field})
    return value


def _source_validated(
    cls: type[Source], config: dict[str, Any], credentials: dict[str, Any], *, organization: Any
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The source's own reading of config and credentials; what it refuses is 422 (Unprocessable).

    What each kind needs (repositories, channels, OAuth keys, ...) and what its API says about them
    is beyond the request's shape — the OpenAPI schema documents `config` and `credentials` as
    objects — so a refusal is "well-formed, cannot be processed", not malformed (400).
    """
    try:
        return cls.validate_config(config, credentials, organization=organization)
    except ValidationFailed as refused:
        raise Unprocessable(refused.message, error_code=refused.error_code, details=refused.details) from None


def _scope_for(principal: Principal, installer: Principal, slug: Any) -> Scope | None:
    if slug in (None, ""):
        return None
    scope = Scope.objects.filter(organization_id=principal.organization_id, slug=str(slug)).first()
    if scope is None or not principal.can_read_scope(scope):
        raise NotFound(f"There is no scope {slug!r} you can see.", error_code="UNKNOWN_SCOPE")
    if not principal.can_write_scope(scope) or not installer.can_write_scope(scope):
        raise PermissionDenied(
            f"The connector cannot write into {scope.slug!r}: its installer and you both need write access there.",
            error_code="SCOPE_NOT_WRITABLE",
        )
    return scope


def _clearance(principal: Principal, installer: Principal, name: Any) -> int:
    rank = clearance_rank_of(principal, None if name in (None, "") else str(name))
    if rank > installer.clearance_rank:
        raise PermissionDenied(
            "The connector's clearance cannot be above the clearance of the member it acts as.", error_code="CLEARANCE_ABOVE_OWN"
        )
    return rank


def _audit(action: str, principal: Principal, connector: Connector, **details: Any) -> None:
    record(
        action,
        organization=connector.organization_id,
        actor=principal.actor,
        target_type="connector",
        target_id=connector.pk,
        details={"kind": connector.kind, "name": connector.name, **details},
    )


def _generated_secret(given: dict[str, Any], cleaned: dict[str, Any]) -> str | None:
    secret = cleaned.get("webhook_secret")
    return secret if secret and not given.get("webhook_secret") else None


def connector_create(
    *,
    principal: Principal,
    kind: str,
    name: str,
    config: dict[str, Any] | None = None,
    credentials: dict[str, Any] | None = None,
    scope: str | None = None,
    clearance_min: str | None = None,
    per_run_cap: int | None = None,
    first_run_days: int | None = None,
    interval_minutes: int | None = None,
) -> ConfiguredConnector:
    require_admin(principal)
    cls = source_class(str(kind))
    given_credentials = _clean_dict(credentials, "credentials")
    clean_config, clean_credentials = _source_validated(
        cls, _clean_dict(config, "config"), given_credentials, organization=principal.organization
    )
    connector = Connector(
        organization_id=principal.organization_id,
        kind=cls.kind,
        name=_clean_name(name),
        config=clean_config,
        scope=_scope_for(principal, principal, scope),
        clearance_rank=_clearance(principal, principal, clearance_min),
        installed_by=principal.membership,
        per_run_cap=_clean_int(per_run_cap, "per_run_cap", minimum=1, maximum=MAX_CAP, nullable=True),
        first_run_days=_clean_int(first_run_days, "first_run_days", minimum=0, maximum=MAX_FIRST_RUN_DAYS, nullable=True),
        interval_minutes=_clean_int(
            cls.default_interval_minutes if interval_minutes is None else interval_minutes,
            "interval_minutes",
            minimum=1,
            maximum=MAX_INTERVAL_MINUTES,
            nullable=False,
        )
        or cls.default_interval_minutes,
        next_sync_at=timezone.now(),
    )
    connector.set_credentials(clean_credentials)
    with transaction.atomic():
        connector.save(force_insert=True)
        _audit(
            "connector.create",
            principal,
            connector,
            scope=connector.scope.slug if connector.scope else None,
            config=clean_config,
            credential_keys=sorted(clean_credentials),
        )
    return ConfiguredConnector(connector, _generated_secret(given_credentials, clean_credentials))


def connector_update(*, principal: Principal, connector_id: Any, changes: dict[str, Any]) -> Connector:
    """PATCH: name, config, scope, clearance_min, per_run_cap, first_run_days, interval_minutes, status (pause/resume)."""
    require_admin(principal)
    unknown = set(changes) - UPDATABLE
    if unknown:
        raise ValidationFailed(
            f"These fields cannot be changed here: {', '.join(sorted(unknown))}"
            + (" (rotate credentials with POST .../credentials)." if "credentials" in unknown else "."),
            error_code="UNKNOWN_FIELDS",
        )
    with transaction.atomic():
        connector = access_connector(principal, connector_id, for_update=True)
        installer = Principal(connector.installed_by)
        changed: dict[str, Any] = {}
        if "name" in changes:
            connector.name = changed["name"] = _clean_name(changes["name"])
        if "config" in changes:
            cls = source_class(connector.kind)
            config, credentials = _source_validated(
                cls, _clean_dict(changes["config"], "config"), connector.credentials, organization=principal.organization
            )
            connector.config = changed["config"] = config
            connector.set_credentials(credentials)
        if "scope" in changes:
            connector.scope = _scope_for(principal, installer, changes["scope"])
            changed["scope"] = connector.scope.slug if connector.scope else None
        if "clearance_min" in changes:
            connector.clearance_rank = _clearance(principal, installer, changes["clearance_min"])
            changed["clearance_min"] = clearance_names(connector.organization_id).get(connector.clearance_rank)
        for field, minimum, maximum in (
            ("per_run_cap", 1, MAX_CAP),
            ("first_run_days", 0, MAX_FIRST_RUN_DAYS),
        ):
            if field in changes:
                value = _clean_int(changes[field], field, minimum=minimum, maximum=maximum, nullable=True)
                setattr(connector, field, value)
                changed[field] = value
        if "interval_minutes" in changes:
            interval = _clean_int(
                changes["interval_minutes"], "interval_minutes", minimum=1, maximum=MAX_INTERVAL_MINUTES, nullable=False
            )
            connector.interval_minutes = changed["interval_minutes"] = interval or connector.interval_minutes
        connector.save()
        if changed:
            _audit("connector.update", principal, connector, changed=changed)
        if "status" in changes:
            status = changes["status"]
            if status == Connector.Status.PAUSED:
                _pause(principal, connector)
            elif status == Connector.Status.ACTIVE:
                _resume(principal, connector)
            else:
                raise ValidationFailed("status can be set to paused or active.", error_code="INVALID_STATUS")
    return connector


def _pause(principal: Principal, connector: Connector) -> None:
    if connector.status == Connector.Status.PAUSED:
        return
    connector.status = Connector.Status.PAUSED
    connector.save(update_fields=["status", "updated_at"])
    _audit("connector.pause", principal, connector)


def _resume(principal: Principal, connector: Connector) -> None:
    if connector.status == Connector.Status.ACTIVE:
        return
    previous = connector.status
    connector.status = Connector.Status.ACTIVE
    connector.last_error = ""
    connector.next_sync_at = timezone.now()
    connector.save(update_fields=["status", "last_error", "next_sync_at", "updated_at"])
    _audit("connector.resume", principal, connector, previous_status=previous)


def connector_pause(*, principal: Principal, connector_id: Any) -> Connector:
    require_admin(principal)
    with transaction.atomic():
        connector = access_connector(principal, connector_id, for_update=True)
        _pause(principal, connector)
    return connector


def connector_resume(*, principal: Principal, connector_id: Any) -> Connector:
    """Active again (also out of `error`, once the cause is fixed); the next dispatch syncs it."""
    require_admin(principal)
    with transaction.atomic():
        connector = access_connector(principal, connector_id, for_update=True)
        _resume(principal, connector)
    return connector


def connector_delete(*, principal: Principal, connector_id: Any) -> None:
    """Stops syncing for good: runs, checkpoints and deliveries go; the memories it wrote stay."""
    require_admin(principal)
    with transaction.atomic():
        connector = access_connector(principal, connector_id, for_update=True)
        _audit("connector.delete", principal, connector, runs=SyncRun.objects.filter(connector=connector).count())
        connector.delete()


def connector_rotate_credentials(*, principal: Principal, connector_id: Any, credentials: dict[str, Any]) -> ConfiguredConnector:
    """Replace the given credential keys (a null value removes one); the source validates the result."""
    require_admin(principal)
    given = _clean_dict(credentials, "credentials")
    if not given:
        raise ValidationFailed("Give the credentials to change.", error_code="CREDENTIALS_REQUIRED")
    with transaction.atomic():
        connector = access_connector(principal, connector_id, for_update=True)
        merged = {**connector.credentials, **given}
        merged = {key: value for key, value in merged.items() if value is not None}
        if "webhook_secret" in given and not given["webhook_secret"]:
            merged.pop("webhook_secret", None)  # an empty secret asks Cortex to generate a new one
        config, clean = _source_validated(
            source_class(connector.kind), connector.config, merged, organization=principal.organization
        )
        connector.config = config
        connector.set_credentials(clean)
        if connector.status == Connector.Status.ERROR:
            # The usual fix for an error is a new token: try again on the next dispatch.
            connector.status = Connector.Status.ACTIVE
            connector.last_error = ""
            connector.next_sync_at = timezone.now()
        connector.save()
        _audit("connector.credentials_rotate", principal, connector, credential_keys=sorted(given))
    generated = clean.get("webhook_secret") if "webhook_secret" in given and not given["webhook_secret"] else None
    return ConfiguredConnector(connector, generated)


@dataclass(frozen=True)
class ConnectionTest:
    ok: bool
    message: str


def connector_test(*, principal: Principal, connector_id: Any) -> ConnectionTest:
    """Call the source once with the stored credentials and say what happened (changes nothing)."""
    require_admin(principal)
    connector = access_connector(principal, connector_id)
    try:
        return ConnectionTest(True, source_for(connector).test_connection())
    except (PermanentSourceError, RetryableSourceError) as exc:
        return ConnectionTest(False, exc.message)


def connector_set_error(*, connector: Connector, message: str) -> None:
    """A permanent source error: the connector stops (status error) with the sentence saying what to fix."""
    Connector.objects.filter(pk=connector.pk).update(status=Connector.Status.ERROR, last_error=message, updated_at=timezone.now())
    connector.status, connector.last_error = Connector.Status.ERROR, message
    record(
        "connector.error",
        organization=connector.organization_id,
        actor=Principal.as_connector(connector).actor,
        target_type="connector",
        target_id=connector.pk,
        outcome=AuditEvent.Outcome.ERROR,
        details={"kind": connector.kind, "message": message},
    )

"""REST: /api/connectors — configure (admins), read status (members), Sync now, runs.

Thin: selectors read, services write. Credentials are accepted on create and rotation and
never answered; a webhook secret Cortex generated is answered once, on the call that made it.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from connectors import selectors
from connectors.models import Connector, SyncRun
from connectors.registry import SOURCES, source_class
from connectors.services import connectors as services
from connectors.services.sync import run_cap, sync_request
from cortex_site.api import CortexCursorPagination
from cortex_site.api_schema import error_responses, list_of
from cortex_site.errors import NotFound
from memories.access import Principal, clearance_names
from memories.api.principal import request_principal
from memories.interchange.inputs import StrictSerializer

NOT_FOUND = (404, "NOT_FOUND: no such connector in your organization (foreign and missing alike)")
FORBIDDEN = (403, "ADMIN_REQUIRED (members read status only) or TOKEN_READ_ONLY")
INVALID = (400, "VALIDATION_ERROR, UNKNOWN_KIND, UNKNOWN_FIELDS, UNKNOWN_SCOPE, INVALID_NUMBER or a source's own code")


# -- shapes -------------------------------------------------------------------------------------
class HealthOutput(serializers.Serializer):
    running_run_id = serializers.UUIDField(allow_null=True)
    progress_done = serializers.IntegerField(allow_null=True)
    progress_total = serializers.IntegerField(allow_null=True, help_text="known when the source tells how much remains")
    eta_seconds = serializers.IntegerField(allow_null=True)
    last_run_status = serializers.CharField(allow_null=True)


class ConnectorOutput(serializers.Serializer):
    id = serializers.UUIDField()
    kind = serializers.ChoiceField(choices=Connector.Kind.values)
    name = serializers.CharField()
    status = serializers.ChoiceField(choices=Connector.Status.values)
    last_error = serializers.CharField(help_text="a sentence saying what to fix; empty when all is well")
    last_synced_at = serializers.DateTimeField(allow_null=True)
    next_sync_at = serializers.DateTimeField(allow_null=True)
    scope = serializers.CharField(allow_null=True)
    clearance_min = serializers.CharField(allow_null=True)
    per_run_cap = serializers.IntegerField(allow_null=True, help_text="the cap in force (the setting, else the kind's default)")
    per_run_cap_setting = serializers.IntegerField(allow_null=True)
    first_run_days = serializers.IntegerField(allow_null=True)
    interval_minutes = serializers.IntegerField()
    webhook_url = serializers.CharField(allow_null=True, help_text="where the source posts events (push kinds)")
    health = HealthOutput()
    config = serializers.DictField(required=False, help_text="admins only; never secrets")
    cursor = serializers.DictField(required=False, help_text="admins only: every stream's saved checkpoint")
    credential_keys = serializers.ListField(child=serializers.CharField(), required=False, help_text="admins only: names only")
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()


class ConnectorCreatedOutput(ConnectorOutput):
    webhook_secret = serializers.CharField(required=False, help_text="only when Cortex generated it; shown this once")


class RunOutput(serializers.Serializer):
    id = serializers.UUIDField()
    trigger = serializers.ChoiceField(choices=SyncRun.Trigger.values)
    status = serializers.ChoiceField(choices=SyncRun.Status.values)
    created_at = serializers.DateTimeField()
    started_at = serializers.DateTimeField(allow_null=True)
    finished_at = serializers.DateTimeField(allow_null=True)
    items_seen = serializers.IntegerField()
    items_created = serializers.IntegerField()
    items_updated = serializers.IntegerField()
    items_redacted = serializers.IntegerField()
    items_skipped = serializers.IntegerField()
    items_failed = serializers.IntegerField()
    failures = serializers.ListField(
        child=serializers.DictField(),
        help_text='[{"external_id", "reason"}]; empty for a member who may not read what the connector writes '
        "(its scope at its clearance; admins only for a connector whose scope is set by rule)",
    )
    progress_done = serializers.IntegerField()
    progress_total = serializers.IntegerField(allow_null=True)
    cap = serializers.IntegerField(allow_null=True)
    error = serializers.CharField()
    checkpoint_before = serializers.DictField(required=False, help_text="admins only")
    checkpoint_after = serializers.DictField(required=False, help_text="admins only")


def present_connector(principal: Principal, connector: Connector, *, names: dict[int, str] | None = None) -> dict[str, Any]:
    names = names if names is not None else clearance_names(connector.organization_id)
    health = selectors.connector_health(connector)
    cls = source_class(connector.kind)
    body: dict[str, Any] = {
        "id": str(connector.pk),
        "kind": connector.kind,
        "name": connector.name,
        "status": connector.status,
        "last_error": connector.last_error,
        "last_synced_at": connector.last_synced_at,
        "next_sync_at": connector.next_sync_at,
        "scope": connector.scope.slug if connector.scope else None,
        "clearance_min": names.get(connector.clearance_rank),
        "per_run_cap": run_cap(connector, backfill=False),
        "per_run_cap_setting": connector.per_run_cap,
        "first_run_days": connector.first_run_days if connector.first_run_days is not None else cls.default_first_run_days,
        "interval_minutes": connector.interval_minutes,
        "webhook_url": selectors.webhook_url(connector) if cls.push else None,
        "health": {
            "running_run_id": health.running_run_id,
            "progress_done": health.progress_done,
            "progress_total": health.progress_total,
            "eta_seconds": health.eta_seconds,
            "last_run_status": health.last_run_status,
        },
        "created_at": connector.created_at,
        "updated_at": connector.updated_at,
    }
    if principal.is_admin:
        body["config"] = connector.config
        body["cursor"] = selectors.cursor_of(connector)
        body["credential_keys"] = sorted(connector.credentials)
    return body


def present_run(principal: Principal, run: SyncRun, *, item_details: bool) -> dict[str, Any]:
    """A run as the API answers it; `failures` empty unless `item_details` (selectors.sees_item_details)."""
    body = {
        name: getattr(run, name)
        for name in (
            "trigger",
            "status",
            "created_at",
            "started_at",
            "finished_at",
            "items_seen",
            "items_created",
            "items_updated",
            "items_redacted",
            "items_skipped",
            "items_failed",
            "failures",
            "progress_done",
            "progress_total",
            "cap",
            "error",
        )
    }
    body["id"] = str(run.pk)
    if not item_details:
        body["failures"] = []
    if principal.is_admin:
        body["checkpoint_before"] = run.checkpoint_before
        body["checkpoint_after"] = run.checkpoint_after
    return body


# -- inputs -------------------------------------------------------------------------------------
class ConnectorCreateInput(StrictSerializer):
    kind = serializers.ChoiceField(choices=sorted(SOURCES))
    name = serializers.CharField(max_length=150)
    scope = serializers.CharField(required=False, allow_null=True, allow_blank=True)
    clearance_min = serializers.CharField(required=False, allow_null=True, allow_blank=True)
    config = serializers.DictField(required=False, default=dict)
    credentials = serializers.DictField(required=False, default=dict, help_text="write-only; never answered")
    per_run_cap = serializers.IntegerField(required=False, allow_null=True)
    first_run_days = serializers.IntegerField(required=False, allow_null=True)
    interval_minutes = serializers.IntegerField(required=False, allow_null=True)


class ConnectorUpdateInput(StrictSerializer):
    name = serializers.CharField(required=False, max_length=150)
    scope = serializers.CharField(required=False, allow_null=True, allow_blank=True)
    clearance_min = serializers.CharField(required=False, allow_null=True, allow_blank=True)
    config = serializers.DictField(required=False)
    per_run_cap = serializers.IntegerField(required=False, allow_null=True)
    first_run_days = serializers.IntegerField(required=False, allow_null=True)
    interval_minutes = serializers.IntegerField(required=False)
    status = serializers.ChoiceField(choices=["active", "paused"], required=False, help_text="pause or resume")


class SyncInput(StrictSerializer):
    backfill = serializers.BooleanField(required=False, default=False, help_text="one run with a raised cap")


class SyncOutput(serializers.Serializer):
    run_id = serializers.UUIDField()


class CredentialsInput(StrictSerializer):
    credentials = serializers.DictField(
        allow_empty=False, help_text="keys to replace; null removes one; an empty webhook_secret makes a new one"
    )


class ConnectionTestOutput(serializers.Serializer):
    ok = serializers.BooleanField()
    message = serializers.CharField()


def _valid(serializer_class: type[serializers.Serializer], request: Request) -> dict[str, Any]:
    serializer = serializer_class(data=request.data)
    serializer.is_valid(raise_exception=True)
    return dict(serializer.validated_data)


# -- views ----------------------------------------------------------------------------------------
class ConnectorListCreateView(APIView):
    @extend_schema(
        summary="Connectors of my organization, newest first (status for members; config too for admins)",
        parameters=CortexCursorPagination.parameters(),
        responses=list_of(ConnectorOutput, "ConnectorList"),
    )
    def get(self, request: Request) -> Response:
        principal = request_principal(request)
        names = clearance_names(principal.organization_id)
        paginator = CortexCursorPagination()
        connectors = selectors.connectors_for(principal).order_by("-created_at", "-id")
        page = paginator.paginate_queryset(connectors, request, view=self) or []
        return paginator.get_paginated_response([present_connector(principal, c, names=names) for c in page])

    @extend_schema(
        summary="Add a connector (admins)",
        request=ConnectorCreateInput,
        responses={201: ConnectorCreatedOutput, **error_responses(INVALID, FORBIDDEN)},
    )
    def post(self, request: Request) -> Response:
        principal = request_principal(request)
        services.require_admin(principal)
        values = _valid(ConnectorCreateInput, request)
        created = services.connector_create(principal=principal, **values)
        body = present_connector(principal, created.connector)
        if created.webhook_secret:
            body["webhook_secret"] = created.webhook_secret
        return Response(body, status=status.HTTP_201_CREATED)


class ConnectorDetailView(APIView):
    @extend_schema(summary="One connector's status", responses={200: ConnectorOutput, **error_responses(NOT_FOUND)})
    def get(self, request: Request, connector_id: str) -> Response:
        principal = request_principal(request)
        return Response(present_connector(principal, selectors.access_connector(principal, connector_id)))

    @extend_schema(
        summary="Change config, scope, clearance, cap, interval; pause or resume (admins)",
        request=ConnectorUpdateInput,
        responses={200: ConnectorOutput, **error_responses(INVALID, FORBIDDEN, NOT_FOUND)},
    )
    def patch(self, request: Request, connector_id: str) -> Response:
        principal = request_principal(request)
        selectors.access_connector(principal, connector_id)  # 404 before 403 for a foreign id
        services.require_admin(principal)
        connector = services.connector_update(
            principal=principal, connector_id=connector_id, changes=_valid(ConnectorUpdateInput, request)
        )
        return Response(present_connector(principal, connector))

    @extend_schema(
        summary="Remove a connector: syncing stops; the memories it wrote stay (admins)",
        responses={204: None, **error_responses(FORBIDDEN, NOT_FOUND)},
    )
    def delete(self, request: Request, connector_id: str) -> Response:
        principal = request_principal(request)
        services.connector_delete(principal=principal, connector_id=connector_id)
        return Response(status=status.HTTP_204_NO_CONTENT)


class ConnectorSyncView(APIView):
    @extend_schema(
        summary="Sync now (admins): 202 with the run id, or 409 SYNC_IN_PROGRESS with the running run's id in details.run_id",
        request=SyncInput,
        responses={
            202: SyncOutput,
            **error_responses(
                FORBIDDEN, NOT_FOUND, (409, "SYNC_IN_PROGRESS (details.run_id = the running run) or CONNECTOR_PAUSED")
            ),
        },
    )
    def post(self, request: Request, connector_id: str) -> Response:
        principal = request_principal(request)
        selectors.access_connector(principal, connector_id)
        services.require_admin(principal)
        values = _valid(SyncInput, request)
        run = sync_request(principal=principal, connector_id=connector_id, backfill=values.get("backfill", False))
        return Response({"run_id": str(run.pk)}, status=status.HTTP_202_ACCEPTED)


class ConnectorRunsView(APIView):
    pagination_class = CortexCursorPagination

    @extend_schema(
        summary="A connector's runs, newest first, with counts and per-item failures",
        parameters=CortexCursorPagination.parameters(),
        responses={200: RunOutput(many=True), **error_responses(NOT_FOUND)},
    )
    def get(self, request: Request, connector_id: str) -> Response:
        principal = request_principal(request)
        paginator = self.pagination_class()
        connector = selectors.access_connector(principal, connector_id)
        page = paginator.paginate_queryset(selectors.run_history(principal, connector.pk), request, view=self) or []
        details = selectors.sees_item_details(principal, connector)
        return paginator.get_paginated_response([present_run(principal, run, item_details=details) for run in page])


class ConnectorRunDetailView(APIView):
    @extend_schema(summary="One run (poll it for progress)", responses={200: RunOutput, **error_responses(NOT_FOUND)})
    def get(self, request: Request, connector_id: str, run_id: str) -> Response:
        principal = request_principal(request)
        connector = selectors.access_connector(principal, connector_id)
        run = selectors.run_for(principal, run_id)
        if run.connector_id != connector.pk:
            raise NotFound("No such run.")
        return Response(present_run(principal, run, item_details=selectors.sees_item_details(principal, connector)))


class ConnectorCredentialsView(APIView):
    @extend_schema(
        summary="Rotate credentials (admins); answers the connector, with webhook_secret once when Cortex made a new one",
        request=CredentialsInput,
        responses={200: ConnectorCreatedOutput, **error_responses(INVALID, FORBIDDEN, NOT_FOUND)},
    )
    def post(self, request: Request, connector_id: str) -> Response:
        principal = request_principal(request)
        selectors.access_connector(principal, connector_id)
        services.require_admin(principal)
        values = _valid(CredentialsInput, request)
        result = services.connector_rotate_credentials(
            principal=principal, connector_id=connector_id, credentials=values["credentials"]
        )
        body = present_connector(principal, result.connector)
        if result.webhook_secret:
            body["webhook_secret"] = result.webhook_secret
        return Response(body)


class ConnectorTestView(APIView):
    @extend_schema(
        summary="Test the connection with the stored credentials (admins); changes nothing",
        request=None,
        responses={200: ConnectionTestOutput, **error_responses(FORBIDDEN, NOT_FOUND)},
    )
    def post(self, request: Request, connector_id: str) -> Response:
        principal = request_principal(request)
        selectors.access_connector(principal, connector_id)
        result = services.connector_test(principal=principal, connector_id=connector_id)
        return Response({"ok": result.ok, "message": result.message})

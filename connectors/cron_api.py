"""REST: `POST /api/cron/connectors` — an external scheduler runs the connector dispatcher once.

Not a user or token endpoint: the caller proves it holds the organization's cron secret
(`Authorization: Bearer <secret>`, organization named by `?organization=<slug>`), so DRF's
session and token authentication are switched off here — a cron secret is not an API token.
"""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from connectors.services.cron import cron_dispatch
from cortex_site.api_schema import error_responses


class CronDispatchView(APIView):
    authentication_classes = ()
    permission_classes = (AllowAny,)

    @extend_schema(
        operation_id="cron_connectors_dispatch",
        summary="Run the connector dispatcher once for an organization (for hosts without Celery beat)",
        parameters=[
            OpenApiParameter("organization", str, OpenApiParameter.QUERY, required=True, description="organization slug")
        ],
        request=None,
        responses={
            200: inline_serializer(
                "CronDispatch",
                fields={
                    "started": serializers.ListField(child=serializers.UUIDField(), help_text="ids of the runs started"),
                    "busy": serializers.ListField(
                        child=serializers.UUIDField(), help_text="connectors left alone: a run of theirs is still going"
                    ),
                    "reaped": serializers.ListField(
                        child=serializers.UUIDField(), help_text="runs whose worker died, marked failed (the next run resumes)"
                    ),
                },
            ),
            **error_responses((401, "INVALID_CRON_SECRET: wrong or missing secret, or unknown organization")),
        },
        tags=["connectors"],
    )
    def post(self, request: Request) -> Response:
        header = request.headers.get("Authorization", "")
        secret = header[7:].strip() if header[:7].lower() == "bearer " else ""
        report = cron_dispatch(organization_slug=str(request.query_params.get("organization", "")), secret=secret)
        return Response(report.as_dict())

    def get_authenticate_header(self, request: Request) -> str:
        return 'Bearer realm="cortex-cron"'

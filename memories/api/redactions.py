"""REST: redaction requests — ask for a memory's redaction, the review queue, decide one."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from cortex_site.api import query_choice
from cortex_site.api_schema import list_of
from memories.access import Principal
from memories.api.principal import request_principal
from memories.interchange.inputs import RequiredText, StrictSerializer
from memories.interchange.representation import iso
from memories.models import RedactionRequest
from memories.selectors.redactions import STATUS_FILTERS, redaction_requests
from memories.services import redactions as services


class RedactionRequestInput(StrictSerializer):
    reason = RequiredText(allow_blank=True, trim_whitespace=False)


class RedactionDecisionInput(StrictSerializer):
    decision = serializers.ChoiceField(choices=services.DECISIONS)
    note = serializers.CharField(required=False, allow_blank=True, max_length=1000)


class RedactionRequestOutput(serializers.Serializer):
    id = serializers.UUIDField()
    memory = serializers.DictField(help_text="{id, title, status} of the memory the request is about")
    requested_by = serializers.CharField(allow_null=True)
    reason = serializers.CharField()
    status = serializers.ChoiceField(choices=RedactionRequest.Status.values)
    decided_by = serializers.CharField(allow_null=True)
    decided_at = serializers.DateTimeField(allow_null=True)
    decision_note = serializers.CharField()
    created_at = serializers.DateTimeField()
    can_decide = serializers.BooleanField(help_text="Whether the caller may approve or decline it")


def present_request(principal: Principal, request: RedactionRequest) -> dict[str, Any]:
    memory = request.memory
    return {
        "id": str(request.pk),
        "memory": {"id": str(memory.pk), "title": memory.title, "status": memory.status},
        "requested_by": request.requested_by.email if request.requested_by else None,
        "reason": request.reason,
        "status": request.status,
        "decided_by": request.decided_by.email if request.decided_by else None,
        "decided_at": iso(request.decided_at),
        "decision_note": request.decision_note,
        "created_at": iso(request.created_at),
        "can_decide": request.status == RedactionRequest.Status.OPEN and principal.can_redact(memory),
    }


class MemoryRedactionRequestView(APIView):
    @extend_schema(
        summary="Ask the author and admins to redact a memory you may read but not redact",
        request=RedactionRequestInput,
        responses={201: RedactionRequestOutput},
        description="409 REDACTION_ALLOWED when you may redact it yourself, REDACTION_REQUEST_OPEN when your request is open, "
        "ALREADY_REDACTED; 403 TOKEN_READ_ONLY; 404 for a memory you cannot read.",
    )
    def post(self, request: Request, memory_id: str) -> Response:
        principal = request_principal(request)
        serializer = RedactionRequestInput(data=request.data)
        serializer.is_valid(raise_exception=True)
        made = services.redaction_request_create(
            principal=principal, memory_id=memory_id, reason=serializer.validated_data["reason"]
        )
        return Response(present_request(principal, made), status=status.HTTP_201_CREATED)


class RedactionRequestListView(APIView):
    @extend_schema(
        summary="The redaction review queue: requests you may decide, and your own",
        parameters=[OpenApiParameter("status", str, required=False, enum=sorted(STATUS_FILTERS), description="default: open")],
        responses=list_of(RedactionRequestOutput, "RedactionRequestList"),
    )
    def get(self, request: Request) -> Response:
        principal = request_principal(request)
        found = redaction_requests(principal, status=query_choice(request, "status", STATUS_FILTERS, default="open") or "open")
        return Response({"results": [present_request(principal, r) for r in found], "next": None})


class RedactionRequestDecideView(APIView):
    @extend_schema(
        summary="Approve (the memory is redacted with the request's reason) or decline a redaction request",
        request=RedactionDecisionInput,
        responses=RedactionRequestOutput,
        description="403 REDACTION_NOT_ALLOWED for anyone but the author, an admin or the connector that wrote it; "
        "409 REDACTION_REQUEST_DECIDED; 404 for a request you cannot see.",
    )
    def post(self, request: Request, request_id: str) -> Response:
        principal = request_principal(request)
        serializer = RedactionDecisionInput(data=request.data)
        serializer.is_valid(raise_exception=True)
        values = serializer.validated_data
        decided = services.redaction_request_decide(
            principal=principal, request_id=request_id, decision=values["decision"], note=values.get("note", "")
        )
        return Response(present_request(principal, decided))

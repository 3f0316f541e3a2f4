"""Who am I, and which scopes can I use."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from cortex_site.api_schema import list_of
from memories.api.principal import request_principal
from memories.models import Membership, Scope


class MeOutput(serializers.Serializer):
    user = serializers.DictField()
    organization = serializers.DictField()
    clearance = serializers.CharField()
    role = serializers.ChoiceField(choices=Membership.Role.values)
    token = serializers.DictField(allow_null=True)


class ScopeOutput(serializers.Serializer):
    slug = serializers.CharField()
    name = serializers.CharField()
    visibility = serializers.ChoiceField(choices=Scope.Visibility.values)
    can_write = serializers.BooleanField()


class MeView(APIView):
    @extend_schema(responses=MeOutput, summary="The acting user, organization, clearance and token")
    def get(self, request: Request) -> Response:
        p = request_principal(request)
        token = None
        if p.token is not None:
            token = {
                "id": str(p.token.pk),
                "name": p.token.name,
                "prefix": p.token.prefix,
                "read_only": p.token.read_only,
                "expires_at": p.token.expires_at,
                "scopes": sorted(p.token.scopes.values_list("slug", flat=True)),
            }
        return Response(
            {
                "user": {"id": str(p.user.pk), "email": p.user.email, "name": p.user.display_name},
                "organization": {"slug": p.organization.slug, "name": p.organization.name},
                "clearance": p.clearance,
                "role": p.membership.role,
                "token": token,
            }
        )


class ScopeListView(APIView):
    @extend_schema(responses=list_of(ScopeOutput, "ScopeList"), summary="Scopes I can read, with whether I can write")
    def get(self, request: Request) -> Response:
        p = request_principal(request)
        rows = [
            {"slug": s.slug, "name": s.name, "visibility": s.visibility, "can_write": p.can_write_scope(s)}
            for s in p.readable_scopes()
        ]
        return Response({"results": rows, "next": None})

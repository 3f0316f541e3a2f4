"""The real URLconf plus a test-only endpoint that produces each kind of error on demand."""

from __future__ import annotations

from typing import Any

from django.urls import path
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from cortex_site.errors import Conflict, Unprocessable
from cortex_site.urls import urlpatterns as site_urlpatterns


class EchoView(APIView):
    class InputSerializer(serializers.Serializer):
        text = serializers.CharField(max_length=10_000)

    def post(self, request: Request) -> Response:
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        text = serializer.validated_data["text"]
        if text == "conflict":
            raise Conflict("It conflicts.", error_code="TEST_CONFLICT")
        if text == "unprocessable":
            raise Unprocessable("Cannot do that.", error_code="TEST_UNPROCESSABLE")
        if text == "crash":
            _ = 1 / 0
        return Response({"text": text})


urlpatterns: list[Any] = [path("api/test-echo", EchoView.as_view()), *site_urlpatterns]

"""POST /api/ask: an answer composed from the asker's visible memories, every sentence cited."""

from __future__ import annotations

from typing import Any, cast

from django.conf import settings
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from memories.api.principal import request_principal
from memories.interchange.inputs import StrictSerializer
from memories.interchange.representation import citation
from memories.selectors.ask import MAX_SOURCES, AskResult, ask


class AskInput(StrictSerializer):
    question = serializers.CharField(max_length=2000)
    limit = serializers.IntegerField(required=False, default=5, min_value=1, max_value=MAX_SOURCES)
    scopes = serializers.ListField(child=serializers.CharField(), required=False, allow_empty=True)


class AskSentenceOutput(serializers.Serializer):
    text = serializers.CharField()
    citations = serializers.ListField(child=serializers.IntegerField(), help_text="Source numbers this sentence rests on.")


class AskSourceOutput(serializers.Serializer):
    number = serializers.IntegerField()
    id = serializers.UUIDField()
    title = serializers.CharField()
    url = serializers.CharField()
    snippet = serializers.CharField()
    cited = serializers.BooleanField(help_text="Whether a sentence of the answer cites it.")
    citation = serializers.DictField()


class AskOutput(serializers.Serializer):
    question = serializers.CharField()
    confident = serializers.BooleanField(help_text="False: Cortex does not know, and says so instead of answering.")
    answer = serializers.CharField(help_text="The answer with [n] markers, or the sentence saying Cortex does not know.")
    sentences = AskSentenceOutput(many=True)
    sources = AskSourceOutput(many=True)
    composer = serializers.CharField(allow_null=True, help_text='"extractive" or the LLM "<provider>:<model>" that wrote it.')
    notes = serializers.ListField(child=serializers.CharField())
    took_ms = serializers.FloatField()


def ask_response(result: AskResult) -> dict[str, Any]:
    cited = result.cited()
    return {
        "question": result.question,
        "confident": result.confident,
        "answer": result.text,
        "sentences": [
            {"text": s.text, "citations": list(s.citations)} for s in (result.answer.sentences if result.answer else [])
        ],
        "sources": [
            {
                "number": number,
                "id": str(hit.memory.pk),
                "title": hit.memory.title,
                "url": f"{settings.CORTEX_BASE_URL}/memories/{hit.memory.pk}/",
                "snippet": hit.snippet,
                "cited": number in cited,
                "citation": citation(hit.memory),
            }
            for number, hit in enumerate(result.sources, start=1)
        ],
        "composer": result.answer.composer if result.answer else None,
        "notes": result.answer.notes if result.answer else [],
        "took_ms": result.took_ms,
    }


class AskView(APIView):
    @extend_schema(
        summary="Ask: an answer from your visible memories, every sentence cited", request=AskInput, responses=AskOutput
    )
    def post(self, request: Request) -> Response:
        principal = request_principal(request)
        serializer = AskInput(data=cast(dict[str, Any], request.data))
        serializer.is_valid(raise_exception=True)
        values = serializer.validated_data
        return Response(
            ask_response(ask(principal, values["question"], scopes=values.get("scopes") or None, limit=values["limit"]))
        )

"""Validation of what clients send, shared by REST and MCP (DESIGN.md §4 field names).

Serializers here only check shape and types; the write pipeline (memories.services.memories)
still decides everything else, so every interface refuses the same inputs with the same codes.
"""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from memories.selectors.recall import MAX_LIMIT, RecallQuery


class StrictSerializer(serializers.Serializer):
    """A serializer that refuses fields it does not know, instead of silently ignoring them."""

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, dict):
            unknown = sorted(set(data) - set(self.fields))
            if unknown:
                raise serializers.ValidationError({field: ["Unknown field."] for field in unknown})
            # DRF's CharField turns 12345 into "12345"; a client sending a number where text
            # belongs has a bug we should tell it about, not a memory we should store.
            not_text = sorted(
                name
                for name, field in self.fields.items()
                if isinstance(field, serializers.CharField)
                and name in data
                and data[name] is not None
                and not isinstance(data[name], str)
            )
            if not_text:
                raise serializers.ValidationError({name: ["Must be a string."] for name in not_text})
        return super().to_internal_value(data)


class MemoryFieldsInput(StrictSerializer):
    title = serializers.CharField(required=False, allow_blank=True, trim_whitespace=False)
    content = serializers.CharField(trim_whitespace=False, allow_blank=True)
    scope = serializers.CharField(required=False, allow_null=True, allow_blank=True)
    category = serializers.CharField(required=False, allow_blank=True)
    source = serializers.CharField(required=False)  # type: ignore[assignment]  # a field named like Field.source
    source_url = serializers.CharField(required=False, allow_blank=True, allow_null=True)
    tags = serializers.ListField(child=serializers.CharField(allow_blank=True), required=False)
    clearance_min = serializers.CharField(required=False, allow_null=True, allow_blank=True)
    valid_from = serializers.DateTimeField(required=False, allow_null=True)
    valid_until = serializers.DateTimeField(required=False, allow_null=True)


class MemoryCreateInput(MemoryFieldsInput):
    idempotency_key = serializers.CharField(required=False, allow_blank=True, max_length=255)
    author_name = serializers.CharField(required=False, allow_blank=True, max_length=200)


class SupersedeInput(MemoryFieldsInput):
    content = serializers.CharField(required=False, trim_whitespace=False, allow_blank=True)


class PatchInput(StrictSerializer):
    tags = serializers.ListField(child=serializers.CharField(allow_blank=True), required=False)
    category = serializers.CharField(required=False)
    valid_until = serializers.DateTimeField(required=False, allow_null=True)
    clearance_min = serializers.CharField(required=False)


class RedactInput(StrictSerializer):
    reason = serializers.CharField(allow_blank=True, trim_whitespace=False)
    urgent = serializers.BooleanField(
        required=False,
        default=False,
        help_text="Final at once (a leaked secret, personal data): nothing is held for restore. The author or an admin.",
    )


class RecallInput(StrictSerializer):
    query = serializers.CharField(allow_blank=True, trim_whitespace=False)
    limit = serializers.IntegerField(required=False, default=10, min_value=1, max_value=MAX_LIMIT)
    scopes = serializers.ListField(child=serializers.CharField(), required=False, allow_empty=True)
    category = serializers.CharField(required=False, allow_blank=True, allow_null=True)
    tags = serializers.ListField(child=serializers.CharField(), required=False)
    source = serializers.CharField(required=False, allow_blank=True, allow_null=True)  # type: ignore[assignment]
    as_of = serializers.DateTimeField(required=False, allow_null=True)


def recall_query(values: dict[str, Any]) -> RecallQuery:
    """The RecallQuery for validated RecallInput values (REST and MCP build it the same way)."""
    return RecallQuery(
        query=values["query"],
        limit=values["limit"],
        scopes=values.get("scopes") or None,
        category=values.get("category") or None,
        tags=values.get("tags") or (),
        source=values.get("source") or None,
        as_of=values.get("as_of"),
    )


def draft_fields(data: dict[str, Any]) -> dict[str, Any]:
    fields = dict(data)
    if fields.get("source_url") is None and "source_url" in fields:
        fields["source_url"] = ""
    if "tags" in fields and fields["tags"] is None:
        fields["tags"] = []
    return fields

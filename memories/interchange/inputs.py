"""Validation of what clients send, shared by REST and MCP (DESIGN.md §4 field names).

Serializers here only check shape and types; the write pipeline (memories.services.memories)
still decides everything else, so every interface refuses the same inputs with the same codes.
"""

from __future__ import annotations

from typing import Any

from django.http import QueryDict
from rest_framework import serializers

from cortex_site.api_schema import SPACE
from memories.models.memory import MAX_TAGS
from memories.selectors.recall import MAX_LIMIT, RecallQuery

# The write pipeline's category rule (memories.services.memories.validation), for the OpenAPI schema.
_CATEGORY = r"[A-Za-z][A-Za-z0-9_-]{0,49}"


def _expected(field: serializers.Field) -> str:
    if isinstance(field, serializers.BooleanField):
        return "Must be true or false."
    if isinstance(field, serializers.IntegerField):
        return "Must be a whole number."
    if isinstance(field, serializers.ListField):
        return "Must be a list of strings." if isinstance(field.child, serializers.CharField) else "Wrong type in the list."
    return "Must be a string."


def _wrong_type(field: serializers.Field, value: Any) -> bool:
    """Whether a JSON value is of another type than the field's (DRF would coerce 1 to True or "5" to 5)."""
    if value is None:
        return False
    if isinstance(field, serializers.CharField):
        return not isinstance(value, str)
    if isinstance(field, serializers.BooleanField):
        return not isinstance(value, bool)
    if isinstance(field, serializers.IntegerField):
        return isinstance(value, bool) or not isinstance(value, int)
    if isinstance(field, serializers.ListField) and isinstance(value, list):
        return any(_wrong_type(field.child, item) for item in value)
    return False


class StrictSerializer(serializers.Serializer):
    """A serializer that refuses fields it does not know, instead of silently ignoring them."""

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, dict):
            unknown = sorted(set(data) - set(self.fields))
            if unknown:
                raise serializers.ValidationError({field: ["Unknown field."] for field in unknown})
            # DRF turns 12345 into "12345", 1 into True and "5" into 5; a client sending a number where
            # text belongs has a bug we should tell it about, not a memory we should store. A form
            # (QueryDict) carries only text, so there DRF's reading of it stands.
            if not isinstance(data, QueryDict):
                wrong = sorted(name for name, field in self.fields.items() if name in data and _wrong_type(field, data[name]))
                if wrong:
                    raise serializers.ValidationError({name: [_expected(self.fields[name])] for name in wrong})
        return super().to_internal_value(data)


class RequiredText(serializers.CharField):
    """Text the write pipeline refuses when it is only whitespace (with its own error code, e.g.
    EMPTY_CONTENT): DRF keeps it as given, the OpenAPI schema asks for a character that is not space."""

    schema_not_blank = True


class CategoryText(serializers.CharField):
    """A category: blank (the default, note) or a word the write pipeline accepts once stripped and lowered."""

    schema_pattern = rf"^[{SPACE}]*(?:{_CATEGORY}[{SPACE}]*)?$"


class RequiredCategory(serializers.CharField):
    schema_pattern = rf"^[{SPACE}]*{_CATEGORY}[{SPACE}]*$"


class SourceText(serializers.CharField):
    """Where a memory came from: 1–50 printable ASCII characters once stripped (validation.clean_source)."""

    schema_pattern = rf"^[{SPACE}]*[!-~](?:[ -~]{{0,48}}[!-~])?[{SPACE}]*$"


class TagText(serializers.CharField):
    """A tag as normalise_tags reads it: stripped, lowered, leading '#' dropped; blank is skipped, else
    1–50 characters without spaces or commas."""

    schema_pattern = rf"^[{SPACE}]*#*(?:[^{SPACE},\x00#][^{SPACE},\x00]{{0,49}})?[{SPACE}]*$"


# After the scheme: a first host character that urlsplit keeps in the netloc (not a delimiter, a
# bracket — an IPv6 literal is accepted but not described — or space), then anything but NUL, the whole
# stripped URL at most 2,000 characters.
_HOST_START = rf"[^/?#\[\]\x00{SPACE}]"


class SourceUrlText(serializers.CharField):
    """A source link: blank, or an http(s) URL with a host, at most 2,000 characters once stripped
    (validation.clean_source_url)."""

    schema_pattern = (
        rf"^[{SPACE}]*(?:[Hh][Tt][Tt][Pp]://{_HOST_START}[^\x00]{{0,1992}}"
        rf"|[Hh][Tt][Tt][Pp][Ss]://{_HOST_START}[^\x00]{{0,1991}})?[{SPACE}]*$"
    )


def tag_list(**kwargs: Any) -> serializers.ListField:
    return serializers.ListField(child=TagText(allow_blank=True), max_length=MAX_TAGS, **kwargs)


class MemoryFieldsInput(StrictSerializer):
    title = serializers.CharField(required=False, allow_blank=True, trim_whitespace=False)
    content = RequiredText(trim_whitespace=False, allow_blank=True)
    scope = serializers.CharField(required=False, allow_null=True, allow_blank=True)
    category = CategoryText(required=False, allow_blank=True)
    source = SourceText(required=False)  # type: ignore[assignment]  # a field named like Field.source
    source_url = SourceUrlText(required=False, allow_blank=True, allow_null=True)
    tags = tag_list(required=False)
    clearance_min = serializers.CharField(required=False, allow_null=True, allow_blank=True)
    valid_from = serializers.DateTimeField(required=False, allow_null=True)
    valid_until = serializers.DateTimeField(required=False, allow_null=True)


class MemoryCreateInput(MemoryFieldsInput):
    idempotency_key = serializers.CharField(required=False, allow_blank=True, max_length=255)
    author_name = serializers.CharField(required=False, allow_blank=True, max_length=200)


class SupersedeInput(MemoryFieldsInput):
    content = RequiredText(required=False, trim_whitespace=False, allow_blank=True)


class PatchInput(StrictSerializer):
    tags = tag_list(required=False)
    category = RequiredCategory(required=False)
    valid_until = serializers.DateTimeField(required=False, allow_null=True)
    clearance_min = serializers.CharField(required=False)


class RedactInput(StrictSerializer):
    reason = RequiredText(allow_blank=True, trim_whitespace=False)
    urgent = serializers.BooleanField(
        required=False,
        default=False,
        help_text="Final at once (a leaked secret, personal data): nothing is held for restore. The author or an admin.",
    )


class RecallInput(StrictSerializer):
    query = RequiredText(allow_blank=True, trim_whitespace=False)
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

"""The OpenAPI document says what the API really accepts and answers (drf-spectacular settings point here).

Two pieces, so no view repeats them:

- `CortexAutoSchema` maps request fields as DRF validates them: an object a StrictSerializer reads
  refuses unknown properties; a text field refuses NUL characters, and one DRF trims and may not be
  blank needs a character that is not whitespace (DRF strips with `str.strip`, so the class lists
  exactly what `str.isspace` calls space). A serializer may add JSON Schema keywords of its own with
  `schema_extra` (for rules across fields, such as "a summary or a transcript").
- `postprocess_error_responses` gives every operation the error envelope for each status it can
  answer, as `cortex_site.api.exception_handler` renders them: 401/403/429/503 everywhere a caller
  authenticates, 400 where a query parameter or body is read, 404 where the path names an object,
  409 on state-changing calls, 413/415 where a body is parsed. A description a view wrote itself
  (its own codes) is kept.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.openapi import AutoSchema
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse
from rest_framework import serializers

ENVELOPE = "ErrorEnvelope"
ENVELOPE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "Every error under /api/: what went wrong as a code and a sentence, and the request id to quote.",
    "required": ["error_code", "message", "request_id", "details"],
    "properties": {
        "error_code": {"type": "string", "pattern": "^[A-Z][A-Z0-9_]*$", "description": "UPPER_SNAKE, e.g. NOT_FOUND"},
        "message": {"type": "string"},
        "request_id": {"type": "string", "description": "also in the X-Request-ID header"},
        "details": {"type": "object", "additionalProperties": True, "description": "fields, retry_after_seconds, ..."},
    },
}


class ErrorEnvelope(serializers.Serializer):
    """The envelope as a serializer, for views that describe their own error codes (`error_responses`)."""

    error_code = serializers.CharField()
    message = serializers.CharField()
    request_id = serializers.CharField()
    details = serializers.DictField()


def error_responses(*codes: tuple[int, str]) -> dict[int, OpenApiResponse]:
    """`responses={200: ..., **error_responses((409, "SYNC_IN_PROGRESS ..."))}`: statuses with the view's own codes."""
    return {status_code: OpenApiResponse(ErrorEnvelope, description=text) for status_code, text in codes}


# What str.strip() removes (str.isspace), spelled so Python, ECMA and Rust regex engines agree.
SPACE = r"\t-\r\x1c-\x20\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"
NO_NUL = r"^[^\x00]*$"
NOT_BLANK = rf"^[^\x00]*[^\x00{SPACE}][^\x00]*$"

STATUS_TEXT = {
    400: "VALIDATION_ERROR (details.fields), MALFORMED_REQUEST, or the operation's own code for a value it refuses",
    401: "NOT_AUTHENTICATED or INVALID_TOKEN",
    403: "PERMISSION_DENIED, NO_ORGANIZATION, TOKEN_READ_ONLY or the operation's own rule",
    404: "NOT_FOUND: missing, and not yours to see, alike; UNKNOWN_SCOPE, UNKNOWN_CLEARANCE or INVALID_CURSOR for a name "
    "or cursor the input gives that this organization does not have",
    406: "NOT_ACCEPTABLE: the Accept header admits no JSON (application/json, or */*)",
    409: "the operation's state rule (e.g. MEMORY_NOT_ACTIVE, SYNC_IN_PROGRESS)",
    422: "well-formed, but refused by a rule the schema cannot state: relative to now or to stored state, across "
    "fields, or a source's own reading of a connector's config and credentials (INVALID_VALIDITY_WINDOW, "
    "VALID_FROM_IN_FUTURE, UNGROUNDED_DECISION, REPOSITORIES_REQUIRED, ...)",
    413: "PAYLOAD_TOO_LARGE",
    415: "UNSUPPORTED_MEDIA_TYPE",
    429: "RATE_LIMITED (Retry-After header, details.retry_after_seconds)",
    503: "SERVICE_UNAVAILABLE: a service Cortex depends on is down; retry shortly",
}
# POSTs that compute an answer and change no state anyone else sees.
_READING_POSTS = {"/api/recall", "/api/ask", "/api/memories/extract-decisions", "/api/cron/connectors"}


class CortexAutoSchema(AutoSchema):
    def _map_basic_serializer(self, serializer: Any, direction: Any) -> dict[str, Any]:
        from memories.interchange.inputs import StrictSerializer

        schema: dict[str, Any] = super()._map_basic_serializer(serializer, direction)
        if direction == "request":
            if isinstance(serializer, StrictSerializer):
                schema["additionalProperties"] = False
            schema.update(getattr(serializer, "schema_extra", {}))
        return schema

    def _get_request_for_media_type(self, serializer: Any, direction: Any = "request") -> tuple[Any, bool]:
        schema, required = super()._get_request_for_media_type(serializer, direction)
        # drf-spectacular marks a body required only when a property is; a serializer whose
        # `schema_extra` asks for one property of several (anyOf, each branch with `required`)
        # refuses an empty body just the same, so the body is required.
        branches = getattr(serializer, "schema_extra", {}).get("anyOf") or []
        if branches and all(branch.get("required") for branch in branches):
            required = True
        return schema, required

    def _map_serializer_field(self, field: Any, direction: Any, bypass_extensions: bool = False) -> Any:
        # _insert_field_validators (called right after, for this field) is not told the direction.
        self._cortex_direction = direction
        return super()._map_serializer_field(field, direction, bypass_extensions)

    def _insert_field_validators(self, field: Any, schema: dict[str, Any]) -> None:
        if getattr(self, "_cortex_direction", None) != "request":  # answers are documented as they are
            super()._insert_field_validators(field, schema)
            return
        if isinstance(field, serializers.DictField) and not field.allow_empty and schema.get("type") == "object":
            schema.setdefault("minProperties", 1)
        plain_text = (
            type(field) is serializers.CharField or hasattr(field, "schema_not_blank") or hasattr(field, "schema_pattern")
        )
        ours = plain_text and schema.get("type") == "string" and "pattern" not in schema
        if ours:
            not_blank = getattr(field, "schema_not_blank", False) or (field.trim_whitespace and not field.allow_blank)
            schema["pattern"] = getattr(field, "schema_pattern", None) or (NOT_BLANK if not_blank else NO_NUL)
            if not_blank:
                schema.setdefault("minLength", 1)
        super()._insert_field_validators(field, schema)
        if ours and "oneOf" in schema:
            # drf-spectacular adds `oneOf: [pattern, ""]` for a field DRF lets blank. Our pattern already says
            # whether "" is accepted (and "" matching both branches would make oneOf refuse it).
            schema.update(schema.pop("oneOf")[0])


def limit_parameter(*, default: int, maximum: int) -> Any:
    """The OpenAPI description of `?limit=` for `query_limit`."""
    schema = {"type": "integer", "minimum": 1, "maximum": maximum, "default": default}
    return OpenApiParameter("limit", schema, required=False, description=f"results per page, 1-{maximum}")


def cursor_parameter() -> Any:
    return OpenApiParameter(
        "cursor", str, required=False, description="the `next` of the previous page; one this API did not hand out is 404"
    )


def list_of(serializer: type[serializers.Serializer], name: str) -> Any:
    """The response of a list operation: `{"results": [...], "next": url | null}` (DESIGN §12)."""
    from drf_spectacular.utils import inline_serializer

    return inline_serializer(
        name,
        fields={
            "results": serializer(many=True),
            "next": serializers.CharField(allow_null=True, help_text="the next page's URL, null on the last"),
        },
    )


class BearerTokenScheme(OpenApiAuthenticationExtension):  # type: ignore[no-untyped-call]
    target_class = "memories.api.authentication.BearerTokenAuthentication"
    name = "bearerAuth"

    def get_security_definition(self, auto_schema: Any) -> dict[str, Any]:
        return {"type": "http", "scheme": "bearer", "description": "an API token from Settings → API tokens"}


class SessionCookieScheme(OpenApiAuthenticationExtension):  # type: ignore[no-untyped-call]
    target_class = "memories.api.authentication.CsrfSessionAuthentication"
    name = "sessionAuth"

    def get_security_definition(self, auto_schema: Any) -> dict[str, Any]:
        from django.conf import settings

        return {
            "type": "apiKey",
            "in": "cookie",
            "name": settings.SESSION_COOKIE_NAME,
            "description": "the browser session; writes also need the X-CSRFToken header",
        }


def _envelope(description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": {"$ref": f"#/components/schemas/{ENVELOPE}"}}}}


def statuses_for(path: str, method: str, operation: dict[str, Any]) -> list[int]:
    """The error statuses an operation can answer, by what it reads (see the module docstring)."""
    codes = [401, 406, 429, 503]  # 406: an Accept header that admits no JSON, on any operation
    if operation.get("security"):  # a caller who authenticates can still be refused
        codes.append(403)
    reads_input = "requestBody" in operation or any(p.get("in") == "query" for p in operation.get("parameters", []))
    if reads_input:
        codes.append(400)
    if "{" in path or reads_input:  # the path names an object, or the input may (a scope, a rung, a cursor)
        codes.append(404)
    if method != "get" and path not in _READING_POSTS:
        codes.append(409)
    if method in ("post", "put", "patch"):
        codes += [413, 415, 422]
    return sorted(codes)


def postprocess_error_responses(result: dict[str, Any], generator: Any, request: Any, public: bool) -> dict[str, Any]:
    """drf-spectacular postprocessing hook: the envelope component and every operation's error statuses."""
    result.setdefault("components", {}).setdefault("schemas", {})[ENVELOPE] = ENVELOPE_SCHEMA
    for path, item in result.get("paths", {}).items():
        for method, operation in item.items():
            if not isinstance(operation, dict) or "responses" not in operation:
                continue
            for parameter in operation.get("parameters", []):
                schema = parameter.get("schema", {})
                free_text = schema.get("type") == "string" and not {"enum", "format", "pattern"} & schema.keys()
                if parameter.get("in") == "query" and free_text:
                    schema["pattern"] = NO_NUL  # cortex_site.middleware.NulInQueryMiddleware refuses the rest
            responses = operation["responses"]
            for code in statuses_for(path, method, operation):
                responses.setdefault(str(code), _envelope(STATUS_TEXT[code]))
    return result

"""Webhook endpoints: POST /api/webhooks/<kind>/<connector_id>, one CSRF-exempt view for every kind.

The source verifies the signature over the raw body before anything is parsed; the delivery is
stored (deduplicated) and handed to a worker on commit, so the answer is fast.
"""

from __future__ import annotations

import json

from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from connectors.services.deliveries import delivery_receive
from cortex_site.api import error_body
from cortex_site.errors import CortexError


@csrf_exempt
@require_POST
def webhook(request: HttpRequest, kind: str, connector_id: str) -> JsonResponse:
    try:
        body = request.body
    except RequestDataTooBig:
        return JsonResponse(error_body("PAYLOAD_TOO_LARGE", "The delivery is larger than this server accepts."), status=413)
    try:
        answer = delivery_receive(kind=kind, connector_id=connector_id, headers=request.headers, body=body)
    except CortexError as exc:
        return JsonResponse(error_body(exc.error_code, exc.message, exc.details), status=exc.status)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return JsonResponse(error_body("MALFORMED_REQUEST", "The delivery body is not valid JSON."), status=400)
    return JsonResponse(answer.body, status=answer.status)

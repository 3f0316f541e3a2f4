"""Webhook endpoints: POST /api/webhooks/<kind>/<connector_id>, one CSRF-exempt view for every kind.

The source verifies the signature over the raw body before anything is parsed; the delivery is
stored (deduplicated) and handed to a worker on commit, so the answer is fast.
"""

from __future__ import annotations

from django.http import HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from connectors.services.deliveries import delivery_receive, delivery_refuse_oversized
from cortex_site.api import error_body
from cortex_site.body_limits import limit_for, oversized
from cortex_site.errors import CortexError


@csrf_exempt
@require_POST
def webhook(request: HttpRequest, kind: str, connector_id: str) -> JsonResponse:
    try:
        size = oversized(request)
        if size is not None:  # the body is not read (BodyLimitMiddleware leaves webhooks to this view to audit)
            delivery_refuse_oversized(kind=kind, connector_id=connector_id, size=size, limit=limit_for(request.path))
        answer = delivery_receive(kind=kind, connector_id=connector_id, headers=request.headers, body=request.body)
    except CortexError as exc:
        return JsonResponse(error_body(exc.error_code, exc.message, exc.details), status=exc.status)
    return JsonResponse(answer.body, status=answer.status)

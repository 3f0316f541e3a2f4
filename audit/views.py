"""The audit log in the browser (admins): a filterable, paginated table with a detail drawer, and export.

Non-admins get 404: the page does not exist for them. Every view of the log is audited.
"""

from __future__ import annotations

import json
from urllib.parse import urlencode

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from audit import selectors
from audit.export import export_response
from audit.models import AuditEvent
from audit.services import record
from cortex_site.errors import NotFound, ValidationFailed
from memories.access import Principal
from memories.sessions import session_principal
from memories.views.common import principal_view

PAGE_SIZE = 50
FILTER_NAMES = ("actor", "action", "target", "since", "until", "outcome")


def _filters(request: HttpRequest) -> tuple[selectors.AuditFilters, str]:
    try:
        filters = selectors.parse_filters(request.GET)
    except ValidationFailed as exc:
        return selectors.AuditFilters(), exc.message
    return filters, ""


def _query(request: HttpRequest, **extra: str) -> str:
    params = {name: request.GET[name] for name in FILTER_NAMES if request.GET.get(name)}
    params.update({k: v for k, v in extra.items() if v})
    return urlencode(params)


def _details_text(event: AuditEvent | None) -> str:
    return json.dumps(event.details, indent=2, ensure_ascii=False, sort_keys=True) if event is not None else ""


@principal_view
@require_GET
def audit_log(request: HttpRequest, principal: Principal) -> HttpResponse:
    if not principal.is_admin:
        raise NotFound("Not found.")
    filters, error = _filters(request)
    events = selectors.audit_events(principal, filters)
    before = request.GET.get("before", "")
    if before.isascii() and before.isdigit():  # "²" is a digit to isdigit(), not to int()
        events = events.filter(pk__lt=int(before))
    page = list(events[: PAGE_SIZE + 1])
    more = len(page) > PAGE_SIZE
    page = page[:PAGE_SIZE]
    selected = None
    if (wanted := request.GET.get("event", "")).isdigit():
        try:
            selected = selectors.audit_event(principal, wanted)
        except NotFound:
            selected = None
    record(
        "audit.read",
        organization=principal.organization,
        actor=principal.actor,
        details={"filters": filters.as_dict(), "via": "ui"},
    )
    context = {
        "events": page,
        "selected": selected,
        "details_text": _details_text(selected),
        "params": {name: request.GET.get(name, "") for name in FILTER_NAMES},
        "outcomes": AuditEvent.Outcome.values,
        "filter_error": error,
        "filtered": bool(filters.as_dict()),
        "query": _query(request),
        "older_url": f"?{_query(request, before=str(page[-1].pk))}" if more and page else "",
    }
    return render(request, "audit/log.html", context, status=400 if error else 200)


@principal_view
@require_GET
def audit_event_detail(request: HttpRequest, principal: Principal, event_id: int) -> HttpResponse:
    """The drawer: one event in full. A whole page without htmx."""
    event = selectors.audit_event(principal, event_id)
    record(
        "audit.read",
        organization=principal.organization,
        actor=principal.actor,
        target_type="audit_event",
        target_id=event.pk,
        details={"via": "ui"},
    )
    template = "audit/_drawer.html" if request.headers.get("HX-Request") == "true" else "audit/event.html"
    return render(request, template, {"selected": event, "details_text": _details_text(event)})


@login_required
@require_GET
def audit_export(request: HttpRequest) -> HttpResponse | StreamingHttpResponse:
    # Not principal_view: the answer is a stream, not a page.
    principal = session_principal(request)
    if principal is None or not principal.is_admin:
        raise Http404("Not found")
    filters, error = _filters(request)
    fmt = (request.GET.get("format") or "jsonl").lower()
    if error or fmt not in ("jsonl", "csv"):
        return HttpResponse(error or "format must be jsonl or csv.", status=400, content_type="text/plain; charset=utf-8")
    return export_response(principal, filters, fmt, via="ui")

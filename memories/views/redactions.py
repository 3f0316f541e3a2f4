"""Redaction requests in the browser: ask for a memory's redaction, the review queue, decide one.

Thin views over `memories.services.redactions` and `memories.selectors.redactions`.
"""

from __future__ import annotations

from django.contrib import messages
from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from cortex_site.errors import CortexError, NotFound, PermissionDenied
from memories.access import Principal
from memories.forms import RedactionDecisionForm, RedactionRequestForm, attach_error
from memories.models import RedactionRequest
from memories.selectors.redactions import STATUS_FILTERS, redaction_requests
from memories.services.denials import denial_record
from memories.services.redactions import redaction_request_create, redaction_request_decide
from memories.views.common import may_request_redaction, memory_or_404, principal_view


@principal_view
@require_http_methods(["GET", "POST"])
def memory_request_redaction(request: HttpRequest, principal: Principal, memory_id: str) -> HttpResponse:
    """Ask the author and admins to redact a memory the reader may not redact (the detail page's form posts here)."""
    memory = memory_or_404(principal, memory_id)
    if not may_request_redaction(principal, memory):
        raise DjangoPermissionDenied("You cannot request this memory's redaction.")
    form = RedactionRequestForm(request.POST or None, auto_id="request_redaction_%s")
    status = 200
    if request.method == "POST":
        status = 400
        if form.is_valid():
            try:
                redaction_request_create(principal=principal, memory_id=memory.pk, reason=form.cleaned_data["reason"])
            except CortexError as exc:
                attach_error(form, exc)
            else:
                messages.success(request, "Redaction requested. The author and the admins will decide.")
                return redirect(f"/memories/{memory.pk}/")
    return render(request, "memories/request_redaction.html", {"memory": memory, "form": form}, status=status)


@principal_view
@require_GET
def redaction_queue(request: HttpRequest, principal: Principal) -> HttpResponse:
    status = request.GET.get("status") or "open"
    if status not in STATUS_FILTERS:
        status = "open"
    rows = [
        {"request": r, "can_decide": r.status == "open" and principal.can_redact(r.memory)}
        for r in redaction_requests(principal, status=status)
    ]
    return render(request, "redactions/queue.html", {"rows": rows, "status": status, "statuses": sorted(STATUS_FILTERS)})


@principal_view
@require_POST
def redaction_decide(request: HttpRequest, principal: Principal, request_id: str) -> HttpResponse:
    form = RedactionDecisionForm(request.POST)
    if not form.is_valid():
        messages.error(request, "Choose approve or decline.")
        return redirect("/redaction-requests/")
    try:
        decided = redaction_request_decide(
            principal=principal, request_id=request_id, decision=form.cleaned_data["decision"], note=form.cleaned_data["note"]
        )
    except NotFound as exc:
        denial_record(exc, principal=principal, via="ui", path=request.path)
        raise Http404("No such redaction request") from None
    except PermissionDenied as exc:
        raise DjangoPermissionDenied(exc.message) from None
    except CortexError as exc:
        messages.error(request, exc.message)
        return redirect("/redaction-requests/")
    if decided.status == RedactionRequest.Status.APPROVED:
        messages.success(request, "Approved: the memory is redacted; who, when and why are kept.")
    else:
        messages.success(request, "Declined: the memory stays as it is.")
    return redirect("/redaction-requests/")

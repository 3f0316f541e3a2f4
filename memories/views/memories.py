"""Memories in the browser: browse and search, detail, add (note, upload), supersede, redact.

Thin views over the same selectors and services as the REST API and MCP: the session's
Principal decides what is listed, opened and offered; services decide what is stored.
"""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.template import TemplateDoesNotExist
from django.template.loader import get_template
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django_htmx.http import push_url
from django_htmx.middleware import HtmxDetails

from audit.selectors import can_see_readers, memory_readers
from cortex_site.errors import CortexError, NotFound, ServiceUnavailable
from memories.access import Principal, clearance_names
from memories.forms import (
    COMMON_CATEGORIES,
    DetailsForm,
    NoteForm,
    RedactForm,
    RedactionRequestForm,
    SupersedeForm,
    UploadOptionsForm,
    attach_error,
)
from memories.selectors.conflicts import memory_conflicts
from memories.selectors.dashboard import memory_facets
from memories.selectors.memories import (
    author_suggestions,
    memory_for_history,
    organization_holding,
    redaction_held_until,
    supersession_chain,
)
from memories.services.memories import MemoryDraft, memory_create, memory_patch, memory_redact, memory_restore, memory_supersede
from memories.services.read_events import memory_read_audit
from memories.templatetags.cortex_ui import render_markdown
from memories.views import browse, uploads
from memories.views.common import (
    may_propose_revision,
    may_redact,
    may_request_redaction,
    may_supersede,
    memory_or_404,
    principal_view,
)

AUTHOR_SUGGESTIONS = 20
RETRY_MESSAGE = (
    "Nothing was saved: the embedding service is unavailable right now. Your text is still here — try again in a moment."
)


def brief_tab_template() -> str | None:
    """The Meeting Brief tab, once its template exists (another feature provides it)."""
    try:
        get_template("briefs/_tab.html")
    except TemplateDoesNotExist:
        return None
    return "briefs/_tab.html"


class HtmxHttpRequest(HttpRequest):
    htmx: HtmxDetails


@principal_view
@require_GET
def memory_list(request: HtmxHttpRequest, principal: Principal) -> HttpResponse:
    params = browse.ListParams.from_query(request.GET)
    results = browse.recall_results(principal, params) if params.q else browse.list_results(principal, params, request.GET)
    context = {
        "params": params,
        "facets": memory_facets(principal),
        "scopes": principal.readable_scopes(),
        "authors": author_suggestions(principal, limit=AUTHOR_SUGGESTIONS),
        **results,
    }
    if request.htmx and params.cursor:
        return render(request, "memories/_rows.html", context)
    if request.htmx and request.htmx.target == "memory-results":
        # The address bar gets the query without empty filters, so it reads well and shares well.
        return push_url(render(request, "memories/_results.html", context), f"/memories/{params.querystring()}")
    return render(request, "memories/list.html", context)


@principal_view
@require_GET
def author_options(request: HttpRequest, principal: Principal) -> HttpResponse:
    """The author filter's typeahead: <option>s of members and named authors matching what was typed."""
    names = author_suggestions(principal, request.GET.get("author", ""), limit=AUTHOR_SUGGESTIONS)
    return render(request, "memories/_author_options.html", {"authors": names})


@principal_view
@require_GET
def memory_detail(request: HttpRequest, principal: Principal, memory_id: str) -> HttpResponse:
    try:
        memory = memory_for_history(principal, memory_id)
    except NotFound:
        # A link shared from another of the person's organizations: offer to switch, if they may read it
        # there (not a probe: nothing is audited). Otherwise principal_view audits the denial and answers 404.
        holder = organization_holding(principal, memory_id)
        if holder is None:
            raise
        return render(request, "memories/elsewhere.html", {"holder": holder, "next": f"/memories/{memory_id}/"}, status=404)
    memory_read_audit(principal=principal, memory=memory, via="ui")
    conflicts = [
        {"conflict": c, "other": c.existing_memory if c.new_memory_id == memory.pk else c.new_memory}
        for c in memory_conflicts(principal, memory)
    ]
    context = {
        "memory": memory,
        "clearance": clearance_names(principal.organization_id).get(memory.clearance_rank, str(memory.clearance_rank)),
        "chain": supersession_chain(principal, memory),
        "conflicts": conflicts,
        "can_supersede": may_supersede(principal, memory),
        "can_propose": may_propose_revision(principal, memory),
        "can_redact": may_redact(principal, memory),
        "redact_form": RedactForm(auto_id="redact_%s"),
        "can_request_redaction": may_request_redaction(principal, memory),
        "restorable_until": redaction_held_until(memory) if principal.is_admin and memory.status == "redacted" else None,
        "request_redaction_form": RedactionRequestForm(auto_id="request_redaction_%s"),
        "permalink": request.build_absolute_uri(f"/memories/{memory.pk}/"),
        # "Who read this": its author and the organization's admins only.
        "readers": memory_readers(principal, memory, limit=20) if can_see_readers(principal, memory) else None,
    }
    return render(request, "memories/detail.html", context)


def _add_context(principal: Principal, tab: str, **extra: Any) -> dict[str, Any]:
    brief = brief_tab_template()
    if tab not in {"note", "upload"} and not (tab == "brief" and brief):
        tab = "note"
    return {
        "tab": tab,
        "brief_tab": brief,
        "writable": principal.writable_scopes(),
        "categories": COMMON_CATEGORIES,
        "upload_accept": ",".join(uploads.ACCEPTED),
        "upload_max_bytes": uploads.max_bytes(),
        **extra,
    }


@principal_view
@require_http_methods(["GET", "POST"])
def memory_new(request: HttpRequest, principal: Principal) -> HttpResponse:
    status = 200
    form = NoteForm(request.POST or None, principal=principal)
    if request.method == "POST":
        status = 400
        if form.is_valid():
            draft = MemoryDraft(
                **form.draft_fields(), source="Manual", idempotency_key=form.cleaned_data.get("idempotency_key", "")
            )
            try:
                result = memory_create(principal=principal, draft=draft)
            except ServiceUnavailable:
                form.add_error(None, RETRY_MESSAGE)
                status = 503
            except CortexError as exc:
                attach_error(form, exc)
            else:
                if result.deduplicated:
                    messages.info(request, "This was already in Cortex — here is the existing memory.")
                else:
                    messages.success(request, f"Saved to {result.memory.scope.slug}.")
                return redirect(f"/memories/{result.memory.pk}/")
    tab = "note" if request.method == "POST" else request.GET.get("tab", "note")
    context = _add_context(principal, tab, form=form, upload_form=UploadOptionsForm(principal=principal))
    return render(request, "memories/new.html", context, status=status)


@principal_view
@require_POST
def memory_upload(request: HttpRequest, principal: Principal) -> HttpResponse:
    """One or many files → one memory each. cortex.js sends one file per request and asks for JSON
    (per-file progress); without JavaScript the form posts every file at once and gets the page back."""
    options = UploadOptionsForm(request.POST, principal=principal)
    wants_json = "application/json" in request.headers.get("Accept", "")
    files = request.FILES.getlist("files")
    if options.is_valid() and not files:
        options.add_error(None, "Choose at least one file.")
    if not options.is_valid():
        if wants_json:
            message = " ".join(str(e) for errors in options.errors.values() for e in errors)
            return JsonResponse({"results": [], "message": message}, status=400)
        context = _add_context(principal, "upload", form=NoteForm(principal=principal), upload_form=options)
        return render(request, "memories/new.html", context, status=400)
    results = [uploads.store_upload(principal, upload, options.cleaned_data) for upload in files]
    if wants_json:
        status = results[0]["status"] if len(results) == 1 else (201 if all(r["ok"] for r in results) else 207)
        return JsonResponse({"results": results}, status=status)
    context = _add_context(principal, "upload", form=NoteForm(principal=principal), upload_form=options, upload_results=results)
    return render(request, "memories/new.html", context, status=201 if all(r["ok"] for r in results) else 400)


@principal_view
@require_POST
def markdown_preview(request: HttpRequest, principal: Principal) -> HttpResponse:
    content = request.POST.get("content", "")
    if not content.strip():
        return HttpResponse('<p class="subtle">Nothing to preview yet.</p>')
    return HttpResponse(render_markdown(content[:200_000]))


@principal_view
@require_http_methods(["GET", "POST"])
def memory_edit(request: HttpRequest, principal: Principal, memory_id: str) -> HttpResponse:
    """Supersede: save an edited copy as the new active version; the old one stays in the chain."""
    memory = memory_or_404(principal, memory_id)
    propose = may_propose_revision(principal, memory)
    if not may_supersede(principal, memory) and not propose:
        if memory.status != "active" and principal.can_write_memory(memory):
            messages.error(request, f"This memory is {memory.status}; only the active version can be edited.")
            return redirect(f"/memories/{memory.pk}/")
        raise DjangoPermissionDenied("You cannot change this memory.")
    clearance = clearance_names(principal.organization_id).get(memory.clearance_rank, "")
    form = SupersedeForm(request.POST or None, principal=principal, initial=SupersedeForm.initial_for(memory, clearance))
    status = 200
    if request.method == "POST":
        status = 400
        if form.is_valid():
            try:
                result = memory_supersede(principal=principal, memory_id=memory.pk, changes=form.draft_fields())
            except ServiceUnavailable:
                form.add_error(None, RETRY_MESSAGE)
                status = 503
            except CortexError as exc:
                attach_error(form, exc)
            else:
                if result.proposal is not None:
                    messages.success(
                        request, "Proposed as a revision. The current version stays until someone with the authority accepts it."
                    )
                    return redirect(f"/conflicts/{result.proposal.pk}/")
                messages.success(request, "Saved as a new version. The previous one is kept in the history.")
                return redirect(f"/memories/{result.memory.pk}/")
    context = {"memory": memory, "form": form, "categories": COMMON_CATEGORIES, "propose": propose}
    return render(request, "memories/edit.html", context, status=status)


@principal_view
@require_http_methods(["GET", "POST"])
def memory_details(request: HttpRequest, principal: Principal, memory_id: str) -> HttpResponse:
    """Edit details (tags, category, clearance, expiry) in place; memory_patch decides and audits."""
    memory = memory_or_404(principal, memory_id)
    if not may_supersede(principal, memory):
        raise DjangoPermissionDenied("You cannot change this memory.")
    clearance = clearance_names(principal.organization_id).get(memory.clearance_rank, "")
    form = DetailsForm(request.POST or None, principal=principal, initial=DetailsForm.initial_for(memory, clearance))
    status = 200
    if request.method == "POST":
        status = 400
        if form.is_valid():
            try:
                memory_patch(principal=principal, memory_id=memory.pk, changes=form.changes())
            except CortexError as exc:
                attach_error(form, exc)
            else:
                messages.success(request, "Details saved. The content and its history are unchanged.")
                return redirect(f"/memories/{memory.pk}/")
    context = {"memory": memory, "form": form, "categories": COMMON_CATEGORIES}
    return render(request, "memories/details.html", context, status=status)


@principal_view
@require_http_methods(["GET", "POST"])
def memory_redact_view(request: HttpRequest, principal: Principal, memory_id: str) -> HttpResponse:
    """Redact with a reason. The detail page asks in a dialog; this page is the no-JavaScript way."""
    memory = memory_or_404(principal, memory_id)
    if not may_redact(principal, memory):
        if memory.status == "redacted":
            messages.info(request, "This memory is already redacted.")
            return redirect(f"/memories/{memory.pk}/")
        raise DjangoPermissionDenied("You cannot redact this memory.")
    form = RedactForm(request.POST or None)
    status = 200
    if request.method == "POST":
        status = 400
        if form.is_valid():
            try:
                memory_redact(
                    principal=principal,
                    memory_id=memory.pk,
                    reason=form.cleaned_data["reason"],
                    urgent=form.cleaned_data["urgent"],
                )
            except CortexError as exc:
                attach_error(form, exc)
            else:
                messages.success(request, "Redacted. The content is gone from search; who, when and why are kept.")
                return redirect(f"/memories/{memory.pk}/")
    return render(request, "memories/redact.html", {"memory": memory, "form": form}, status=status)


@principal_view
@require_POST
def memory_restore_view(request: HttpRequest, principal: Principal, memory_id: str) -> HttpResponse:
    """Restore a held redaction (admins)."""
    memory = memory_or_404(principal, memory_id)
    if not principal.is_admin:
        raise DjangoPermissionDenied("Only organization admins can restore a redacted memory.")
    try:
        memory_restore(principal=principal, memory_id=memory.pk)
    except CortexError as exc:
        messages.error(request, exc.message)
    else:
        messages.success(request, "Restored: the memory is back, as it was before the redaction.")
    return redirect(f"/memories/{memory.pk}/")

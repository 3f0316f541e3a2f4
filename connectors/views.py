"""Browser: the Connectors page — a card per connector, setup forms per kind, runs with their failures.

Everyone in the organization sees the cards (connector names and sync states are organization
metadata, not memory content); configuring, Sync now, Backfill, Pause/Resume, testing and deleting
are for admins, and the services check that again. Another organization's connector, or a missing
one, is the same 404. Views stay thin: a selector to read, one service call to change.
"""

from __future__ import annotations

import secrets
from typing import Any

from django.contrib import messages
from django.db import transaction
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from connectors import presenters, selectors
from connectors.forms import FORMS, ConnectorForm, attach_error
from connectors.models import Connector
from connectors.page_reads import recent_runs
from connectors.services import connectors as services
from connectors.services import cron, oauth
from connectors.services import sync as sync_services
from cortex_site.errors import Conflict, CortexError, PermissionDenied
from memories.access import Principal, clearance_name
from memories.views.common import principal_view

RUNS_ON_DETAIL = 25
# A per-session secret an OAuth sign-in is bound to: a state from another browser session never completes.
OAUTH_BINDING_SESSION_KEY = "connectors_oauth_binding"


def _admin_only(principal: Principal) -> None:
    """Configuring and running connectors is for admins (the services check again): members get 403.

    Members already see the connector's card, so a 403 tells them nothing new; an outsider never
    gets this far — `access_connector` answers 404 for another organization's connector first.
    """
    if not principal.is_admin or principal.read_only:
        raise PermissionDenied("Only organization admins can configure or run connectors.", error_code="ADMIN_REQUIRED")


def _form_class(kind: str) -> type[ConnectorForm]:
    form = FORMS.get(kind)
    if form is None:
        raise Http404("No such connector kind")
    return form


def _card(principal: Principal, connector: Connector) -> dict[str, Any]:
    runs = selectors.runs_for(principal, connector.pk, limit=5)
    return presenters.card(connector, runs, timezone.now())


def _page_of(connector_id: Any, value: str) -> str:
    """Where a card sits: "" on the Connectors page, the connector's own path on its page (anything else is ignored)."""
    return value if value == f"/connectors/{connector_id}/" else ""


def _render_card(
    request: HttpRequest, principal: Principal, connector: Connector, *, next_url: str = "", note: tuple[str, str] | None = None
) -> HttpResponse:
    context = {"c": _card(principal, connector), "note": note, "next_url": _page_of(connector.pk, next_url)}
    return render(request, "connectors/_card.html", context)


def _after_action(request: HttpRequest, principal: Principal, connector_id: str, level: str, text: str) -> HttpResponse:
    """After an action: for htmx the refreshed card carrying the outcome, else a message and the page it was taken on."""
    next_url = _page_of(connector_id, request.POST.get("next", ""))
    if request.headers.get("HX-Request") == "true":
        connector = selectors.access_connector(principal, connector_id)
        return _render_card(request, principal, connector, next_url=next_url, note=(level, text))
    getattr(messages, level)(request, text)
    return redirect(next_url or "/connectors/")


@principal_view
@require_GET
def connector_list(request: HttpRequest, principal: Principal) -> HttpResponse:
    now = timezone.now()
    connectors = list(selectors.connectors_for(principal))
    runs = recent_runs(principal, [c.pk for c in connectors], per_connector=5)
    cards = [presenters.card(c, runs.get(c.pk, []), now) for c in connectors]
    context = {
        "cards": cards,
        "kinds": [{"kind": kind, **presenters.KIND_BLURBS[kind]} for kind in FORMS],
        "cron": cron.cron_status(principal) if principal.is_admin else None,
    }
    return render(request, "connectors/list.html", context)


@principal_view
@require_GET
def connector_card(request: HttpRequest, principal: Principal, connector_id: str) -> HttpResponse:
    """The card alone: what the htmx poll swaps in every couple of seconds while a run goes."""
    connector = selectors.access_connector(principal, connector_id)
    return _render_card(request, principal, connector, next_url=request.GET.get("next", ""))


@principal_view
@require_GET
def connector_detail(request: HttpRequest, principal: Principal, connector_id: str) -> HttpResponse:
    connector = selectors.access_connector(principal, connector_id)
    return _detail(request, principal, connector)


def _detail(
    request: HttpRequest,
    principal: Principal,
    connector: Connector,
    *,
    status: int = 200,
    form: ConnectorForm | None = None,
    new_secret: str | None = None,
) -> HttpResponse:
    runs = selectors.runs_for(principal, connector.pk, limit=RUNS_ON_DETAIL)
    context: dict[str, Any] = {
        "c": presenters.card(connector, runs, timezone.now()),
        "runs": [{"run": run, "badge": presenters.RUN_STATUS_BADGES.get(run.status, "badge-neutral")} for run in runs],
        "item_details": selectors.sees_item_details(principal, connector),
        "new_secret": new_secret,
    }
    if principal.is_admin:
        clearance = clearance_name(principal.organization_id, connector.clearance_rank)
        form_class = _form_class(connector.kind)
        context.update(
            setup=presenters.setup_instructions(connector),
            form=form or form_class(initial=form_class.initial_for(connector, clearance), principal=principal, editing=True),
            clearance=clearance,
        )
    response = render(request, "connectors/detail.html", context, status=status)
    if new_secret:
        response["Cache-Control"] = "no-store"  # the secret is shown once; never keep the page
    return response


def _oauth_binding(request: HttpRequest) -> str:
    binding = request.session.get(OAUTH_BINDING_SESSION_KEY)
    if not isinstance(binding, str) or not binding:
        binding = secrets.token_urlsafe(32)
        request.session[OAUTH_BINDING_SESSION_KEY] = binding
    return binding


def _oauth_callback_uri(request: HttpRequest, provider: str) -> str:
    """Where the provider sends the browser back: built from the address this request came to
    (register exactly this with the OAuth client: README "Connecting Google and Notion with OAuth")."""
    return request.build_absolute_uri(f"/connectors/oauth/{provider}/callback/")


def _oauth_start(
    request: HttpRequest, principal: Principal, form: ConnectorForm, *, kind: str, connector: Connector | None
) -> HttpResponse | None:
    """Start the consent from a valid form; the page that sends the browser on, or None (the error is on the form)."""
    provider = form.oauth_provider or ""
    client_id, client_secret = form.oauth_client()
    config = form.config()
    try:
        started = oauth.oauth_start(
            principal=principal,
            kind=kind,
            binding=_oauth_binding(request),
            redirect_uri=_oauth_callback_uri(request, provider),
            connector_id=connector.pk if connector is not None else None,
            draft=form.draft() if connector is None else None,
            client_id=client_id,
            client_secret=client_secret,
            token_uri=str(form.cleaned_data.get("token_uri") or ""),
            api_url=str(config.get("api_url") or ""),
        )
    except CortexError as exc:
        attach_error(form, exc)
        return None
    # A page that moves on by itself rather than a redirect: the Content-Security-Policy's
    # form-action 'self' would block a form post redirected to the provider.
    label = oauth.PROVIDER_LABELS[started.provider]
    response = render(request, "connectors/oauth_redirect.html", {"authorize_url": started.authorize_url, "label": label})
    response["Cache-Control"] = "no-store"
    return response


@principal_view
@require_http_methods(["GET", "POST"])
def connector_new(request: HttpRequest, principal: Principal, kind: str) -> HttpResponse:
    _admin_only(principal)
    form_class = _form_class(kind)
    connecting = request.method == "POST" and request.POST.get("oauth") == "1" and form_class.oauth_provider is not None
    form = form_class(request.POST or None, principal=principal, connecting=connecting)
    if connecting and form.is_valid():
        to_provider = _oauth_start(request, principal, form, kind=kind, connector=None)
        if to_provider is not None:
            return to_provider
    elif request.method == "POST" and form.is_valid():
        try:
            created = services.connector_create(
                principal=principal, kind=kind, config=form.config(), credentials=form.credentials(), **form.settings()
            )
        except CortexError as exc:
            attach_error(form, exc)
        else:
            connector, secret = created.connector, created.webhook_secret
            label = presenters.KIND_BLURBS[kind]["label"]
            if secret:
                # A secret Cortex generated is shown on this answer only (never stored in a page to reload).
                messages.success(request, f"{connector.name} is connected. Paste the details below into {label}.")
                return _detail(request, principal, connector, status=201, new_secret=secret)
            messages.success(request, f"{connector.name} is connected. Test the connection, then follow the steps below.")
            return redirect(f"/connectors/{connector.pk}/")
    context = {"form": form, "kind": kind, "blurb": presenters.KIND_BLURBS[kind]}
    return render(request, "connectors/new.html", context, status=400 if request.method == "POST" else 200)


@principal_view
@require_POST
def connector_edit(request: HttpRequest, principal: Principal, connector_id: str) -> HttpResponse:
    connector = selectors.access_connector(principal, connector_id)
    _admin_only(principal)
    form = _form_class(connector.kind)(request.POST, principal=principal, editing=True)
    if form.is_valid():
        try:
            # One change: new secrets first (checked against the current settings), then the settings.
            with transaction.atomic():
                if form.credentials():
                    services.connector_rotate_credentials(
                        principal=principal, connector_id=connector.pk, credentials=form.credentials()
                    )
                connector = services.connector_update(
                    principal=principal, connector_id=connector.pk, changes={"config": form.config(), **form.settings()}
                )
        except CortexError as exc:
            attach_error(form, exc)
        else:
            messages.success(request, "Settings saved.")
            return redirect(f"/connectors/{connector.pk}/")
    return _detail(request, principal, connector, status=400, form=form)


@principal_view
@require_POST
def connector_oauth(request: HttpRequest, principal: Principal, connector_id: str) -> HttpResponse:
    """ "Connect Google account" / "Connect Notion workspace" on an existing connector's settings form.

    Only the OAuth client fields (and Google's token endpoint) of the posted form are used; the
    other settings are saved with "Save settings".
    """
    connector = selectors.access_connector(principal, connector_id)
    _admin_only(principal)
    form_class = _form_class(connector.kind)
    if form_class.oauth_provider is None:
        raise Http404("This connector does not connect through OAuth")
    form = form_class(request.POST, principal=principal, editing=True, connecting=True)
    if form.is_valid():
        to_provider = _oauth_start(request, principal, form, kind=connector.kind, connector=connector)
        if to_provider is not None:
            return to_provider
    return _detail(request, principal, connector, status=400, form=form)


@principal_view
@require_GET
def connector_oauth_callback(request: HttpRequest, principal: Principal, provider: str) -> HttpResponse:
    """Where Google or Notion sends the admin back: the token is stored, or the page says why not."""
    if provider not in oauth.PROVIDER_LABELS:
        raise Http404("No such provider")
    try:
        done = oauth.oauth_complete(
            principal=principal,
            provider=provider,
            binding=str(request.session.get(OAUTH_BINDING_SESSION_KEY) or ""),
            state=request.GET.get("state", ""),
            code=request.GET.get("code", ""),
            error=request.GET.get("error", ""),
        )
    except oauth.OAuthFailed as exc:
        messages.error(request, exc.message)
        if exc.connector_id:
            return redirect(f"/connectors/{exc.connector_id}/")
        return redirect(f"/connectors/new/{exc.kind}/" if exc.kind in FORMS else "/connectors/")
    label = oauth.PROVIDER_LABELS[done.provider]
    name = done.connector.name
    if done.created:
        messages.success(request, f"{name} is connected to {label}. Test the connection; the first run starts on schedule.")
    else:
        messages.success(request, f"{label} access for {name} is renewed; the next run uses it.")
    return redirect(f"/connectors/{done.connector.pk}/")


@principal_view
@require_POST
def connector_sync(request: HttpRequest, principal: Principal, connector_id: str) -> HttpResponse:
    """Sync now (or, with backfill=1, one run with the raised cap); a run already going is said, not doubled."""
    connector = selectors.access_connector(principal, connector_id)
    _admin_only(principal)
    backfill = request.POST.get("backfill") == "1"
    try:
        sync_services.sync_request(principal=principal, connector_id=connector.pk, backfill=backfill)
    except Conflict as exc:
        return _after_action(request, principal, connector_id, "info", exc.message)
    except CortexError as exc:
        return _after_action(request, principal, connector_id, "error", exc.message)
    return _after_action(request, principal, connector_id, "success", "Backfill started." if backfill else "Sync started.")


@principal_view
@require_POST
def connector_pause(request: HttpRequest, principal: Principal, connector_id: str) -> HttpResponse:
    connector = selectors.access_connector(principal, connector_id)
    _admin_only(principal)
    resume = request.POST.get("resume") == "1"
    try:
        if resume:
            services.connector_resume(principal=principal, connector_id=connector.pk)
        else:
            services.connector_pause(principal=principal, connector_id=connector.pk)
    except CortexError as exc:
        return _after_action(request, principal, connector_id, "error", exc.message)
    return _after_action(request, principal, connector_id, "success", f"{connector.name} {'resumed' if resume else 'paused'}.")


@principal_view
@require_POST
def connector_test(request: HttpRequest, principal: Principal, connector_id: str) -> HttpResponse:
    """Test the connection: the source's own call through its client, answered as one sentence."""
    connector = selectors.access_connector(principal, connector_id)
    _admin_only(principal)
    try:
        outcome = services.connector_test(principal=principal, connector_id=connector.pk)
        ok, message = outcome.ok, outcome.message
    except CortexError as exc:
        ok, message = False, exc.message
    if request.headers.get("HX-Request") == "true":
        return render(request, "connectors/_test_result.html", {"result": {"ok": ok, "message": message}})
    (messages.success if ok else messages.error)(request, message)
    return redirect(f"/connectors/{connector.pk}/")


@principal_view
@require_POST
def connector_rotate(request: HttpRequest, principal: Principal, connector_id: str) -> HttpResponse:
    """A new webhook secret (GitHub), shown once; the old one stops verifying at once."""
    connector = selectors.access_connector(principal, connector_id)
    _admin_only(principal)
    try:
        secret = services.connector_rotate_credentials(
            principal=principal, connector_id=connector.pk, credentials={"webhook_secret": ""}
        ).webhook_secret
    except CortexError as exc:
        messages.error(request, exc.message)
        return redirect(f"/connectors/{connector.pk}/")
    messages.success(request, "New webhook secret generated. Paste it into GitHub now; the old one no longer verifies.")
    return _detail(request, principal, selectors.access_connector(principal, connector_id), new_secret=secret)


@principal_view
@require_POST
def connector_delete(request: HttpRequest, principal: Principal, connector_id: str) -> HttpResponse:
    connector = selectors.access_connector(principal, connector_id)
    _admin_only(principal)
    try:
        services.connector_delete(principal=principal, connector_id=connector.pk)
    except CortexError as exc:
        messages.error(request, exc.message)
        return redirect(f"/connectors/{connector.pk}/")
    messages.success(request, f"{connector.name} removed. It stops syncing; the memories it brought in stay.")
    return redirect("/connectors/")

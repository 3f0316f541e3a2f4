"""Settings: my API tokens, connecting an agent over MCP, and (admins) members, scopes and grants.

Every change goes through memories.services.tenancy with `by=principal`; those services check
admin rights themselves, the views only decide what to offer.
"""

from __future__ import annotations

import json
from typing import Any

from django.contrib import messages
from django.contrib.auth import logout, update_session_auth_hash
from django.contrib.auth.decorators import login_required
from django.contrib.auth.forms import PasswordChangeForm
from django.http import Http404, HttpRequest, HttpResponse, StreamingHttpResponse
from django.http.response import HttpResponseBase
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from audit.services import record
from cortex_site.errors import CortexError, NotFound
from memories.access import Principal, clearance_names
from memories.forms import (
    AgentTokenForm,
    GrantForm,
    InviteForm,
    MemberUpdateForm,
    ScopeForm,
    ScopeUpdateForm,
    TokenForm,
    attach_error,
)
from memories.selectors import tenancy as reads
from memories.services import accounts, digest, import_export, tenancy
from memories.sessions import session_principal
from memories.views.agent_config import hook_snippet, mcp_snippets, mcp_url, oauth_snippets
from memories.views.common import principal_view

TABS = {
    "tokens": "API tokens",
    "agent": "Connect an agent",
    "account": "Account",
    "members": "Members",
    "scopes": "Scopes & grants",
}
ADMIN_TABS = {"members", "scopes"}


def _context(principal: Principal, tab: str, **overrides: Any) -> dict[str, Any]:
    if tab not in TABS or (tab in ADMIN_TABS and not principal.is_admin):
        tab = "tokens"
    context: dict[str, Any] = {
        "tab": tab,
        "tabs": [(key, label) for key, label in TABS.items() if key not in ADMIN_TABS or principal.is_admin],
        "tokens": reads.my_tokens(principal),
        "token_form": TokenForm(principal=principal),
        "agent_form": AgentTokenForm(),
        "password_form": PasswordChangeForm(principal.user),
    }
    if principal.is_admin:
        names = clearance_names(principal.organization_id)
        members = list(reads.organization_members(principal))
        scopes = list(reads.organization_scopes(principal))
        context.update(
            members=[
                {
                    "membership": m,
                    "clearance": names.get(m.clearance_rank, str(m.clearance_rank)),
                    "editable": m.clearance_rank <= principal.clearance_rank,
                    "form": MemberUpdateForm(
                        principal=principal, prefix=f"m{m.pk}", initial={"clearance": names.get(m.clearance_rank), "role": m.role}
                    ),
                }
                for m in members
            ],
            scopes=[
                {
                    "scope": s,
                    "form": ScopeUpdateForm(
                        prefix=f"s{s.pk}",
                        initial={"name": s.name, "visibility": s.visibility, "members_can_write": s.members_can_write},
                    ),
                }
                for s in scopes
            ],
            grants=list(reads.organization_grants(principal)),
            invites=list(reads.organization_invites(principal)),
            invite_form=InviteForm(principal=principal, scopes=scopes),
            scope_form=ScopeForm(),
            # Only members within the admin's rung are offered; the service refuses the others anyway.
            grant_form=GrantForm(members=[m for m in members if m.clearance_rank <= principal.clearance_rank], scopes=scopes),
        )
    context.update(overrides)
    return context


def _page(request: HttpRequest, principal: Principal, tab: str, status: int = 200, **overrides: Any) -> HttpResponse:
    overrides.setdefault("snippets", mcp_snippets(request=request))
    addresses = {"mcp_url": mcp_url(request), "oauth_snippets": oauth_snippets(request), "hook_snippet": hook_snippet(request)}
    response = render(request, "settings/index.html", _context(principal, tab, **addresses, **overrides), status=status)
    if "new_secret" in overrides:
        response["Cache-Control"] = "no-store"  # the secret is shown once; never keep the page
    return response


def _refused(request: HttpRequest, principal: Principal, tab: str, exc: CortexError) -> HttpResponse:
    """A refused change: the page again, with the reason and the refusal's own status (403, 409…)."""
    messages.error(request, exc.message)
    return _page(request, principal, tab, status=exc.status)


def _back(tab: str) -> HttpResponse:
    return redirect(f"/settings/?tab={tab}")


@principal_view
@require_GET
def settings_index(request: HttpRequest, principal: Principal) -> HttpResponse:
    return _page(request, principal, request.GET.get("tab", "tokens"))


# -- tokens ------------------------------------------------------------------------------------------


@principal_view
@require_POST
def token_create(request: HttpRequest, principal: Principal) -> HttpResponse:
    form = TokenForm(request.POST, principal=principal)
    if form.is_valid():
        try:
            token, secret = tenancy.token_create(
                membership=principal.membership,
                name=form.cleaned_data["name"],
                scope_slugs=form.cleaned_data["scopes"],
                read_only=form.cleaned_data["read_only"],
                expires_at=form.expires_at(),
                by=principal,
            )
        except CortexError as exc:
            attach_error(form, exc)
        else:
            return _page(request, principal, "tokens", status=201, new_token=token, new_secret=secret)
    return _page(request, principal, "tokens", status=400, token_form=form)


@principal_view
@require_POST
def token_revoke(request: HttpRequest, principal: Principal, token_id: str) -> HttpResponse:
    token = reads.token_for(principal, token_id)
    try:
        tenancy.token_revoke(token=token, by=principal)
    except CortexError as exc:
        messages.error(request, exc.message)
    else:
        messages.success(request, f"Token “{token.name}” revoked. Anything using it is cut off on its next request.")
    return _back("tokens")


@principal_view
@require_POST
def agent_token_create(request: HttpRequest, principal: Principal) -> HttpResponse:
    """One click: a token named for the agent, and the client configuration with it filled in."""
    form = AgentTokenForm(request.POST)
    if form.is_valid():
        try:
            token, secret = tenancy.token_create(
                membership=principal.membership,
                name=f"Agent: {form.cleaned_data['agent']}",
                read_only=form.cleaned_data["read_only"],
                by=principal,
            )
        except CortexError as exc:
            attach_error(form, exc)
        else:
            return _page(
                request,
                principal,
                "agent",
                status=201,
                new_token=token,
                new_secret=secret,
                snippets=mcp_snippets(secret, request),
            )
    return _page(request, principal, "agent", status=400, agent_form=form)


# -- members (admins) -----------------------------------------------------------------------------------


@principal_view
@require_POST
def invite_create(request: HttpRequest, principal: Principal) -> HttpResponse:
    scopes = list(reads.organization_scopes(principal))  # admins only (403 otherwise)
    form = InviteForm(request.POST, principal=principal, scopes=scopes)
    if form.is_valid():
        data = form.cleaned_data
        try:
            invite, _link = accounts.invite_create(
                organization=principal.organization,
                email=data["email"],
                clearance=data["clearance"],
                role=data["role"],
                grants=form.grants(),
                by=principal,
            )
        except CortexError as exc:
            attach_error(form, exc)
            return _page(request, principal, "members", status=exc.status, invite_form=form)
        # The same sentence whether or not the address already has an account anywhere.
        messages.success(request, f"Invitation sent to {invite.email}. The link works once and expires.")
        return _back("members")
    return _page(request, principal, "members", status=400, invite_form=form)


@principal_view
@require_POST
def invite_revoke(request: HttpRequest, principal: Principal, invite_id: str) -> HttpResponse:
    invite = reads.invite_for(principal, invite_id)
    try:
        accounts.invite_revoke(invite=invite, by=principal)
    except CortexError as exc:
        return _refused(request, principal, "members", exc)
    messages.success(request, f"The invitation of {invite.email} no longer works.")
    return _back("members")


@principal_view
@require_POST
def member_active(request: HttpRequest, principal: Principal, membership_id: int) -> HttpResponse:
    """Deactivate (tokens revoked, sessions ended, memories kept) or reactivate a member."""
    membership = reads.member_for(principal, membership_id)
    activate = request.POST.get("active") == "1"
    try:
        if activate:
            accounts.member_reactivate(membership=membership, by=principal)
        else:
            accounts.member_deactivate(membership=membership, by=principal)
    except CortexError as exc:
        return _refused(request, principal, "members", exc)
    messages.success(request, f"{membership.user.email} {'reactivated' if activate else 'deactivated; their memories stay'}.")
    return _back("members")


@principal_view
@require_POST
def member_update(request: HttpRequest, principal: Principal, membership_id: int) -> HttpResponse:
    membership = reads.member_for(principal, membership_id)
    form = MemberUpdateForm(request.POST, principal=principal, prefix=f"m{membership.pk}")
    if form.is_valid():
        try:
            tenancy.member_update(
                membership=membership, clearance=form.cleaned_data["clearance"], role=form.cleaned_data["role"], by=principal
            )
        except CortexError as exc:
            return _refused(request, principal, "members", exc)
        else:
            messages.success(request, f"{membership.user.email} updated.")
    else:
        messages.error(request, "Choose a clearance at or below your own and a role.")
    return _back("members")


@principal_view
@require_POST
def member_remove(request: HttpRequest, principal: Principal, membership_id: int) -> HttpResponse:
    membership = reads.member_for(principal, membership_id)
    try:
        tenancy.member_remove(membership=membership, by=principal)
    except CortexError as exc:
        return _refused(request, principal, "members", exc)
    else:
        messages.success(request, f"{membership.user.email} removed from {principal.organization.name}.")
    return _back("members")


# -- scopes and grants (admins) ---------------------------------------------------------------------------


@principal_view
@require_POST
def scope_create(request: HttpRequest, principal: Principal) -> HttpResponse:
    reads.organization_scopes(principal)  # admins only (403 otherwise)
    form = ScopeForm(request.POST)
    if form.is_valid():
        data = form.cleaned_data
        try:
            scope = tenancy.scope_create(
                organization=principal.organization,
                slug=data["slug"].strip(),
                name=data["name"],
                visibility=data["visibility"],
                members_can_write=data["members_can_write"],
                by=principal,
            )
        except CortexError as exc:
            attach_error(form, exc)
        else:
            messages.success(request, f"Scope {scope.slug} created. Grant people access below.")
            return _back("scopes")
    return _page(request, principal, "scopes", status=400, scope_form=form)


@principal_view
@require_POST
def scope_update(request: HttpRequest, principal: Principal, slug: str) -> HttpResponse:
    scope = reads.organization_scope(principal, slug)
    form = ScopeUpdateForm(request.POST, prefix=f"s{scope.pk}")
    if form.is_valid():
        try:
            tenancy.scope_update(
                scope=scope,
                name=form.cleaned_data["name"],
                visibility=form.cleaned_data["visibility"],
                members_can_write=form.cleaned_data["members_can_write"],
                by=principal,
            )
        except CortexError as exc:
            return _refused(request, principal, "scopes", exc)
        else:
            messages.success(request, f"Scope {scope.slug} updated.")
    else:
        messages.error(request, "Choose a visibility.")
    return _back("scopes")


@principal_view
@require_POST
def grant_set(request: HttpRequest, principal: Principal) -> HttpResponse:
    members = list(reads.organization_members(principal))
    scopes = list(reads.organization_scopes(principal))
    form = GrantForm(request.POST, members=members, scopes=scopes)
    if form.is_valid():
        membership = next(m for m in members if str(m.pk) == form.cleaned_data["member"])
        scope = next(s for s in scopes if s.slug == form.cleaned_data["scope"])
        try:
            tenancy.grant_set(membership=membership, scope=scope, can_write=form.cleaned_data["access"] == "write", by=principal)
        except CortexError as exc:
            attach_error(form, exc)
            return _page(request, principal, "scopes", status=exc.status, grant_form=form)
        else:
            messages.success(
                request,
                f"{membership.user.email} can now "
                f"{'read and write' if form.cleaned_data['access'] == 'write' else 'read'} {scope.slug}.",
            )
            return _back("scopes")
    return _page(request, principal, "scopes", status=400, grant_form=form)


@principal_view
@require_POST
def grant_revoke(request: HttpRequest, principal: Principal) -> HttpResponse:
    membership = reads.member_for(principal, request.POST.get("member"))
    slug = request.POST.get("scope", "")
    if "\x00" in slug:  # no scope is named with one, and PostgreSQL refuses it in a comparison
        raise NotFound("Scope not found.", error_code="UNKNOWN_SCOPE")
    scope = reads.organization_scope(principal, slug)
    try:
        tenancy.grant_revoke(membership=membership, scope=scope, by=principal)
    except CortexError as exc:
        return _refused(request, principal, "scopes", exc)
    else:
        messages.success(request, f"{membership.user.email} no longer has a grant on {scope.slug}.")
    return _back("scopes")


@principal_view
@require_POST
def scope_retire(request: HttpRequest, principal: Principal, slug: str) -> HttpResponse:
    scope = reads.organization_scope(principal, slug)
    retire = request.POST.get("retired") == "1"
    try:
        tenancy.scope_retire(scope=scope, retired=retire, by=principal)
    except CortexError as exc:
        return _refused(request, principal, "scopes", exc)
    messages.success(
        request, f"Scope {scope.slug} {'retired: no new writes; its memories stay readable' if retire else 'takes writes again'}."
    )
    return _back("scopes")


# -- my account ----------------------------------------------------------------------------------------------


@principal_view
@require_POST
def password_change(request: HttpRequest, principal: Principal) -> HttpResponse:
    form = PasswordChangeForm(principal.user, request.POST)
    if not form.is_valid():
        return _page(request, principal, "account", status=400, password_form=form)
    form.save()
    # Other sessions end (their auth hash no longer matches); this one carries on.
    update_session_auth_hash(request, form.user)
    record(
        "auth.password_change",
        organization=principal.organization,
        actor=principal.actor,
        target_type="user",
        target_id=principal.user.pk,
    )
    messages.success(request, "Password changed. Your other sessions are signed out.")
    return _back("account")


@principal_view
@require_POST
def digest_preference(request: HttpRequest, principal: Principal) -> HttpResponse:
    """The daily digest e-mail of Activity items, on or off (for this organization)."""
    enabled = request.POST.get("digest_email") == "on"
    digest.digest_preference_set(principal=principal, enabled=enabled)
    if enabled:
        messages.success(request, f"Daily digest on: once a day, new Activity items are e-mailed to {principal.user.email}.")
    else:
        messages.success(request, "Daily digest off.")
    return _back("account")


@principal_view
@require_POST
def sign_out_everywhere(request: HttpRequest, principal: Principal) -> HttpResponse:
    accounts.user_sign_out_everywhere(user=principal.user, organization=principal.organization, actor=principal.actor)
    logout(request)
    return redirect("login")


# -- export (admins) -----------------------------------------------------------------------------------------


@login_required
@require_GET
def memories_export(request: HttpRequest) -> HttpResponseBase:
    """Stream the organization's (or one scope's) memories as JSONL — what this admin may read, audited.

    Not principal_view: the answer is a stream, not a page.
    """
    principal = session_principal(request)
    if principal is None:
        raise Http404("Not found")
    try:
        reads.organization_scopes(principal)  # admins only
        slug = request.GET.get("scope", "")
        scope = reads.organization_scope(principal, slug) if slug else None
        export = import_export.memory_export(principal=principal, scope=scope, status=request.GET.get("status", "active"))
    except NotFound:
        raise Http404("Not found") from None
    except CortexError as exc:
        return HttpResponse(exc.message, status=exc.status, content_type="text/plain; charset=utf-8")
    lines = (json.dumps(line, ensure_ascii=False, default=str) + "\n" for line in export.lines)
    response = StreamingHttpResponse(lines, content_type="application/x-ndjson")
    name = f"{principal.organization.slug}{'-' + scope.slug if scope else ''}-memories.jsonl"
    response["Content-Disposition"] = f'attachment; filename="{name}"'
    response["Cache-Control"] = "no-store"
    return response

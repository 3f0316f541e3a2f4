"""Sign in (throttled), sign out, switch organization, accept an invitation, reset a password."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib.auth import login
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_POST

from audit.context import current_client_ip
from audit.services import Actor, record
from cortex_site.errors import CortexError
from memories import login_throttle
from memories.forms import InviteAcceptForm, attach_error
from memories.services import accounts
from memories.sessions import session_principal, switch_organization


class LoginView(auth_views.LoginView):
    template_name = "auth/login.html"
    redirect_authenticated_user = True

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        from memories.oidc import sso_enabled

        context = super().get_context_data(**kwargs)
        context["sso_name"] = settings.OIDC_PROVIDER_NAME if sso_enabled() else ""
        context["sso_failed"] = self.request.GET.get("sso") == "failed"
        return context

    def post(self, request: HttpRequest, *args, **kwargs) -> HttpResponse:  # type: ignore[no-untyped-def]
        # Checked before the password is: a flood of guesses is answered 429 without an audit row each.
        wait = login_throttle.retry_after("login", account=request.POST.get("username", ""), address=current_client_ip())
        if wait is not None:
            response = self.render_to_response(self.get_context_data(throttled_minutes=max(1, round(wait / 60))), status=429)
            response["Retry-After"] = str(wait)
            return response
        return super().post(request, *args, **kwargs)

    def form_valid(self, form):  # type: ignore[no-untyped-def]
        login_throttle.clear_account("login", form.get_user().email)
        response = super().form_valid(form)
        principal = session_principal(self.request)
        record(
            "auth.login",
            organization=principal.organization if principal else None,
            actor=principal.actor
            if principal
            else Actor(kind="session", label=form.get_user().email, user_id=form.get_user().pk),
        )
        return response

    def form_invalid(self, form):  # type: ignore[no-untyped-def]
        # The address tried is kept (it helps spot credential stuffing); the password never is.
        tried = form.data.get("username", "").replace("\x00", "")[:254]  # the audit log cannot store a NUL
        exhausted = login_throttle.note_failure("login", account=tried, address=current_client_ip())
        record("auth.login_failed", organization=None, actor=Actor.anonymous(tried), outcome="denied")
        if exhausted:
            record("auth.login_throttled", organization=None, actor=Actor.anonymous(tried), outcome="denied")
        return super().form_invalid(form)


class LogoutView(auth_views.LogoutView):
    def post(self, request: HttpRequest, *args, **kwargs) -> HttpResponse:  # type: ignore[no-untyped-def]
        principal = session_principal(request)
        if principal is not None:
            record("auth.logout", organization=principal.organization, actor=principal.actor)
        return super().post(request, *args, **kwargs)


@login_required
@require_POST
def switch_organization_view(request: HttpRequest) -> HttpResponse:
    slug = request.POST.get("organization", "")
    principal = switch_organization(request, slug) if "\x00" not in slug else None  # PostgreSQL refuses a NUL
    if principal is None:
        raise Http404("No such organization")
    record("auth.switch_organization", organization=principal.organization, actor=principal.actor)
    next_url = request.POST.get("next", "")
    if not url_has_allowed_host_and_scheme(next_url, allowed_hosts={request.get_host()}, require_https=request.is_secure()):
        next_url = "/"
    return redirect(next_url)


def invite_accept_view(request: HttpRequest, secret: str) -> HttpResponse:
    """The invitation link: set a password (new account) or, for an existing account, sign in and accept."""
    try:
        invite = accounts.invite_by_link(secret)
    except CortexError:
        return render(request, "auth/invite_invalid.html", status=404)
    needs_sign_in = accounts.invite_needs_sign_in(invite)
    signed_in = request.user if request.user.is_authenticated else None
    form = InviteAcceptForm(request.POST or None)
    error = ""
    if request.method == "POST" and (needs_sign_in or form.is_valid()):
        try:
            membership = accounts.invite_accept(
                raw=secret,
                password="" if needs_sign_in else form.cleaned_data["password"],
                name="" if needs_sign_in else form.cleaned_data["name"],
                signed_in=signed_in,  # type: ignore[arg-type]
            )
        except CortexError as exc:
            if exc.status == 404:
                return render(request, "auth/invite_invalid.html", status=404)
            if needs_sign_in:
                error = exc.message
            else:
                attach_error(form, exc)
            status = exc.status
        else:
            if not needs_sign_in:
                login(request, membership.user, backend="django.contrib.auth.backends.ModelBackend")
            switch_organization(request, membership.organization.slug)
            return redirect("home")
    else:
        status = 400 if request.method == "POST" else 200
    context = {"invite": invite, "form": form, "needs_sign_in": needs_sign_in, "signed_in_as": signed_in, "error": error}
    response = render(request, "auth/invite_accept.html", context, status=status)
    response["Cache-Control"] = "no-store"
    response["Referrer-Policy"] = "no-referrer"  # the link's secret is in the URL
    return response


class PasswordResetView(auth_views.PasswordResetView):
    """Always the same answer, whether or not the address has an account (no probing)."""

    template_name = "auth/password_reset_form.html"
    email_template_name = "auth/password_reset_email.txt"
    subject_template_name = "auth/password_reset_subject.txt"
    success_url = "/password-reset/sent/"

    def post(self, request: HttpRequest, *args, **kwargs) -> HttpResponse:  # type: ignore[no-untyped-def]
        wait = login_throttle.retry_after("reset", account=request.POST.get("email", ""), address=current_client_ip())
        if wait is not None:
            response = self.render_to_response(self.get_context_data(throttled_minutes=max(1, round(wait / 60))), status=429)
            response["Retry-After"] = str(wait)
            return response
        return super().post(request, *args, **kwargs)

    def form_valid(self, form):  # type: ignore[no-untyped-def]
        email = form.cleaned_data["email"].strip().lower()
        # Each request counts against the budget, so reset mails cannot be used to flood an inbox.
        login_throttle.note_failure("reset", account=email, address=current_client_ip())
        record("auth.password_reset_request", organization=None, actor=Actor.anonymous(email[:254]))
        # Links point at the public address, never at whatever Host the request carried.
        self.extra_email_context = {"base_url": settings.CORTEX_BASE_URL}
        return super().form_valid(form)


class PasswordResetConfirmView(auth_views.PasswordResetConfirmView):
    template_name = "auth/password_reset_confirm.html"
    success_url = "/password-reset/done/"

    def form_valid(self, form):  # type: ignore[no-untyped-def]
        response = super().form_valid(form)
        user = form.user
        record("auth.password_reset", organization=None, actor=Actor(kind="session", label=user.email, user_id=user.pk))
        return response

"""Sign in, sign out, switch organization."""

from __future__ import annotations

from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_POST

from audit.services import Actor, record
from memories.sessions import session_principal, switch_organization


class LoginView(auth_views.LoginView):
    template_name = "auth/login.html"
    redirect_authenticated_user = True

    def form_valid(self, form):  # type: ignore[no-untyped-def]
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
        record(
            "auth.login_failed", organization=None, actor=Actor.anonymous(form.data.get("username", "")[:254]), outcome="denied"
        )
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
    principal = switch_organization(request, request.POST.get("organization", ""))
    if principal is None:
        raise Http404("No such organization")
    record("auth.switch_organization", organization=principal.organization, actor=principal.actor)
    next_url = request.POST.get("next", "")
    if not url_has_allowed_host_and_scheme(next_url, allowed_hosts={request.get_host()}, require_https=request.is_secure()):
        next_url = "/"
    return redirect(next_url)

"""The consent page of the OAuth flow: a signed-in person decides what an MCP client may do.

The toolkit's AuthorizationView validates the request (client, exact redirect URI, PKCE S256,
resource) and issues the code; this subclass adds Cortex's choices — which organization, which
of the person's scopes, read-only or not, and for how long — and refuses any resource other
than this server's MCP endpoint, so every token is audience-bound to it.
"""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any
from urllib.parse import urlsplit

from django import forms
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.utils import timezone
from django.utils.decorators import method_decorator
from django.views.decorators.csrf import csrf_exempt
from oauth2_provider.exceptions import OAuthToolkitError
from oauth2_provider.forms import AllowForm
from oauth2_provider.models import get_application_model
from oauth2_provider.views import AuthorizationView, DynamicClientRegistrationView
from oauthlib.oauth2.rfc6749.errors import CustomOAuth2Error

from cortex_site.errors import CortexError
from memories.access import principals_for_user
from memories.mcp.auth import mcp_resource_url
from memories.services.oauth import oauth_grant_create, oauth_grant_discard_unused, same_resource

EXPIRY_CHOICES = [("1", "1 day"), ("7", "7 days"), ("30", "30 days"), ("90", "90 days"), ("0", "Until I revoke it")]


class ConsentForm(AllowForm):
    organization = forms.ChoiceField(label="Organization")
    scopes = forms.MultipleChoiceField(label="Scopes the agent may use", required=False, widget=forms.CheckboxSelectMultiple)
    default_scope = forms.ChoiceField(
        label="New memories go to", required=False, help_text="Where the agent's `remember` lands when it names no scope."
    )
    read_only = forms.BooleanField(label="Read-only (recall, never remember or change)", required=False)
    expires = forms.ChoiceField(label="Access lasts", choices=EXPIRY_CHOICES, initial="30")

    def __init__(self, *args: Any, principals: list[Any], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.principals = {str(p.membership.pk): p for p in principals}
        self.fields["organization"].choices = [(key, p.organization.name) for key, p in self.principals.items()]
        self.fields["scopes"].choices = [
            (f"{key}:{scope.slug}", f"{scope.name} ({scope.slug})")
            for key, p in self.principals.items()
            for scope in p.readable_scopes()
        ]
        self.fields["default_scope"].choices = [("", "The organization's default (public-docs)")] + [
            (f"{key}:{scope.slug}", f"{p.organization.name} — {scope.name}")
            for key, p in self.principals.items()
            for scope in p.writable_scopes()
        ]
        if len(self.principals) == 1:
            self.initial.setdefault("organization", next(iter(self.principals)))
        self.initial.setdefault("scopes", [value for value, _ in self.fields["scopes"].choices])

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        if not data.get("allow"):
            return data
        key = data.get("organization")
        chosen = data.get("scopes") or []
        slugs = [value.split(":", 1)[1] for value in chosen if value.split(":", 1)[0] == key]
        if not slugs:
            raise forms.ValidationError("Choose at least one scope of that organization for the agent.")
        if len(slugs) != len(chosen):
            raise forms.ValidationError("The scopes chosen must all belong to the organization chosen.")
        default = data.get("default_scope") or ""
        if default and default.split(":", 1)[0] != key:
            raise forms.ValidationError("The default scope must belong to the organization chosen.")
        if default and default.split(":", 1)[1] not in slugs:
            raise forms.ValidationError("The default scope must be one of the scopes the agent may use.")
        data["default_scope_slug"] = default.split(":", 1)[1] if default else None
        data["scope_slugs"] = slugs
        data["principal"] = self.principals[key]
        days = int(data.get("expires") or 0)
        data["expires_at"] = timezone.now() + timedelta(days=days) if days else None
        return data


class ConsentView(AuthorizationView):
    template_name = "oauth/consent.html"
    form_class = ConsentForm
    cortex_grant_id: Any = None

    def get_form_kwargs(self) -> dict[str, Any]:
        kwargs = super().get_form_kwargs()
        kwargs["principals"] = list(principals_for_user(self.request.user))  # type: ignore[arg-type]
        return kwargs

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        context = super().get_context_data(**kwargs)
        form = context.get("form")
        if "application" not in context and form is not None:
            client_id = form.data.get("client_id") or form.initial.get("client_id")
            context["application"] = get_application_model().objects.filter(client_id=client_id).first()
        context["mcp_url"] = mcp_resource_url()
        return context

    def _wrong_resource(self, resources: list[str], state: str | None, redirect_uri: str) -> OAuthToolkitError | None:
        if len(resources) == 1 and same_resource(resources[0], mcp_resource_url()):
            return None
        return OAuthToolkitError(
            error=CustomOAuth2Error(
                error="invalid_target",
                description=f"Cortex issues tokens only for its MCP endpoint: send resource={mcp_resource_url()}.",
                state=state,
            ),
            redirect_uri=redirect_uri,
        )

    def get(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        response = super().get(request, *args, **kwargs)
        data = getattr(self, "oauth2_data", None)
        if response.status_code != 200 or not data:  # the toolkit answered already (an error, a login prompt)
            return response
        error = self._wrong_resource(request.GET.getlist("resource"), data.get("state"), data["redirect_uri"])
        if data.get("code_challenge_method") != "S256":
            # The toolkit refuses "plain" only when the code is issued; say so before the person consents.
            error = OAuthToolkitError(
                error=CustomOAuth2Error(
                    error="invalid_request",
                    description="PKCE with code_challenge_method=S256 is required.",
                    state=data.get("state"),
                ),
                redirect_uri=data["redirect_uri"],
            )
        if error is not None:
            return self.error_response(error, data.get("application"))
        return response

    def form_valid(self, form: ConsentForm) -> HttpResponse:  # type: ignore[override]
        if not form.cleaned_data.get("allow"):
            return super().form_valid(form)
        application = get_application_model().objects.get(client_id=form.cleaned_data["client_id"])
        resources = (form.cleaned_data.get("resource") or "").split()
        error = self._wrong_resource(resources, form.cleaned_data.get("state"), form.cleaned_data["redirect_uri"])
        if error is not None:
            return self.error_response(error, application)
        principal = form.cleaned_data["principal"]
        try:
            grant = oauth_grant_create(
                membership=principal.membership,
                application=application,
                resource=resources[0],
                scope_slugs=form.cleaned_data["scope_slugs"],
                read_only=form.cleaned_data["read_only"],
                expires_at=form.cleaned_data["expires_at"],
                default_scope_slug=form.cleaned_data["default_scope_slug"],
            )
        except CortexError as exc:
            form.add_error(None, exc.message)
            return self.form_invalid(form)
        self.cortex_grant_id = grant.pk
        response = super().form_valid(form)
        oauth_grant_discard_unused(grant_id=grant.pk)  # when the toolkit refused to issue a code after all
        return response

    def create_authorization_response(self, request: Any, scopes: Any, credentials: dict[str, Any], allow: bool) -> Any:
        if allow and self.cortex_grant_id is not None:
            # oauthlib sets extra credentials on its request: the validator links the code to the grant.
            credentials["cortex_grant_id"] = str(self.cortex_grant_id)
        return super().create_authorization_response(request, scopes, credentials, allow)


LOOPBACK_HOSTS = {"127.0.0.1", "localhost", "::1"}


def redirect_uri_problem(uri: Any) -> str | None:
    """Why a redirect URI may not be registered, or None: https anywhere, plain http only to this
    machine (RFC 8252 loopback redirects for desktop clients)."""
    if not isinstance(uri, str):
        return "Redirect URIs must be strings."
    parts = urlsplit(uri)
    if parts.fragment:
        return f"{uri} has a fragment; redirect URIs may not (RFC 6749 §3.1.2)."
    if parts.scheme == "https" and parts.hostname:
        return None
    if parts.scheme == "http" and parts.hostname in LOOPBACK_HOSTS:
        return None
    return f"{uri} is not allowed: use https, or http only to a loopback address (127.0.0.1, localhost, [::1])."


@method_decorator(csrf_exempt, name="dispatch")
class RegistrationView(DynamicClientRegistrationView):
    """RFC 7591 registration, open to any client (as MCP clients expect), with Cortex's redirect rule."""

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        try:
            metadata = json.loads(request.body or b"{}")
        except ValueError:
            metadata = None
        if isinstance(metadata, dict):
            for uri in metadata.get("redirect_uris") or []:
                problem = redirect_uri_problem(uri)
                if problem is not None:
                    return JsonResponse({"error": "invalid_redirect_uri", "error_description": problem}, status=400)
        return super().post(request, *args, **kwargs)

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView
from oauth2_provider.views import OAuthServerMetadataView

from connectors.cron_api import CronDispatchView
from cortex_site.health import healthz
from memories import oidc
from memories.views import auth, styleguide

urlpatterns = [
    path("healthz", healthz, name="healthz"),
    path("login/", auth.LoginView.as_view(), name="login"),
    path("logout/", auth.LogoutView.as_view(), name="logout"),
    path("org/switch", auth.switch_organization_view, name="switch-organization"),
    path("invite/<str:secret>/", auth.invite_accept_view, name="invite-accept"),
    path("oidc/authenticate/", oidc.SsoStartView.as_view(), name="oidc_authentication_init"),
    path("oidc/callback/", oidc.SsoCallbackView.as_view(), name="oidc_authentication_callback"),
    path("password-reset/", auth.PasswordResetView.as_view(), name="password-reset"),
    path(
        "password-reset/sent/",
        auth_views.PasswordResetDoneView.as_view(template_name="auth/password_reset_sent.html"),
        name="password-reset-sent",
    ),
    path("password-reset/<uidb64>/<token>/", auth.PasswordResetConfirmView.as_view(), name="password_reset_confirm"),
    path(
        "password-reset/done/",
        auth_views.PasswordResetCompleteView.as_view(template_name="auth/password_reset_done.html"),
        name="password-reset-done",
    ),
    path("styleguide/", styleguide.styleguide, name="styleguide"),
    path("api/schema/", SpectacularAPIView.as_view(), name="api-schema"),
    # The split view serves Swagger UI's start-up script from its own URL: no inline script, so the CSP holds.
    path("api/docs/", SpectacularSwaggerSplitView.as_view(url_name="api-schema"), name="api-docs"),
    path("api/cron/connectors", CronDispatchView.as_view(), name="api-cron-connectors"),
    path("api/", include("connectors.api_urls")),
    path("api/", include("memories.api.urls")),
    path("admin/", admin.site.urls),
    # OAuth 2.1 for MCP clients: RFC 8414 metadata at the root, the endpoints under /oauth/.
    path(".well-known/oauth-authorization-server", OAuthServerMetadataView.as_view(), name="oauth-server-metadata"),
    path("oauth/", include("memories.oauth.urls")),
    # The browser UI last: routes other apps declare above take precedence over its placeholders.
    path("", include("memories.views.urls")),
]

handler400 = "memories.views.errors.bad_request"
handler403 = "memories.views.errors.permission_denied"
handler404 = "memories.views.errors.page_not_found"
handler500 = "memories.views.errors.server_error"

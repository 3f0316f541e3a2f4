"""The authorization server's endpoints, in the toolkit's URL namespace (its metadata view reverses them).

Mounted at /oauth/ by cortex_site.urls; the RFC 8414 metadata document sits at the server root.
"""

from __future__ import annotations

from django.urls import path
from oauth2_provider import views as oauth_views

from memories.oauth.views import ConsentView, RegistrationView

app_name = "oauth2_provider"

urlpatterns = [
    path("authorize/", ConsentView.as_view(), name="authorize"),
    path("token/", oauth_views.TokenView.as_view(), name="token"),
    path("revoke_token/", oauth_views.RevokeTokenView.as_view(), name="revoke-token"),
    path("register/", RegistrationView.as_view(), name="dcr-register"),
    path(
        "register/<str:client_id>/",
        oauth_views.DynamicClientRegistrationManagementView.as_view(),
        name="dcr-register-management",
    ),
]

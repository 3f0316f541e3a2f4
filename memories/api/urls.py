from django.urls import path

from memories.api import tenancy

urlpatterns = [
    path("me", tenancy.MeView.as_view(), name="api-me"),
    path("scopes", tenancy.ScopeListView.as_view(), name="api-scopes"),
]

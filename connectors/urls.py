"""Browser routes of the Connectors page (mounted at /connectors/; the REST API lives under /api/connectors)."""

from django.urls import path

from connectors import views

urlpatterns = [
    path("", views.connector_list, name="connectors"),
    path("new/<str:kind>/", views.connector_new, name="connector-new"),
    path("oauth/<str:provider>/callback/", views.connector_oauth_callback, name="connector-oauth-callback"),
    path("<str:connector_id>/", views.connector_detail, name="connector-detail"),
    path("<str:connector_id>/card/", views.connector_card, name="connector-card"),
    path("<str:connector_id>/edit/", views.connector_edit, name="connector-edit"),
    path("<str:connector_id>/sync/", views.connector_sync, name="connector-sync"),
    path("<str:connector_id>/pause/", views.connector_pause, name="connector-pause"),
    path("<str:connector_id>/test/", views.connector_test, name="connector-test"),
    path("<str:connector_id>/rotate/", views.connector_rotate, name="connector-rotate"),
    path("<str:connector_id>/oauth/", views.connector_oauth, name="connector-oauth"),
    path("<str:connector_id>/delete/", views.connector_delete, name="connector-delete"),
]

from django.urls import path

from connectors import api, webhooks

urlpatterns = [
    path("connectors", api.ConnectorListCreateView.as_view(), name="api-connectors"),
    path("connectors/<str:connector_id>", api.ConnectorDetailView.as_view(), name="api-connector"),
    path("connectors/<str:connector_id>/sync", api.ConnectorSyncView.as_view(), name="api-connector-sync"),
    path("connectors/<str:connector_id>/runs", api.ConnectorRunsView.as_view(), name="api-connector-runs"),
    path("connectors/<str:connector_id>/runs/<str:run_id>", api.ConnectorRunDetailView.as_view(), name="api-connector-run"),
    path("connectors/<str:connector_id>/credentials", api.ConnectorCredentialsView.as_view(), name="api-connector-credentials"),
    path("connectors/<str:connector_id>/test", api.ConnectorTestView.as_view(), name="api-connector-test"),
    path("webhooks/<str:kind>/<str:connector_id>", webhooks.webhook, name="connectors-webhook"),
]

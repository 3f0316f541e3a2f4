from django.urls import path

from memories.api import memories, tenancy

urlpatterns = [
    path("me", tenancy.MeView.as_view(), name="api-me"),
    path("scopes", tenancy.ScopeListView.as_view(), name="api-scopes"),
    path("memories", memories.MemoryListCreateView.as_view(), name="api-memories"),
    path("memories/<str:memory_id>", memories.MemoryDetailView.as_view(), name="api-memory"),
    path("memories/<str:memory_id>/supersede", memories.MemorySupersedeView.as_view(), name="api-memory-supersede"),
    path("memories/<str:memory_id>/redact", memories.MemoryRedactView.as_view(), name="api-memory-redact"),
    path("recall", memories.RecallView.as_view(), name="api-recall"),
]

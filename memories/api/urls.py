from django.urls import path

from audit import api as audit_api
from memories.api import ask, briefs, conflicts, entities, memories, redactions, tenancy

urlpatterns = [
    path("me", tenancy.MeView.as_view(), name="api-me"),
    path("scopes", tenancy.ScopeListView.as_view(), name="api-scopes"),
    path("memories", memories.MemoryListCreateView.as_view(), name="api-memories"),
    # Fixed paths under memories/ come before memories/<id>.
    path("memories/extract-decisions", briefs.ExtractDecisionsView.as_view(), name="api-extract-decisions"),
    path("memories/<str:memory_id>", memories.MemoryDetailView.as_view(), name="api-memory"),
    path("memories/<str:memory_id>/supersede", memories.MemorySupersedeView.as_view(), name="api-memory-supersede"),
    path("memories/<str:memory_id>/redact", memories.MemoryRedactView.as_view(), name="api-memory-redact"),
    path("memories/<str:memory_id>/restore", memories.MemoryRestoreView.as_view(), name="api-memory-restore"),
    path(
        "memories/<str:memory_id>/redaction-requests",
        redactions.MemoryRedactionRequestView.as_view(),
        name="api-memory-redaction-requests",
    ),
    path("redaction-requests", redactions.RedactionRequestListView.as_view(), name="api-redaction-requests"),
    path(
        "redaction-requests/<str:request_id>/decide",
        redactions.RedactionRequestDecideView.as_view(),
        name="api-redaction-request-decide",
    ),
    path("recall", memories.RecallView.as_view(), name="api-recall"),
    path("ask", ask.AskView.as_view(), name="api-ask"),
    path("meeting-briefs", briefs.MeetingBriefCreateView.as_view(), name="api-meeting-briefs"),
    path("jobs/<str:job_id>", briefs.JobDetailView.as_view(), name="api-job"),
    path("conflicts", conflicts.ConflictListView.as_view(), name="api-conflicts"),
    path("conflicts/<str:conflict_id>", conflicts.ConflictDetailView.as_view(), name="api-conflict"),
    path("conflicts/<str:conflict_id>/resolve", conflicts.ConflictResolveView.as_view(), name="api-conflict-resolve"),
    path("conflicts/<str:conflict_id>/reopen", conflicts.ConflictReopenView.as_view(), name="api-conflict-reopen"),
    path("entities", entities.EntityListView.as_view(), name="api-entities"),
    path("entities/<str:entity_id>", entities.EntityDetailView.as_view(), name="api-entity"),
    path("audit", audit_api.AuditListView.as_view(), name="api-audit"),
    path("audit/verify", audit_api.AuditVerifyView.as_view(), name="api-audit-verify"),
    path("audit/export", audit_api.AuditExportView.as_view(), name="api-audit-export"),
]

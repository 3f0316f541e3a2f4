"""Browser routes for memories, the dashboard and settings (the API lives under /api/)."""

from django.urls import path

from memories.views import ask, briefs, conflicts, entities, home, memories, placeholders, redactions, settings_pages

urlpatterns = [
    path("", home.home, name="home"),
    path("memories/", memories.memory_list, name="memory-list"),
    path("ask/", ask.ask_page, name="ask"),
    path("memories/new/", memories.memory_new, name="memory-new"),
    path("memories/upload/", memories.memory_upload, name="memory-upload"),
    path("memories/preview/", memories.markdown_preview, name="memory-preview"),
    path("memories/<uuid:memory_id>/", memories.memory_detail, name="memory-detail"),
    path("memories/<uuid:memory_id>/edit/", memories.memory_edit, name="memory-edit"),
    path("memories/<uuid:memory_id>/redact/", memories.memory_redact_view, name="memory-redact"),
    path("memories/<uuid:memory_id>/restore/", memories.memory_restore_view, name="memory-restore"),
    path(
        "memories/<uuid:memory_id>/request-redaction/",
        redactions.memory_request_redaction,
        name="memory-request-redaction",
    ),
    path("redaction-requests/", redactions.redaction_queue, name="redaction-requests"),
    path("redaction-requests/<uuid:request_id>/decide/", redactions.redaction_decide, name="redaction-request-decide"),
    path("briefs/new/", briefs.brief_new, name="brief-new"),
    path("briefs/extract/", briefs.brief_extract, name="brief-extract"),
    path("briefs/jobs/<uuid:job_id>/", briefs.brief_job, name="brief-job"),
    path("conflicts/", conflicts.conflict_list, name="conflicts"),
    path("conflicts/policy/", conflicts.conflict_policy_view, name="conflict-policy"),
    path("conflicts/<uuid:conflict_id>/", conflicts.conflict_detail, name="conflict-detail"),
    path("conflicts/<uuid:conflict_id>/resolve/", conflicts.conflict_resolve_view, name="conflict-resolve"),
    path("conflicts/<uuid:conflict_id>/reopen/", conflicts.conflict_reopen_view, name="conflict-reopen"),
    path("entities/", entities.entity_list, name="entities"),
    path("entities/<int:entity_id>/", entities.entity_detail, name="entity-detail"),
    path("settings/", settings_pages.settings_index, name="settings"),
    path("settings/tokens/", settings_pages.token_create, name="settings-token-create"),
    path("settings/tokens/<str:token_id>/revoke/", settings_pages.token_revoke, name="settings-token-revoke"),
    path("settings/agent/", settings_pages.agent_token_create, name="settings-agent-token"),
    path("settings/members/", settings_pages.member_add, name="settings-member-add"),
    path("settings/members/<int:membership_id>/", settings_pages.member_update, name="settings-member-update"),
    path("settings/members/<int:membership_id>/remove/", settings_pages.member_remove, name="settings-member-remove"),
    path("settings/scopes/", settings_pages.scope_create, name="settings-scope-create"),
    path("settings/scopes/<str:slug>/", settings_pages.scope_update, name="settings-scope-update"),
    path("settings/grants/", settings_pages.grant_set, name="settings-grant-set"),
    path("settings/grants/revoke/", settings_pages.grant_revoke, name="settings-grant-revoke"),
    # Until the connectors and audit issues bring their pages (their routes replace these).
    path("connectors/", placeholders.connectors_soon, name="connectors"),
    path("audit/", placeholders.audit_soon, name="audit"),
]

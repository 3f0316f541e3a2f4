from django.contrib import admin

from audit.models import AuditEvent


@admin.register(AuditEvent)
class AuditEventAdmin(admin.ModelAdmin):
    """The log is append-only (a database trigger refuses changes); the admin only reads it."""

    list_display = ("created_at", "organization", "actor_label", "action", "target_type", "target_id", "outcome", "request_id")
    list_filter = ("organization", "outcome", "actor_kind")
    search_fields = ("action", "actor_label", "target_id", "request_id")

    def has_add_permission(self, request):  # type: ignore[no-untyped-def]
        return False

    def has_change_permission(self, request, obj=None):  # type: ignore[no-untyped-def]
        return False

    def has_delete_permission(self, request, obj=None):  # type: ignore[no-untyped-def]
        return False

"""Django admin for staff operators: read-mostly.

Tenancy changes go through the services (CLI, Settings pages, API) so they are checked and
audited; here staff can look, and switch a person's account on or off. Memory content is not
shown at all: staff are operators, not readers, and clearance-gating holds for them too.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from memories.models import ApiToken, ClearanceLevel, Membership, Memory, Organization, Scope, ScopeGrant, User


class ReadOnlyAdmin(admin.ModelAdmin):
    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(User)
class UserAdmin(admin.ModelAdmin):
    list_display = ("email", "name", "is_active", "is_staff", "date_joined")
    list_filter = ("is_active", "is_staff")
    search_fields = ("email", "name")
    fields = ("email", "name", "is_active", "is_staff", "date_joined", "last_login")
    readonly_fields = ("email", "name", "is_staff", "date_joined", "last_login")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class ClearanceInline(admin.TabularInline):
    model = ClearanceLevel
    extra = 0
    can_delete = False
    readonly_fields = ("name", "rank")

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(Organization)
class OrganizationAdmin(ReadOnlyAdmin):
    list_display = ("slug", "name", "created_at")
    search_fields = ("slug", "name")
    inlines = [ClearanceInline]


@admin.register(Membership)
class MembershipAdmin(ReadOnlyAdmin):
    list_display = ("user", "organization", "role", "clearance_rank", "created_at")
    list_filter = ("organization", "role")
    search_fields = ("user__email",)


@admin.register(Scope)
class ScopeAdmin(ReadOnlyAdmin):
    list_display = ("slug", "organization", "visibility", "members_can_write", "created_at")
    list_filter = ("organization", "visibility")


@admin.register(ScopeGrant)
class ScopeGrantAdmin(ReadOnlyAdmin):
    list_display = ("membership", "scope", "can_write", "created_at")
    list_filter = ("scope__organization",)


@admin.register(ApiToken)
class ApiTokenAdmin(ReadOnlyAdmin):
    list_display = ("prefix", "name", "membership", "read_only", "expires_at", "revoked_at", "last_used_at")
    list_filter = ("read_only", "membership__organization")
    exclude = ("secret_hash",)


@admin.register(Memory)
class MemoryAdmin(ReadOnlyAdmin):
    """Metadata only — never title or content."""

    list_display = ("id", "organization", "scope", "category", "source", "status", "clearance_rank", "created_at")
    list_filter = ("organization", "status", "source")
    fields = (
        "id",
        "organization",
        "scope",
        "category",
        "source",
        "status",
        "clearance_rank",
        "valid_from",
        "valid_until",
        "created_at",
        "updated_at",
    )

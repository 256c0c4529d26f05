"""The audit log in the admin: listed, filtered and read by staff with the view permission;
no one adds, changes or deletes an entry there."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from audit_app.models import AuditEntry


@admin.register(AuditEntry)
class AuditEntryAdmin(admin.ModelAdmin):
    list_display = ["at", "actor", "action", "subject", "summary"]
    list_filter = ["action"]
    date_hierarchy = "at"
    search_fields = ["summary", "object_id"]
    list_select_related = ["actor", "subject"]
    fields = ["at", "actor", "action", "subject", "object_type", "object_id", "summary", "details"]
    readonly_fields = fields

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

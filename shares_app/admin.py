"""Share links in the admin: who shared which chat, until when; staff with the change
permission revoke any (written to the audit log). A link's token is never stored to show."""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from audit_app.models import Action
from audit_app.record import record
from shares_app import links
from shares_app.models import ShareLink


@admin.register(ShareLink)
class ShareLinkAdmin(admin.ModelAdmin):
    list_display = ["prefix", "owner", "chat", "created_at", "snapshot_at", "expires_at", "state"]
    list_filter = ["show_owner", "show_tools", ("revoked_at", admin.EmptyFieldListFilter)]
    list_select_related = ["owner"]
    search_fields = ["prefix", "owner__username"]
    fields = [
        "prefix", "owner", "session", "created_at", "snapshot_at", "expires_at", "revoked_at",
        "show_owner", "show_tools",
    ]  # fmt: skip
    readonly_fields = fields
    actions = ["revoke"]

    @admin.display(description="chat")
    def chat(self, obj: ShareLink) -> str:
        return obj.title

    @admin.display(description="state")
    def state(self, obj: ShareLink) -> str:
        if obj.revoked_at:
            return "revoked"
        return "live" if obj.live() else "expired"

    @admin.action(description="Revoke the selected share links", permissions=["change"])
    def revoke(self, request: HttpRequest, queryset: QuerySet[ShareLink]) -> None:
        revoked = 0
        for link in queryset.filter(revoked_at=None):
            if links.revoke(link):
                revoked += 1
                record(
                    request.user,
                    Action.SHARE_REVOKED,
                    f"Revoked share link {link.pk}",
                    subject=link.owner,
                    obj=link,
                )
        self.message_user(request, f"Revoked {revoked} link(s).", messages.SUCCESS)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

from __future__ import annotations

from django.contrib import admin
from django.contrib.admin import helpers
from django.contrib.auth.admin import UserAdmin
from django.utils.html import format_html
from django.utils.safestring import SafeString, mark_safe
from django.utils.translation import gettext as _

from sessions_app.models import Agent, ApiToken, LLMCall, Message, Run, Session, User

admin.site.register(User, UserAdmin)


class ListAdmin(admin.ModelAdmin):
    """For the large tables: each row's action checkbox is the same HTML as Django's, written
    directly. Django renders it as a form widget, through the form template engine, once per
    row: a third of a changelist page's time."""

    @admin.display(description=mark_safe('<input type="checkbox" id="action-toggle">'))
    def action_checkbox(self, obj: object) -> SafeString:
        return format_html(
            '<input type="checkbox" name="{}" value="{}" class="action-select" aria-label="{}">',
            helpers.ACTION_CHECKBOX_NAME,
            str(obj.pk),  # type: ignore[attr-defined]
            format_html(_("Select this object for an action - {}"), obj),
        )


@admin.register(Agent)
class AgentAdmin(admin.ModelAdmin):
    list_display = ["name", "model", "is_default", "num_history_runs", "updated_at"]


class RunInline(admin.TabularInline):
    model = Run
    fields = ["position", "status", "input", "model", "total_tokens", "duration", "created_at"]
    readonly_fields = fields
    extra = 0
    can_delete = False
    show_change_link = True


@admin.register(Session)
class SessionAdmin(ListAdmin):
    list_display = ["session_id", "session_name", "user", "agent", "updated_at"]
    list_select_related = ["user", "agent"]
    list_filter = ["agent"]
    search_fields = ["session_name", "user__username"]
    inlines = [RunInline]
    list_per_page = 50
    # Counting 100 000 sessions on every page view costs more than the page itself.
    show_full_result_count = False


class MessageInline(admin.TabularInline):
    model = Message
    fields = ["order", "role", "content", "tool_calls", "tool_call_id"]
    readonly_fields = fields
    extra = 0
    can_delete = False


@admin.register(Run)
class RunAdmin(ListAdmin):
    list_display = ["run_id", "session", "user", "status", "model", "total_tokens", "created_at"]
    list_select_related = ["session", "user"]
    list_filter = ["status", "model"]
    inlines = [MessageInline]


@admin.register(LLMCall)
class LLMCallAdmin(ListAdmin):
    list_display = ["created_at", "kind", "model", "user", "total_tokens", "duration", "ok"]
    list_select_related = ["user"]
    list_filter = ["kind", "model", "ok"]


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = ["name", "prefix", "user", "created_at", "last_used_at"]
    readonly_fields = ["prefix", "token_hash", "created_at", "last_used_at"]

from __future__ import annotations

from django.contrib import admin
from django.contrib.auth.admin import UserAdmin

from sessions_app.models import Agent, ApiToken, LLMCall, Message, Run, Session, User

admin.site.register(User, UserAdmin)


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
class SessionAdmin(admin.ModelAdmin):
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
class RunAdmin(admin.ModelAdmin):
    list_display = ["run_id", "session", "user", "status", "model", "total_tokens", "created_at"]
    list_select_related = ["session", "user"]
    list_filter = ["status", "model"]
    inlines = [MessageInline]


@admin.register(LLMCall)
class LLMCallAdmin(admin.ModelAdmin):
    list_display = ["created_at", "kind", "model", "user", "total_tokens", "duration", "ok"]
    list_select_related = ["user"]
    list_filter = ["kind", "model", "ok"]


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = ["name", "prefix", "user", "created_at", "last_used_at"]
    readonly_fields = ["prefix", "token_hash", "created_at", "last_used_at"]

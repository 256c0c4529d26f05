"""Every request made to a model (answers, titles, summaries), with what it was sent."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.utils.safestring import SafeString

from sessions_app.admin import display, transcript
from sessions_app.admin.base import MetricColumns, ReadIsTold, RecordAdmin
from sessions_app.admin.filters import ModelNameFilter
from sessions_app.models import LLMCall, Run, Session


@admin.register(LLMCall)
class LLMCallAdmin(ReadIsTold, MetricColumns, RecordAdmin):
    list_display = [
        "created_at", "kind", "model", "user", "run_link", "tokens_in", "tokens_out",
        "first_token", "took", "cost", "ok",
    ]  # fmt: skip
    list_filter = ["kind", ModelNameFilter, "ok"]
    date_hierarchy = "created_at"
    ordering = ["-created_at"]
    list_select_related = ["user"]
    fields = [
        "kind", "model", "model_provider", "user_link", "run_link", "session_link",
        "created_at", "ok", "error", "metrics",
    ]  # fmt: skip
    readonly_fields = fields
    change_form_template = "admin/sessions_app/llmcall/change_form.html"

    @admin.display(description="run")
    def run_link(self, obj: LLMCall) -> SafeString | str:
        if obj.run_id is None:
            return display.EMPTY
        return display.link(display.change_url(Run, obj.run_id), "run")

    @admin.display(description="session")
    def session_link(self, obj: LLMCall) -> SafeString | str:
        if obj.session_id is None:
            return display.EMPTY
        return display.link(display.change_url(Session, obj.session_id), obj.session_id)

    @admin.display(description="user")
    def user_link(self, obj: LLMCall) -> SafeString | str:
        return display.admin_link(obj.user, obj.user.get_username())

    @admin.display(description="in", ordering="input_tokens")
    def tokens_in(self, obj: LLMCall) -> str:
        return display.tokens(obj.input_tokens)

    @admin.display(description="out", ordering="output_tokens")
    def tokens_out(self, obj: LLMCall) -> str:
        return display.tokens(obj.output_tokens)

    def get_queryset(self, request: HttpRequest) -> QuerySet[LLMCall]:
        # What a call was sent can be long: only its own page reads it (one query more there).
        return super().get_queryset(request).defer("sent_messages")

    def render_change_form(
        self, request: HttpRequest, context: dict[str, Any], *args: Any, **kwargs: Any
    ) -> HttpResponse:
        call = context.get("original")
        if call is not None:
            context["sent"] = transcript.sent_turns(call)
        return super().render_change_form(request, context, *args, **kwargs)

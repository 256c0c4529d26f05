"""Runs and their messages in the admin: filtered by status, model, agent, rating and date."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest, HttpResponse
from django.utils.html import format_html
from django.utils.safestring import SafeString

from sessions_app.admin import actions, display, extensions, transcript
from sessions_app.admin.base import MetricColumns, ReadIsTold, RecordAdmin
from sessions_app.admin.filters import (
    AgentVersionFilter,
    ModelNameFilter,
    RatingFilter,
    StaffRatingFilter,
)
from sessions_app.models import Agent, Message, Run, Session
from sessions_app.services.markdown import highlight_css
from sessions_app.services.sessions import session_title


@admin.register(Run)
class RunAdmin(
    ReadIsTold,
    extensions.ExtraActions,
    extensions.ExtraListFilters,
    extensions.ExtraListColumns,
    MetricColumns,
    RecordAdmin,
):
    # Then those other apps add (ExtraListColumns).
    list_display = [
        "run", "session_link", "user", "agent", "status_badge", "model", "tokens",
        "first_token", "took", "cost", "rated", "staff_rated", "created_at",
    ]  # fmt: skip
    list_display_links = ["run"]
    # Then those other apps add (ExtraListFilters).
    list_filter = [
        "status", "source", ModelNameFilter, "agent", AgentVersionFilter, RatingFilter,
        StaffRatingFilter,
    ]  # fmt: skip
    search_fields = ["input", "user__username"]
    date_hierarchy = "created_at"
    ordering = ["-created_at"]
    list_select_related = ["session", "user", "agent"]
    # Then those other apps add (ExtraActions).
    actions = [actions.rate_up, actions.rate_down, actions.export_runs_json]
    fields = [
        "session_link", "user_link", "agent_link", "version", "position", "status_badge", "source",
        "model",
        "model_provider", "created_at", "finished_at", "metrics", "feedback", "staff_review",
        "error",
    ]  # fmt: skip
    readonly_fields = fields
    change_form_template = "admin/sessions_app/run/change_form.html"

    @admin.display(description="run")
    def run(self, obj: Run) -> str:
        return display.excerpt(obj.input, 60) or str(obj.pk)

    @admin.display(description="session", ordering="session__session_name")
    def session_link(self, obj: Run) -> SafeString | str:
        return display.admin_link(obj.session, display.excerpt(session_title(obj.session), 60))

    @admin.display(description="user")
    def user_link(self, obj: Run) -> SafeString | str:
        return display.admin_link(obj.user, obj.user.get_username())

    @admin.display(description="agent")
    def agent_link(self, obj: Run) -> SafeString | str:
        return display.admin_link(obj.agent, obj.agent.name)

    @admin.display(description="agent version")
    def version(self, obj: Run) -> SafeString | str:
        """ "v3", leading to the agent's versions; none for runs made before versions."""
        if obj.agent_version is None:
            return display.EMPTY
        url = display.change_url(Agent, obj.agent_id) + "#versions"
        return display.link(url, f"v{obj.agent_version.number}")

    @admin.display(description="status", ordering="status")
    def status_badge(self, obj: Run) -> SafeString:
        return display.status(obj.status)

    @admin.display(description="tokens", ordering="total_tokens")
    def tokens(self, obj: Run) -> str:
        return display.tokens(obj.total_tokens if obj.usage_known else None)

    @admin.display(description="rating", ordering="feedback_rating")
    def rated(self, obj: Run) -> str:
        return display.rating(obj.feedback_rating)

    @admin.display(description="staff", ordering="staff_rating")
    def staff_rated(self, obj: Run) -> str:
        return display.rating(obj.staff_rating)

    @admin.display(description="staff rating")
    def staff_review(self, obj: Run) -> str:
        if obj.staff_rating is None:
            return display.EMPTY
        return f"{display.rating(obj.staff_rating)} {obj.staff_rated_at:%Y-%m-%d %H:%M}"

    def has_delete_permission(self, request: HttpRequest, obj: Run | None = None) -> bool:
        # A run still answering is the engine's; its rows go when it has ended.
        return super().has_delete_permission(request, obj) and not (obj and obj.is_active)

    @admin.display(description="feedback")
    def feedback(self, obj: Run) -> SafeString | str:
        if obj.feedback_rating is None:
            return display.EMPTY
        return format_html("{} {}", display.rating(obj.feedback_rating), obj.feedback_comment or "")

    def render_change_form(
        self, request: HttpRequest, context: dict[str, Any], *args: Any, **kwargs: Any
    ) -> HttpResponse:
        run = context.get("original")
        if run is not None:
            context["detail"] = transcript.run_detail(run)
            context.update(extensions.panel_context("run", request, run))
            context["highlight_css"] = highlight_css()
        return super().render_change_form(request, context, *args, **kwargs)


@admin.register(Message)
class MessageAdmin(ReadIsTold, RecordAdmin):
    owner_key = "session.user_id"
    list_display = ["text", "role", "run_link", "session_link", "created_at"]
    list_display_links = ["text"]
    list_filter = ["role"]
    search_fields = ["content"]
    ordering = ["-pk"]
    fields = ["run_link", "session_link", "order", "role", "body", "tool_calls", "tool_call_id"]
    readonly_fields = fields

    @admin.display(description="message")
    def text(self, obj: Message) -> str:
        return display.excerpt(obj.content) or display.EMPTY

    @admin.display(description="run")
    def run_link(self, obj: Message) -> SafeString:
        return display.link(display.change_url(Run, obj.run_id), "run")

    @admin.display(description="session")
    def session_link(self, obj: Message) -> SafeString:
        return display.link(display.change_url(Session, obj.session_id), obj.session_id)

    @admin.display(description="content")
    def body(self, obj: Message) -> SafeString:
        return transcript.turn(obj.role, obj.content).html

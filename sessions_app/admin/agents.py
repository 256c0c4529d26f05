"""Agents (shared configurations) and API tokens, whose secret is never shown."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django import forms
from django.contrib import admin
from django.core.exceptions import ValidationError
from django.db.models import Prefetch, QuerySet
from django.http import HttpRequest, HttpResponse
from django.utils.safestring import SafeString

from sessions_app.accounts import describe_expiry
from sessions_app.admin import display, extensions
from sessions_app.admin.base import total_per_row
from sessions_app.admin.versions import VersionPages, listing
from sessions_app.models import Agent, ApiToken, Session
from sessions_app.services import statesize, versions

SAMPLING = ("temperature", "top_p", "max_tokens")


class AgentForm(extensions.SectionChecks, forms.ModelForm):
    """The admin's own form (its fields come from AgentAdmin's fieldsets): the state's size
    limit, and the checks of the sections other apps add (datasets: the few-shot fields)."""

    # No Meta: the admin builds the form from its fieldsets, and any fields named here would
    # replace them.
    def clean_session_state(self) -> Any:
        value = self.cleaned_data.get("session_state")
        try:
            statesize.check("session_state", value)
        except statesize.StateTooLarge as exc:
            raise forms.ValidationError(str(exc)) from exc
        return value


@admin.register(Agent)
class AgentAdmin(VersionPages, admin.ModelAdmin):
    form = AgentForm
    change_form_template = "admin/sessions_app/agent/change_form.html"
    list_display = [
        "name", "model", "is_default", "listed", "history", "search_session_history",
        "enable_session_summaries", "sessions", "updated_at",
    ]  # fmt: skip
    list_filter = ["model", "is_default", "listed", "enable_session_summaries"]
    search_fields = ["name", "model", "instructions"]

    def get_fieldsets(self, request: HttpRequest, obj: Agent | None = None) -> list[Any]:
        """The agent's own fields, its sampling settings, then a fieldset for each section
        other apps add."""
        sections = extensions.form_sections(Agent)
        owned = {name for section in sections for name in section.fields} | set(SAMPLING)
        rest = [name for name in self.get_fields(request, obj) if name not in owned]
        sampling = {
            "fields": list(SAMPLING),
            "description": "Sent to the model only when set; empty leaves the model's default.",
        }
        added = [
            (s.title, {"fields": list(s.fields), "description": s.description}) for s in sections
        ]
        return [(None, {"fields": rest}), ("Sampling", sampling), *added]

    def save_model(self, request: HttpRequest, obj: Agent, form: Any, change: bool) -> None:
        versions.save_agent(obj, request.user)  # a new version is put down to whoever made it

    def render_change_form(
        self, request: HttpRequest, context: dict[str, Any], *args: Any, **kwargs: Any
    ) -> HttpResponse:
        agent = context.get("original")
        if agent is not None:
            context.update(listing(request, agent))
        return super().render_change_form(request, context, *args, **kwargs)

    def get_queryset(self, request: HttpRequest) -> QuerySet[Agent]:
        count = total_per_row(Session.objects.all(), "agent", "COUNT")
        return super().get_queryset(request).annotate(session_count=count)

    @admin.display(description="history")
    def history(self, obj: Agent) -> str:
        if not obj.add_history_to_context:
            return "off"
        if obj.num_history_messages is not None:
            return f"last {obj.num_history_messages} messages"
        return f"last {obj.num_history_runs} runs"

    @admin.display(description="sessions", ordering="session_count")
    def sessions(self, obj: Agent) -> SafeString:
        url = display.changelist_url(Session, agent__agent_id__exact=obj.pk)
        return display.link(url, display.tokens(obj.session_count or 0))


class ApiTokenForm(forms.ModelForm):
    """Staff may bring an expiry forward (or set one where there was none), never push it back
    nor remove it: the token's owner chose how long it lives when they made it."""

    class Meta:
        model = ApiToken
        fields = ["name", "expires_at"]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if "expires_at" in self.fields and self.instance.expires_at is not None:
            self.fields[
                "expires_at"
            ].help_text = (
                "From this moment the token answers 401. It may be brought forward, not later."
            )

    def clean_expires_at(self) -> datetime | None:
        new: datetime | None = self.cleaned_data.get("expires_at")
        current = self.instance.expires_at if self.instance.pk else None
        if current is None or (new is not None and new <= current):
            return new
        when = describe_expiry(current)
        if new is None:
            raise ValidationError(f"This token expires on {when}; the expiry cannot be removed.")
        raise ValidationError(
            f"This token expires on {when}; the expiry can be brought forward, not later."
        )


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    form = ApiTokenForm
    list_display = ["name", "prefix", "user", "created_at", "last_used_at", "expires_at", "scope"]
    list_select_related = ["user"]
    list_filter = ["created_at", "last_used_at", "expires_at", "scoped"]
    search_fields = ["name", "prefix", "user__username"]
    fields = ["name", "prefix", "user", "created_at", "last_used_at", "expires_at", "scope"]
    # The scope is its owner's choice, as the token is: shown, not changed here.
    readonly_fields = ["prefix", "user", "created_at", "last_used_at", "scope"]

    def get_queryset(self, request: HttpRequest) -> QuerySet[ApiToken]:
        agents = Prefetch("agents", queryset=Agent.objects.order_by("name").only("pk", "name"))
        return super().get_queryset(request).prefetch_related(agents)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # a token is shown once, to whoever creates it: on the tokens page

    @admin.display(description="agents")
    def scope(self, obj: ApiToken) -> str:
        if not obj.scoped:
            return "All agents"
        return ", ".join(agent.name for agent in obj.agents.all()) or "None (deleted since)"

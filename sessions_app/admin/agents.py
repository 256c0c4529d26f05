"""Agents (shared configurations) and API tokens, whose secret is never shown."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django import forms
from django.contrib import admin
from django.core.exceptions import ValidationError
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.safestring import SafeString

from datasets_app.models import Dataset
from datasets_app.services import feeds
from sessions_app.accounts import describe_expiry
from sessions_app.admin import display
from sessions_app.admin.base import total_per_row
from sessions_app.models import Agent, ApiToken, Session
from sessions_app.services import statesize

FEWSHOT_FIELDS = ["fewshot_dataset", "fewshot_count", "fewshot_order"]
SHOWN_TO_EVERYONE = (
    "The examples are other people's conversations, shown to everyone who chats with this "
    "agent. Only items a person accepted are sent (never those a rule accepted before anyone "
    "reviewed them, nor those of users who turned off training use), with e-mail addresses, "
    "phone numbers and keys masked as an export's redaction masks them."
)


class AgentForm(forms.ModelForm):
    """The admin's own form (its fields come from AgentAdmin's fieldsets): the few-shot dataset
    checked for rules that skip review, the state's size limit."""

    # No Meta: the admin builds the form from its fieldsets, and any fields named here would
    # replace them.
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if "fewshot_dataset" in self.fields:
            self.fields["fewshot_dataset"].help_text = (
                "Its accepted items are shown to everyone who chats with this agent. A dataset "
                "with a rule that adds items as accepted is refused."
            )

    def clean_fewshot_dataset(self) -> Dataset | None:
        dataset: Dataset | None = self.cleaned_data["fewshot_dataset"]
        try:
            feeds.check_feed(dataset.pk if dataset else None)
        except feeds.UnreviewedExamples as exc:
            raise ValidationError(str(exc)) from exc
        return dataset

    def clean_session_state(self) -> Any:
        value = self.cleaned_data.get("session_state")
        try:
            statesize.check("session_state", value)
        except statesize.StateTooLarge as exc:
            raise forms.ValidationError(str(exc)) from exc
        return value


@admin.register(Agent)
class AgentAdmin(admin.ModelAdmin):
    form = AgentForm
    list_display = [
        "name", "model", "is_default", "listed", "history", "search_session_history",
        "enable_session_summaries", "sessions", "updated_at",
    ]  # fmt: skip
    list_filter = ["model", "is_default", "listed", "enable_session_summaries"]
    search_fields = ["name", "model", "instructions"]

    def get_fieldsets(self, request: HttpRequest, obj: Agent | None = None) -> list[Any]:
        rest = [name for name in self.get_fields(request, obj) if name not in FEWSHOT_FIELDS]
        fewshot = {
            "fields": FEWSHOT_FIELDS,
            "description": "Accepted items of a dataset, sent as example turns before the "
            f"history of every run. {SHOWN_TO_EVERYONE}",
        }
        return [(None, {"fields": rest}), ("Few-shot examples", fewshot)]

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
    list_display = ["name", "prefix", "user", "created_at", "last_used_at", "expires_at"]
    list_select_related = ["user"]
    list_filter = ["created_at", "last_used_at", "expires_at"]
    search_fields = ["name", "prefix", "user__username"]
    fields = ["name", "prefix", "user", "created_at", "last_used_at", "expires_at"]
    readonly_fields = ["prefix", "user", "created_at", "last_used_at"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # a token is shown once, to whoever creates it: on the tokens page

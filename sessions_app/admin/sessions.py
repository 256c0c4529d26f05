"""Sessions in the admin: found by owner, agent, date, errors or feedback; read as a transcript."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.template.defaultfilters import pluralize
from django.utils.html import format_html
from django.utils.safestring import SafeString

from sessions_app.admin import actions, display, extensions, transcript
from sessions_app.admin.base import ListAdmin, ReadIsTold, total_per_row
from sessions_app.admin.filters import HasErrorsFilter, HasFeedbackFilter, OwnerFilter
from sessions_app.ids import session_id_or_none
from sessions_app.models import ACTIVE_STATUSES, LLMCall, Run, RunStatus, Session
from sessions_app.services import statesize
from sessions_app.services.markdown import highlight_css
from sessions_app.services.sessions import session_title, update_session


class SessionForm(forms.ModelForm):
    """Only what a person may change; the record of what was said is not a form field."""

    class Meta:
        model = Session
        fields = ["session_name", "session_state", "metadata"]

    def _json_object(self, name: str) -> dict[str, Any]:
        value = self.cleaned_data.get(name)
        if not isinstance(value, dict):
            raise forms.ValidationError('Enter a JSON object, like {} or {"key": "value"}.')
        try:
            statesize.check(name, value)
        except statesize.StateTooLarge as exc:
            raise forms.ValidationError(str(exc)) from exc
        return value

    def clean_session_state(self) -> dict[str, Any]:
        return self._json_object("session_state")

    def clean_metadata(self) -> dict[str, Any]:
        return self._json_object("metadata")


def _failed_runs(count: int) -> str:
    return "no run failed" if not count else f"{count} run{pluralize(count)} failed"


@admin.register(Session)
class SessionAdmin(ReadIsTold, extensions.ExtraActions, ListAdmin):
    form = SessionForm
    list_display = [
        "title", "owner", "agent_name", "runs", "tokens", "cost", "errors", "source",
        "updated_at",
    ]  # fmt: skip
    # Where a session was made: here, or imported from Agno (manage.py import_agno).
    list_filter = [OwnerFilter, "agent", "source", HasErrorsFilter, HasFeedbackFilter]
    search_fields = ["session_name", "user__username"]
    date_hierarchy = "created_at"
    ordering = ["-updated_at"]
    list_select_related = ["user", "agent"]
    actions = [actions.export_sessions_json]  # then those other apps add (ExtraActions)
    fieldsets = [
        (None, {"fields": ["owner_link", "agent_link", "source", "created_at", "updated_at"]}),
        (None, {"fields": ["totals"]}),
        ("Editable", {"fields": ["session_name", "session_state", "metadata"]}),
        ("Memory", {"fields": ["summary_view"]}),
    ]
    readonly_fields = ["owner_link", "agent_link", "source", "created_at", "updated_at", "totals"]
    readonly_fields += ["summary_view"]
    change_form_template = "admin/sessions_app/session/change_form.html"

    def get_queryset(self, request: HttpRequest) -> QuerySet[Session]:
        calls = LLMCall.objects.all()
        failed = Run.objects.filter(status=RunStatus.ERROR)
        money = LLMCall._meta.get_field("cost")
        return (
            super()
            .get_queryset(request)
            .annotate(
                run_count=total_per_row(Run.objects.all(), "session", "COUNT"),
                token_count=total_per_row(calls, "session", "SUM", "total_tokens"),
                cost_total=total_per_row(calls, "session", "SUM", "cost", money),
                failed_count=total_per_row(failed, "session", "COUNT"),
            )
        )

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet, search_term: str
    ) -> tuple[QuerySet, bool]:
        """A pasted session id finds its session, beside the name and owner searches."""
        results, duplicates = super().get_search_results(request, queryset, search_term)
        wanted = session_id_or_none(search_term.strip())
        if wanted is None:
            return results, duplicates
        return results | queryset.filter(pk=wanted), duplicates

    @admin.display(description="session", ordering="session_name")
    def title(self, obj: Session) -> str:
        return session_title(obj)

    @admin.display(description="owner", ordering="user__username")
    def owner(self, obj: Session) -> str:
        return obj.user.get_username()

    @admin.display(description="agent", ordering="agent__name")
    def agent_name(self, obj: Session) -> str:
        return obj.agent.name

    @admin.display(description="runs")
    def runs(self, obj: Session) -> str:
        return display.tokens(obj.run_count or 0)

    @admin.display(description="tokens")
    def tokens(self, obj: Session) -> str:
        return display.tokens(obj.token_count or 0)

    @admin.display(description="cost")
    def cost(self, obj: Session) -> str:
        return display.cost(obj.cost_total)

    @admin.display(description="errors", empty_value="")
    def errors(self, obj: Session) -> SafeString | str:
        """Only the failures are marked: a clean session's cell stays empty."""
        if not obj.failed_count:
            return ""
        return format_html(
            '<span class="parley-status status-error">{} failed</span>', obj.failed_count
        )

    @admin.display(description="owner")
    def owner_link(self, obj: Session) -> SafeString | str:
        return display.admin_link(obj.user, obj.user.get_username())

    @admin.display(description="agent")
    def agent_link(self, obj: Session) -> SafeString | str:
        return display.admin_link(obj.agent, obj.agent.name)

    @admin.display(description="totals")
    def totals(self, obj: Session) -> SafeString:
        price = display.cost(obj.cost_total) if obj.cost_total is not None else "no price known"
        runs = obj.run_count or 0
        return format_html(
            "{} {} · {} tokens · {} · {}",
            display.tokens(runs),
            "run" if runs == 1 else "runs",
            display.tokens(obj.token_count or 0),
            price,
            _failed_runs(obj.failed_count or 0),
        )

    @admin.display(description="summary")
    def summary_view(self, obj: Session) -> SafeString:
        return display.pretty_json(obj.summary)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # sessions begin in the chat or the API

    def has_delete_permission(self, request: HttpRequest, obj: Session | None = None) -> bool:
        # As in the chat: a session whose answer is still streaming is not deleted under it.
        busy = obj is not None and obj.runs.filter(status__in=ACTIVE_STATUSES).exists()
        return super().has_delete_permission(request, obj) and not busy

    def save_model(self, request: HttpRequest, obj: Session, form: Any, change: bool) -> None:
        """Through the service, as the chat and the API do: only the fields changed on the page
        are written (a run may have changed the state meanwhile), and a name given by a person
        is final, never replaced by a generated title."""
        changed = {name: form.cleaned_data[name] for name in form.changed_data}
        if changed:
            update_session(request.user, obj.pk, **changed)

    def render_change_form(
        self, request: HttpRequest, context: dict[str, Any], *args: Any, **kwargs: Any
    ) -> HttpResponse:
        session = context.get("original")
        if session is not None:
            context["transcript"] = transcript.session_transcript(
                session, request.GET.get("transcript", 1)
            )
            entries = context["transcript"]["entries"]
            context.update(extensions.panel_context("session", request, entries))
            context["highlight_css"] = highlight_css()
        return super().render_change_form(request, context, *args, **kwargs)

"""A dataset's items in the admin: reviewed in bulk from the list, read and corrected one by one
on a page that shows the conversation as the transcript does."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.contrib.admin.views.main import ChangeList
from django.core.exceptions import ValidationError
from django.db.models import BooleanField, Exists, ExpressionWrapper, OuterRef, Q, QuerySet
from django.db.models.functions import Coalesce
from django.http import HttpRequest, HttpResponse
from django.urls import path
from django.utils.html import format_html
from django.utils.safestring import SafeString, mark_safe
from django.utils.translation import gettext as _

from datasets_app.admin import collect, counts
from datasets_app.admin.excerpts import excerpt, with_excerpt
from datasets_app.models import DatasetItem, ItemSource, ItemStatus, Split
from datasets_app.services import catalog
from sessions_app.admin import display, transcript
from sessions_app.admin.base import ListAdmin
from sessions_app.models import Run, Session
from sessions_app.services.markdown import highlight_css

DATASET_PARAMETER = "dataset__dataset_id__exact"
# What a row does not show: the conversation is read only for its first words (with_excerpt).
UNLISTED = ("messages", "tools", "corrected_answer", "rejected_answer")
# The item page's review buttons ("Save and accept", "Save and reject") and what each decides.
DECIDED = {"_accept": ItemStatus.ACCEPTED, "_reject": ItemStatus.REJECTED}


class ItemChangeList(ChangeList):
    """The page's rows without their conversations; actions and item pages read whole rows."""

    def get_results(self, request: HttpRequest) -> None:
        self.queryset = self.queryset.defer(*UNLISTED)
        super().get_results(request)


class CorrectedFilter(admin.SimpleListFilter):
    title = "corrected"
    parameter_name = "corrected"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [("yes", "Yes"), ("no", "No")]

    def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
        if self.value() == "yes":
            return queryset.exclude(corrected_answer="")
        if self.value() == "no":
            return queryset.filter(corrected_answer="")
        return queryset


def _turn(message: dict[str, Any]) -> transcript.Turn:
    return transcript.turn(
        message.get("role", ""),
        message.get("content"),
        message.get("tool_calls"),
        message.get("tool_call_id", ""),
    )


def _review(
    modeladmin: Any, request: HttpRequest, queryset: QuerySet, done: str, **change: Any
) -> None:
    changed = catalog.review_items(queryset, **change)
    noun = f"item{'s' * (changed != 1)}"
    modeladmin.message_user(request, f"{changed} {noun} {done}.", messages.SUCCESS)


@admin.action(description="Accept the selected items", permissions=["change"])
def accept(modeladmin: Any, request: HttpRequest, queryset: QuerySet) -> None:
    _review(modeladmin, request, queryset, "accepted", status=ItemStatus.ACCEPTED)


@admin.action(description="Reject the selected items", permissions=["change"])
def reject(modeladmin: Any, request: HttpRequest, queryset: QuerySet) -> None:
    _review(modeladmin, request, queryset, "rejected", status=ItemStatus.REJECTED)


@admin.action(description="Weight turns by rating", permissions=["change"])
def weight(modeladmin: Any, request: HttpRequest, queryset: QuerySet) -> None:
    _review(modeladmin, request, queryset, "weighted by rating", use_weights=True)


@admin.action(description="Don't weight", permissions=["change"])
def unweight(modeladmin: Any, request: HttpRequest, queryset: QuerySet) -> None:
    _review(modeladmin, request, queryset, "no longer weighted", use_weights=False)


def _move_to(split: str) -> Any:
    @admin.action(description=f"Move the selected items to {split}", permissions=["change"])
    def move(modeladmin: Any, request: HttpRequest, queryset: QuerySet) -> None:
        _review(modeladmin, request, queryset, f"moved to {split}", split=split)

    move.__name__ = f"move_to_{split}"
    return move


class ItemForm(forms.ModelForm):
    """A review: the status, the split, a better final answer and whether to train with
    weights; the snapshot stays as it was taken. What the service refuses shows on the form."""

    class Meta:
        model = DatasetItem
        fields = ["status", "split", "corrected_answer", "use_weights"]
        widgets = {"corrected_answer": forms.Textarea(attrs={"rows": 8, "cols": 80})}
        labels = {"use_weights": "Train only on turns not rated down (weights)"}
        help_texts = {
            "use_weights": "In exports that carry weights (openai-chat), assistant turns rated "
            "down get weight 0."
        }

    def clean_corrected_answer(self) -> str:
        try:
            return catalog.checked_correction(self.instance, self.cleaned_data["corrected_answer"])
        except ValueError as exc:
            raise ValidationError(str(exc)) from exc


@admin.register(DatasetItem)
class DatasetItemAdmin(ListAdmin):
    form = ItemForm
    list_display = [
        "first_words", "source_link", "status_badge", "split", "rated", "corrected", "model",
        "owner_name", "created_at",
    ]  # fmt: skip
    list_display_links = ["first_words"]
    list_filter = ["dataset", "status", "split", "source", CorrectedFilter]
    list_select_related = ["owner"]
    ordering = ["-created_at", "-item_id"]
    actions = [accept, reject, *(_move_to(split) for split in Split.values), weight, unweight]
    fieldsets = [
        (None, {"fields": ["dataset_link", "source_link", "owner_link", "agent_link", "model",
                           "rated", "added_by_name", "created_at", "reviewed_at"]}),
        ("Review", {"fields": ["status", "split", "corrected_answer", "use_weights"]}),
    ]  # fmt: skip
    readonly_fields = [
        "dataset_link", "source_link", "owner_link", "agent_link", "model", "rated",
        "added_by_name", "created_at", "reviewed_at",
    ]  # fmt: skip
    change_list_template = "admin/datasets_app/datasetitem/change_list.html"
    change_form_template = "admin/datasets_app/datasetitem/change_form.html"

    def get_urls(self) -> list[Any]:
        own = [
            path(
                "collect/",
                self.admin_site.admin_view(collect.collect_view),
                name="datasets_app_datasetitem_collect",
            )
        ]
        return own + super().get_urls()

    def get_changelist(self, request: HttpRequest, **kwargs: Any) -> type[ChangeList]:
        return ItemChangeList

    def get_queryset(self, request: HttpRequest) -> QuerySet[DatasetItem]:
        session_kept = Exists(Session.objects.filter(pk=OuterRef("source_session_id")))
        corrected = ExpressionWrapper(~Q(corrected_answer=""), output_field=BooleanField())
        items = super().get_queryset(request)
        items = items.annotate(session_kept=session_kept, has_correction=corrected)
        # The source run's rating now (staff's over the user's); the item keeps the one it had.
        items = items.annotate(run_rating=Coalesce("run__staff_rating", "run__feedback_rating"))
        return with_excerpt(items)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # items come from runs and sessions, added from their pages and lists

    @admin.display(description=mark_safe('<input type="checkbox" id="action-toggle">'))
    def action_checkbox(self, obj: DatasetItem) -> SafeString:
        # The item's own name would read its whole conversation; its excerpt is annotated.
        return format_html(
            '<input type="checkbox" name="{}" value="{}" class="action-select" aria-label="{}">',
            helpers.ACTION_CHECKBOX_NAME,
            str(obj.pk),
            format_html(_("Select this object for an action - {}"), excerpt(obj, 60)),
        )

    @admin.display(description="conversation")
    def first_words(self, obj: DatasetItem) -> str:
        return excerpt(obj, 60)

    @admin.display(description="source", ordering="source")
    def source_link(self, obj: DatasetItem) -> SafeString | str:
        if obj.source in (ItemSource.RUN, ItemSource.PAIR) and obj.run_id is not None:
            return display.link(display.change_url(Run, obj.run_id), obj.source)
        if obj.source == ItemSource.SESSION and obj.session_kept:
            return display.link(display.change_url(Session, obj.source_session_id), obj.source)
        if obj.source == ItemSource.EXPERIMENT:
            return obj.get_source_display()
        return format_html('{} <span class="quiet">(deleted)</span>', obj.source)

    @admin.display(description="status", ordering="status")
    def status_badge(self, obj: DatasetItem) -> SafeString:
        return display.status(obj.status)

    @admin.display(description="rating", ordering="rating")
    def rated(self, obj: DatasetItem) -> SafeString | str:
        if obj.run_id is None or obj.run_rating == obj.rating:  # type: ignore[attr-defined]
            return display.rating(obj.rating)
        now = display.rating(obj.run_rating)  # type: ignore[attr-defined]
        return format_html(
            '{} <span class="quiet">(the run now: {})</span>', display.rating(obj.rating), now
        )

    @admin.display(description="corrected", boolean=True, ordering="has_correction")
    def corrected(self, obj: DatasetItem) -> bool:
        return obj.has_correction  # type: ignore[attr-defined,no-any-return]

    @admin.display(description="owner", ordering="owner__username")
    def owner_name(self, obj: DatasetItem) -> str:
        return obj.owner.get_username() if obj.owner else display.EMPTY

    @admin.display(description="owner")
    def owner_link(self, obj: DatasetItem) -> SafeString | str:
        if obj.owner is None:
            return "deleted (left out of exports)"
        opted_out = "" if obj.owner.allow_training else " (left out of exports: no consent)"
        return format_html("{}{}", display.admin_link(obj.owner, obj.owner.get_username()),
                           opted_out)  # fmt: skip

    @admin.display(description="dataset")
    def dataset_link(self, obj: DatasetItem) -> SafeString | str:
        return display.admin_link(obj.dataset, obj.dataset.name)

    @admin.display(description="agent")
    def agent_link(self, obj: DatasetItem) -> SafeString | str:
        return display.admin_link(obj.agent, obj.agent.name if obj.agent else None)

    @admin.display(description="added by")
    def added_by_name(self, obj: DatasetItem) -> str:
        return obj.added_by.get_username() if obj.added_by else "a rule"

    def changelist_view(self, request: HttpRequest, extra_context: Any = None) -> HttpResponse:
        chosen = request.GET.get(DATASET_PARAMETER, "")
        try:
            table = counts.table(chosen or None)
        except (ValueError, ValidationError):  # not an id: the list itself says so
            table = None
        return super().changelist_view(request, {**(extra_context or {}), "counts": table})

    def render_change_form(
        self, request: HttpRequest, context: dict[str, Any], *args: Any, **kwargs: Any
    ) -> HttpResponse:
        item = context.get("original")
        if item is not None:
            # The answer under review is shown on its own, below what led to it.
            before = item.messages[:-1] if item.original_answer else item.messages
            context["conversation"] = [_turn(m) for m in before]
            context["original_answer_turns"] = [transcript.turn("assistant", item.original_answer)]
            if item.source == ItemSource.PAIR:
                context["rejected"] = True
                context["rejected_turns"] = [transcript.turn("assistant", item.rejected_answer)]
            context["highlight_css"] = highlight_css()
        return super().render_change_form(request, context, *args, **kwargs)

    def save_model(self, request: HttpRequest, obj: DatasetItem, form: Any, change: bool) -> None:
        # The review is the service's, as through the API; the form only gathers it.
        changes = {name: form.cleaned_data[name] for name in form.changed_data}
        decided = _decided(request)
        if decided is not None:
            changes["status"] = decided
        if changes:
            saved = catalog.update_item(request.user, obj.dataset_id, obj.pk, **changes)
            obj.status, obj.reviewed_at = saved.status, saved.reviewed_at

    def response_change(self, request: HttpRequest, obj: DatasetItem) -> HttpResponse:
        """After a review button, the message says what was decided, not only "changed"."""
        decided = _decided(request)
        if decided is None:
            return super().response_change(request, obj)
        self.message_user(request, f"The item was saved and {decided.value}.", messages.SUCCESS)
        return self.response_post_save_change(request, obj)


def _decided(request: HttpRequest) -> ItemStatus | None:
    return next((status for button, status in DECIDED.items() if button in request.POST), None)

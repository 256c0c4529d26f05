"""Datasets in the admin: listed with their items counted, edited with their rules, and
downloaded in each export format with its dataset card."""

from __future__ import annotations

import functools
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied, ValidationError
from django.db.models import Count
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.urls import path, reverse
from django.utils.safestring import SafeString

from datasets_app import export
from datasets_app.admin import counts
from datasets_app.models import Dataset, DatasetItem, DatasetRule, ItemStatus, Split
from datasets_app.services import catalog, feeds
from sessions_app.admin import display
from sessions_app.admin.base import total_per_row


class ExportForm(forms.Form):
    format = forms.ChoiceField(choices=[(name, name) for name in export.FORMATS])
    split = forms.ChoiceField(
        choices=[("", "all splits"), *((s, s) for s in Split.values)], required=False
    )
    redact = forms.BooleanField(
        required=False,
        label="Redact personal data and secrets (e-mail addresses, phone numbers, keys)",
    )


class DatasetForm(forms.ModelForm):
    class Meta:
        model = Dataset
        fields = ["name", "description", "validation_percent", "test_percent"]

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        shares = (data.get("validation_percent") or 0) + (data.get("test_percent") or 0)
        if shares > 100:
            # On the field, so the database's own check is not reported a second time.
            self.add_error(
                "test_percent",
                f"Validation and test together take {shares} % of the items; at most 100 %.",
            )
        return data


class RuleForm(forms.ModelForm):
    class Meta:
        model = DatasetRule
        fields = ["agent", "rating", "rated_by", "sample_percent", "status", "active"]

    def clean_status(self) -> str:
        status: str = self.cleaned_data["status"]
        try:
            # The inline formset has set the dataset on the rule; a new dataset feeds no one.
            feeds.check_rule(self.instance.dataset_id, status)
        except feeds.UnreviewedExamples as exc:
            raise ValidationError(str(exc)) from exc
        return status


class RuleInline(admin.TabularInline):
    model = DatasetRule
    form = RuleForm
    fields = ["agent", "rating", "rated_by", "sample_percent", "status", "active"]
    extra = 0
    verbose_name = "rule: add rated runs as they are rated"
    verbose_name_plural = "rules: add rated runs as they are rated"


def _count_column(name: str, label: str, **which: str) -> Any:
    @admin.display(description=label, ordering=f"{name}_count")
    def column(self: Any, obj: Dataset) -> SafeString:
        filters = {f"{key}__exact": value for key, value in which.items()}
        url = display.changelist_url(DatasetItem, dataset__dataset_id__exact=obj.pk, **filters)
        return display.link(url, display.tokens(getattr(obj, f"{name}_count") or 0))

    column.__name__ = name
    return column


URL_NAME = "datasets_app_dataset"  # the prefix of the admin's URL names for datasets
# Each count column: its name and which items it counts.
COLUMNS = [("items", {})]
COLUMNS += [(s.value, {"status": s.value}) for s in ItemStatus]
COLUMNS += [(s.value, {"split": s.value}) for s in Split]


@admin.register(Dataset)
class DatasetAdmin(admin.ModelAdmin):
    form = DatasetForm
    list_display = ["name", *(name for name, _ in COLUMNS), "rules", "created_at"]
    search_fields = ["name", "description"]
    fields = [
        "name", "description", "validation_percent", "test_percent", "created_by",
        "created_at", "updated_at",
    ]  # fmt: skip
    readonly_fields = ["created_by", "created_at", "updated_at"]
    inlines = [RuleInline]
    change_list_template = "admin/sessions_app/change_list.html"
    change_form_template = "admin/datasets_app/dataset/change_form.html"

    items = _count_column("items", "items")
    pending = _count_column("pending", "pending", status=ItemStatus.PENDING)
    accepted = _count_column("accepted", "accepted", status=ItemStatus.ACCEPTED)
    rejected = _count_column("rejected", "rejected", status=ItemStatus.REJECTED)
    train = _count_column("train", "train", split=Split.TRAIN)
    validation = _count_column("validation", "validation", split=Split.VALIDATION)
    test = _count_column("test", "test", split=Split.TEST)

    def get_queryset(self, request: HttpRequest) -> Any:
        items = DatasetItem.objects.all()
        per_row = {"items_count": total_per_row(items, "dataset", "COUNT")}
        per_row |= {
            f"{name}_count": total_per_row(items.filter(**which), "dataset", "COUNT")
            for name, which in COLUMNS[1:]
        }
        per_row["rule_count"] = total_per_row(DatasetRule.objects.all(), "dataset", "COUNT")
        return super().get_queryset(request).annotate(**per_row).select_related("created_by")

    @admin.display(description="rules", ordering="rule_count")
    def rules(self, obj: Dataset) -> str:
        return display.tokens(obj.rule_count or 0)

    def get_deleted_objects(self, objs: Any, request: HttpRequest) -> tuple[Any, ...]:
        """What deleting datasets takes with it, counted: Django's own page would list every
        item, reading each one's conversation."""
        datasets = list(objs)
        per_dataset = {
            model: dict(
                model.objects.filter(dataset__in=datasets)
                .order_by()
                .values_list("dataset")
                .annotate(n=Count("pk"))
            )
            for model in (DatasetItem, DatasetRule)
        }
        missing = {
            model._meta.verbose_name
            for model, counted in per_dataset.items()
            if counted
            and not request.user.has_perm(f"datasets_app.delete_{model._meta.model_name}")
        }
        if not self.has_delete_permission(request):
            missing.add(Dataset._meta.verbose_name)
        items, rules = per_dataset[DatasetItem], per_dataset[DatasetRule]
        shown = [
            f"{d.name}: {items.get(d.pk, 0)} items, {rules.get(d.pk, 0)} rules" for d in datasets
        ]
        totals = {"datasets": len(datasets), "dataset items": sum(items.values())}
        totals["dataset rules"] = sum(rules.values())
        return shown, totals, missing, []

    def save_model(self, request: HttpRequest, obj: Dataset, form: Any, change: bool) -> None:
        if not change:
            obj.created_by = request.user
        super().save_model(request, obj, form, change)

    def get_urls(self) -> list[Any]:
        wrap = self.admin_site.admin_view
        own = [
            path("<uuid:dataset_id>/export/", wrap(self.export_view), name=f"{URL_NAME}_export"),
            path("<uuid:dataset_id>/card/", wrap(self.card_view), name=f"{URL_NAME}_card"),
        ]
        return [*own, *super().get_urls()]

    def render_change_form(
        self, request: HttpRequest, context: dict[str, Any], *args: Any, **kwargs: Any
    ) -> HttpResponse:
        dataset = context.get("original")
        if dataset is not None:
            context["counts"] = counts.table(dataset.pk)
            context["export_form"] = ExportForm(initial={"format": "openai-chat"})
            context["export_url"] = reverse("admin:datasets_app_dataset_export", args=[dataset.pk])
            context["card_url"] = reverse("admin:datasets_app_dataset_card", args=[dataset.pk])
        return super().render_change_form(request, context, *args, **kwargs)

    def _exported(self, request: HttpRequest, dataset_id: Any, answer: Any) -> HttpResponse:
        """The download when its options are valid, else back to the dataset's page with why."""
        # The same rights as the API's download, decided in the same place.
        if not catalog.may(request.user, catalog.EXPORT):
            raise PermissionDenied
        dataset = get_object_or_404(Dataset, pk=dataset_id)
        form = ExportForm(request.GET)
        if form.is_valid():
            data = form.cleaned_data
            try:
                return answer(dataset, data["format"], data["split"] or None, redact=data["redact"])
            except export.UnknownFormat as exc:
                messages.error(request, str(exc))
        else:
            errors = [e for field_errors in form.errors.values() for e in field_errors]
            messages.error(request, "Nothing to download: " + " ".join(errors))
        return HttpResponseRedirect(display.change_url(Dataset, dataset.pk))

    def export_view(self, request: HttpRequest, dataset_id: Any) -> HttpResponse:
        download = functools.partial(export.response, actor=request.user)  # on the audit log
        return self._exported(request, dataset_id, download)

    def card_view(self, request: HttpRequest, dataset_id: Any) -> HttpResponse:
        return self._exported(request, dataset_id, export.card_response)

"""Experiments in the admin: listed with their progress, started from a form, and read (never
edited) on a page of their own with the report, the side-by-side items and the blind rating."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.urls import path
from django.utils.html import format_html
from django.utils.safestring import SafeString

from evals_app.admin import compare, page, rating, start
from evals_app.models import (
    FINISHED_STATUSES,
    Experiment,
    HumanVerdict,
    Score,
    Trial,
    TrialStatus,
)
from sessions_app.admin import display
from sessions_app.admin.base import total_per_row

URL_NAME = "evals_app_experiment"  # the prefix of the admin's URL names for experiments


@admin.register(Experiment)
class ExperimentAdmin(admin.ModelAdmin):
    list_display = [
        "title", "dataset", "version_labels", "status_badge", "progress", "created_at",
        "created_by",
    ]  # fmt: skip
    list_display_links = ["title"]
    list_filter = ["status", "dataset"]
    list_select_related = ["dataset", "created_by"]
    search_fields = ["name"]
    ordering = ["-created_at"]
    change_list_template = "admin/evals_app/experiment/change_list.html"

    def get_queryset(self, request: HttpRequest) -> QuerySet[Experiment]:
        # A trial that failed is done too: the figure says how much is left to do.
        trials = Trial.objects.all()
        done = trials.filter(status__in=[TrialStatus.COMPLETED, TrialStatus.ERROR])
        return (
            super()
            .get_queryset(request)
            .annotate(
                trial_count=total_per_row(trials, "experiment", "COUNT"),
                done_count=total_per_row(done, "experiment", "COUNT"),
            )
            .prefetch_related("versions__agent")
        )

    @admin.display(description="experiment", ordering="name")
    def title(self, obj: Experiment) -> str:
        return str(obj)

    @admin.display(description="versions")
    def version_labels(self, obj: Experiment) -> str:
        versions = sorted(obj.versions.all(), key=lambda v: (v.pk != obj.baseline_id, v.number))
        return ", ".join(f"{v} (baseline)" if v.pk == obj.baseline_id else str(v) for v in versions)

    @admin.display(description="status", ordering="status")
    def status_badge(self, obj: Experiment) -> SafeString:
        return format_html(
            '<span class="parley-status status-{}">{}</span>', obj.status, obj.get_status_display()
        )

    @admin.display(description="progress", ordering="done_count")
    def progress(self, obj: Experiment) -> str:
        return f"{display.tokens(obj.done_count or 0)} / {display.tokens(obj.trial_count or 0)}"

    def has_delete_permission(self, request: HttpRequest, obj: Experiment | None = None) -> bool:
        # While it runs, its trials are the runner's; it can be cancelled, then deleted.
        running = obj is not None and obj.status not in FINISHED_STATUSES
        return super().has_delete_permission(request, obj) and not running

    def get_deleted_objects(self, objs: Any, request: HttpRequest) -> tuple[Any, ...]:
        """What deleting experiments takes with it, counted: Django's own page would list
        every trial and score."""
        chosen = list(objs)
        ids = [e.pk for e in chosen]
        counts = {
            "answers": Trial.objects.filter(experiment__in=ids).count(),
            "scores": Score.objects.filter(trial__experiment__in=ids).count(),
            "people's verdicts": HumanVerdict.objects.filter(
                candidate_trial__experiment__in=ids
            ).count(),
        }
        missing = set() if self.has_delete_permission(request) else {"experiment"}
        running = [e for e in chosen if e.status not in FINISHED_STATUSES]
        if running:
            missing.add("experiment still running (cancel it first)")
        shown = [str(e) for e in chosen]
        totals = {"experiments": len(chosen), **counts}
        return shown, totals, missing, []

    def get_urls(self) -> list[Any]:
        wrap = self.admin_site.admin_view
        own = [
            ("progress/", page.progress_view, "progress"),
            ("cancel/", page.cancel_view, "cancel"),
            ("resume/", page.resume_view, "resume"),
            ("rescore/", page.rescore_view, "rescore"),
            ("report.csv", page.csv_view, "csv"),
            ("report.json", page.json_view, "json"),
            ("rate/", rating.rate_view, "rate"),
            ("items/<uuid:trial_id>/", compare.compare_view, "compare"),
            ("items/<uuid:trial_id>/send/", compare.send_view, "send"),
        ]
        urls = [
            path(f"<uuid:experiment_id>/{route}", wrap(view), name=f"{URL_NAME}_{name}")
            for route, view, name in own
        ]
        return [*urls, *super().get_urls()]

    def add_view(
        self, request: HttpRequest, form_url: str = "", extra_context: Any = None
    ) -> HttpResponse:
        return start.start_view(request)

    def change_view(
        self, request: HttpRequest, object_id: str, form_url: str = "", extra_context: Any = None
    ) -> HttpResponse:
        return page.experiment_view(request, object_id)

"""Sidebar filters that stay cheap on tables of millions of rows."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from django.contrib import admin
from django.db.models import Q, QuerySet
from django.http import HttpRequest, QueryDict

from sessions_app.models import Agent, Run, RunStatus

# Model names are offered from the agents and from this many of the latest rows, not from a
# DISTINCT over the whole table.
RECENT_ROWS = 1_000


class OwnerFilter(admin.SimpleListFilter):
    """By username, typed: a list of every user would not fit the sidebar."""

    title = "owner"
    parameter_name = "owner"
    template = "admin/sessions_app/input_filter.html"
    field = "user__username"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        # One choice so the filter shows; the template draws a text box instead.
        return [("", "")]

    def choices(self, changelist: Any) -> Iterator[dict[str, Any]]:
        # The other filters and the search ride along as hidden fields of the box's form.
        others = QueryDict(changelist.get_query_string(remove=[self.parameter_name])[1:])
        yield {
            "value": self.value() or "",
            "parameter_name": self.parameter_name,
            "hidden": [(k, v) for k, values in others.lists() for v in values],
            "clear": changelist.get_query_string(remove=[self.parameter_name]),
        }

    def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
        value = self.value()
        return queryset.filter(**{self.field: value.strip()}) if value else queryset


class _HasRunsFilter(admin.SimpleListFilter):
    """Yes/no: does the session have a run matching `runs`? Asked as "the session is among
    those of the matching runs", which the database answers from the few matching runs rather
    than by probing every session's runs."""

    runs: Q

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [("yes", "Yes"), ("no", "No")]

    def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
        if self.value() not in ("yes", "no"):
            return queryset
        matching = Run.objects.filter(self.runs).values("session_id")
        if self.value() == "yes":
            return queryset.filter(pk__in=matching)
        return queryset.exclude(pk__in=matching)


class HasErrorsFilter(_HasRunsFilter):
    title = "has errors"
    parameter_name = "has_errors"
    runs = Q(status=RunStatus.ERROR)


class HasFeedbackFilter(_HasRunsFilter):
    title = "has feedback"
    parameter_name = "has_feedback"
    runs = Q(feedback_at__isnull=False)  # set with every rating, and indexed


class RatingFilter(admin.SimpleListFilter):
    title = "rating"
    parameter_name = "rating"
    field = "feedback_rating"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [("1", "Good"), ("-1", "Bad"), ("none", "Not rated")]

    def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
        if self.value() == "none":
            return queryset.filter(**{f"{self.field}__isnull": True})
        if self.value() in ("1", "-1"):
            return queryset.filter(**{self.field: int(self.value())})
        return queryset


class StaffRatingFilter(RatingFilter):
    title = "staff rating"
    parameter_name = "staff_rating"
    field = "staff_rating"


class ModelNameFilter(admin.SimpleListFilter):
    title = "model"
    parameter_name = "model"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        rows = model_admin.model.objects.order_by("-created_at")
        names = set(rows.values_list("model", flat=True)[:RECENT_ROWS])
        names |= set(Agent.objects.values_list("model", flat=True))
        chosen = self.value()
        if chosen:
            names.add(chosen)
        return [(name, name) for name in sorted(n for n in names if n)]

    def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
        return queryset.filter(model=self.value()) if self.value() else queryset

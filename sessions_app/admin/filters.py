"""Sidebar filters that stay cheap on tables of millions of rows."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

from django.contrib import admin
from django.db.models import Q, QuerySet
from django.http import HttpRequest, QueryDict

from sessions_app.models import Agent, AgentVersion, Run, RunStatus

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


class AgentVersionFilter(admin.SimpleListFilter):
    """By the agent version a run was made with: the versions of the agent filtered on, else
    the latest few of every agent (the chosen one always among them)."""

    title = "agent version"
    parameter_name = "agent_version"
    agent_parameter = "agent__agent_id__exact"  # the "agent" filter's
    shown = 30

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        versions = AgentVersion.objects.select_related("agent").order_by("-created_at")
        agent = _uuid_or_none(request.GET.get(self.agent_parameter))
        if agent is not None:
            versions = versions.filter(agent_id=agent).order_by("-number")
        found = list(versions[: self.shown])
        chosen = _uuid_or_none(self.value())
        if chosen is not None and chosen not in {v.pk for v in found}:
            found += list(AgentVersion.objects.select_related("agent").filter(pk=chosen))
        return [(str(v.pk), v.label if agent else f"{v.agent.name} {v.label}") for v in found]

    def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
        value = self.value()
        if not value:
            return queryset
        return queryset.filter(agent_version_id=_uuid_or_none(value))


def _uuid_or_none(value: str | None) -> uuid.UUID | None:
    try:
        return uuid.UUID(value) if value else None
    except ValueError:
        return None

"""Adding runs and sessions to a dataset from the admin: the "Add to dataset…" action of the
session and run lists, and the small form beside a transcript's runs and on a run's page."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.core.exceptions import PermissionDenied
from django.db.models import Model, QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_POST

from datasets_app.models import Dataset, DatasetItem, ItemSource, ItemStatus
from datasets_app.services import collect
from sessions_app.admin import display
from sessions_app.models import Run, Session
from sessions_app.services.permissions import staff_may

# One action adds at most this many; running it again carries on, since those already in the
# dataset are set aside with one query.
COLLECT_LIMIT = 500


class CollectForm(forms.Form):
    dataset = forms.ModelChoiceField(
        Dataset.objects.all(), to_field_name="dataset_id", empty_label=None
    )
    status = forms.ChoiceField(
        choices=ItemStatus.choices, initial=ItemStatus.PENDING, label="Start as"
    )


class CollectOneForm(CollectForm):
    run = forms.ModelChoiceField(Run.objects.all(), to_field_name="run_id", required=False)
    session = forms.ModelChoiceField(
        Session.objects.all(), to_field_name="session_id", required=False
    )

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        if bool(data.get("run")) == bool(data.get("session")):
            raise forms.ValidationError("Choose one run or one session to add.")
        return data


def may_collect(user: Any) -> bool:
    return staff_may(user, "add", DatasetItem)


@dataclass
class Tally:
    noun: str
    dataset: str
    added: int = 0
    pairs: int = 0
    already: int = 0
    left: int = 0
    refused: Counter[str] = field(default_factory=Counter)

    def _count(self, n: int) -> str:
        return f"{n} {self.noun}{'s' * (n != 1)}"

    def message(self) -> str:
        parts = [f"{self._count(self.added)} added to the dataset “{self.dataset}”"]
        if self.pairs:
            parts[0] += f", with {self.pairs} preference pair{'s' * (self.pairs != 1)}"
        if self.already:
            verb = "was" if self.already == 1 else "were"
            parts.append(f"{self._count(self.already)} {verb} already in it")
        if self.refused:
            why = " ".join(
                reason if n == 1 else f"{reason} (×{n})" for reason, n in self.refused.items()
            )
            parts.append(f"{self._count(sum(self.refused.values()))} could not be added: {why}")
        if self.left:
            parts.append(f"{self._count(self.left)} more left: run the action again to add them")
        return "; ".join(p.rstrip(".") for p in parts) + "."

    @property
    def level(self) -> int:
        return messages.SUCCESS if self.added else messages.WARNING


def add_many(
    dataset: Dataset, queryset: QuerySet, *, by: Any, status: str, limit: int | None = None
) -> Tally:
    """Each selected run or session as an item, oldest first, a few rows in memory at a time."""
    limit = COLLECT_LIMIT if limit is None else limit
    is_run = queryset.model is Run
    source, column = (
        (ItemSource.RUN, "source_run_id") if is_run else (ItemSource.SESSION, "source_session_id")
    )
    # The list's own annotations are not needed to add; its filters and selection are.
    selected = queryset.model.objects.filter(pk__in=queryset.order_by().values("pk"))
    present = DatasetItem.objects.filter(dataset=dataset, source=source).values(column)
    tally = Tally("run" if is_run else "session", dataset.name)
    tally.already = selected.filter(pk__in=present).count()
    todo = selected.exclude(pk__in=present).order_by("created_at", "pk")
    tally.left = max(todo.count() - limit, 0)
    related = ("session", "agent", "user") if is_run else ("agent", "user")
    for obj in todo.select_related(*related)[:limit].iterator(chunk_size=100):
        try:
            if is_run:
                made = collect.add_run(dataset, obj, by=by, status=status)
                tally.pairs += sum(item.source == ItemSource.PAIR for item in made)
            else:
                collect.add_session(dataset, obj, by=by, status=status)
        except collect.AlreadyInDataset:
            tally.already += 1  # added by someone else meanwhile
        except collect.NotCollectable as exc:
            tally.refused[str(exc)] += 1
        else:
            tally.added += 1
    return tally


def _collect_action(modeladmin: Any, request: HttpRequest, queryset: QuerySet) -> Any:
    """The chosen dataset and status, asked on a page of its own, then every selected row."""
    if not may_collect(request.user):  # the lists offer it only then (hooks); checked again
        raise PermissionDenied
    form = CollectForm(request.POST if "apply" in request.POST else None)
    if form.is_bound and form.is_valid():
        tally = add_many(
            form.cleaned_data["dataset"],
            queryset,
            by=request.user,
            status=form.cleaned_data["status"],
        )
        modeladmin.message_user(request, tally.message(), tally.level)
        return None  # back to the list, its filters kept
    opts = modeladmin.model._meta
    count = queryset.count()
    context = {
        **modeladmin.admin_site.each_context(request),
        "title": "Add to a dataset",
        "opts": opts,
        "form": form,
        "count": count,
        "noun": opts.verbose_name if count == 1 else opts.verbose_name_plural,
        "action": request.POST.get("action", ""),
        "selected": request.POST.getlist(helpers.ACTION_CHECKBOX_NAME),
        "select_across": request.POST.get("select_across", "0"),
        **no_dataset_context(request),
    }
    return TemplateResponse(request, "admin/datasets_app/collect.html", context)


def no_dataset_context(request: HttpRequest) -> dict[str, Any]:
    """Whether any dataset exists, and where to add one for staff who may."""
    exists = Dataset.objects.exists()
    may_add = staff_may(request.user, "add", Dataset)
    return {
        "has_datasets": exists,
        "add_dataset_url": reverse("admin:datasets_app_dataset_add") if may_add else "",
    }


# Added to the session and run lists by `hooks`, for staff who may add dataset items.
@admin.action(description="Add the selected sessions to a dataset…")
def add_sessions_to_dataset(modeladmin: Any, request: HttpRequest, queryset: QuerySet) -> Any:
    return _collect_action(modeladmin, request, queryset)


@admin.action(description="Add the selected runs to a dataset…")
def add_runs_to_dataset(modeladmin: Any, request: HttpRequest, queryset: QuerySet) -> Any:
    return _collect_action(modeladmin, request, queryset)


def _back(request: HttpRequest, obj: Model | None) -> HttpResponse:
    target = request.POST.get("next", "")
    if not url_has_allowed_host_and_scheme(
        target, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        target = display.change_url(type(obj), obj.pk) if obj is not None else "../"
    return HttpResponseRedirect(target)


@require_POST
def collect_view(request: HttpRequest) -> HttpResponse:
    """One run or one whole session into a dataset, from its page; back there with a word."""
    if not may_collect(request.user):
        raise PermissionDenied
    form = CollectOneForm(request.POST)
    if not form.is_valid():
        errors = [e for field_errors in form.errors.values() for e in field_errors]
        messages.error(request, "Nothing was added: " + " ".join(errors))
        return _back(request, None)
    data = form.cleaned_data
    obj = data["run"] or data["session"]
    kind = obj._meta.model_name
    if not staff_may(request.user, "view", type(obj)):
        raise PermissionDenied
    dataset = data["dataset"]
    try:
        if isinstance(obj, Run):
            made = collect.add_run(dataset, obj, by=request.user, status=data["status"])
        else:
            made = [collect.add_session(dataset, obj, by=request.user, status=data["status"])]
    except collect.AlreadyInDataset as exc:
        messages.warning(request, str(exc))
    except collect.NotCollectable as exc:
        messages.error(request, f"Not added: {exc}")
    else:
        messages.success(request, _added(kind, made, dataset))
    return _back(request, obj)


def _added(kind: str, made: list[DatasetItem], dataset: Dataset) -> str:
    if made[0].source == ItemSource.PAIR:  # the run was there already; its pair was not
        return f"The {kind}'s preference pair added to the dataset “{dataset}”."
    pair = " with its preference pair" if len(made) > 1 else ""
    return f"{kind.capitalize()} added to the dataset “{dataset}”{pair}."

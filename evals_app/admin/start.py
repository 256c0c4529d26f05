"""Starting an experiment from the admin: the form, `create_experiment` to make it (what it
refuses shows on the form), and the runner asked to run it."""

from __future__ import annotations

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.forms import Form
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse

from evals_app import experiments, runner
from evals_app.admin.forms import StartForm
from evals_app.admin.gate import may, may_read_agents, may_read_items
from evals_app.admin.page import page_url
from evals_app.models import Experiment

TEMPLATE = "admin/evals_app/experiment/start.html"
FIELDSETS = [
    ("What to compare", ["name", "dataset", "split", "versions", "baseline", "repeats"]),
    ("Scorers", ["scorers", "pattern", "rubric", "scale_low", "scale_high", "judge"]),
    ("Limits", ["concurrency", "budget_tokens", "budget_cost"]),
]


# create_experiment's names for what it refuses, where the form's differ.
FIELD_OF_PROBLEM = {"dataset_id": "dataset", "judge_id": "judge"}


def place(form: Form, problems: list[tuple[str, str]]) -> None:
    """Each problem by the field it is about; one about no field of the form, above them."""
    for name, message in problems:
        field = FIELD_OF_PROBLEM.get(name, name)
        form.add_error(field if field in form.fields else None, message)


def start_view(request: HttpRequest) -> HttpResponse:
    # Replaying a dataset's items through agents is reading both.
    if not (may(request, "add") and may_read_items(request) and may_read_agents(request)):
        raise PermissionDenied
    form = StartForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            experiment = experiments.create_experiment(**form.arguments(), created_by=request.user)
        except experiments.ExperimentError as exc:
            place(form, exc.problems)
        else:
            runner.request(experiment)
            messages.success(request, f"“{experiment}” is queued; its progress shows below.")
            return HttpResponseRedirect(page_url(experiment))
    context = {
        **admin.site.each_context(request),
        "title": "Start an experiment",
        "opts": Experiment._meta,
        "form": form,
        "fieldsets": [(title, [form[name] for name in names]) for title, names in FIELDSETS],
    }
    return TemplateResponse(request, TEMPLATE, context)

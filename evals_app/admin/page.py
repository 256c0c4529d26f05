"""An experiment's own admin page, for reading: what it compares, its progress while it runs
(polled by htmx), the report with a chart per scorer, people's verdicts, the items a candidate
did worse on; and its buttons: cancel, score again, download."""

from __future__ import annotations

import json
from typing import Any

from django.contrib import admin, messages
from django.db import transaction
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django_htmx.http import HttpResponseClientRefresh

from evals_app import blind, experiments, money, runner
from evals_app.admin import figures
from evals_app.admin.forms import JUDGED, RescoreForm
from evals_app.admin.gate import experiment_for, may, may_read_agents, may_read_items
from evals_app.models import FINISHED_STATUSES, Experiment, Score
from evals_app.report import build_report
from evals_app.scorer_labels import label_of, label_of_key, labels_of
from evals_app.scorers import SpecError, spec_key
from sessions_app.admin import display

TEMPLATE = "admin/evals_app/experiment/page.html"
PROGRESS_TEMPLATE = "admin/evals_app/experiment/_progress.html"
CANCEL_TEMPLATE = "admin/evals_app/experiment/cancel.html"


def page_url(experiment: Experiment) -> str:
    return reverse("admin:evals_app_experiment_change", args=[experiment.pk])


def _url(name: str, experiment: Experiment) -> str:
    return reverse(f"admin:evals_app_experiment_{name}", args=[experiment.pk])


def _budget(value: Any, unit: str) -> str:
    return "" if value is None else display.shown(value, unit)


def progress_context(experiment: Experiment) -> dict[str, Any]:
    """The figures the progress box shows, as people read them."""
    now = experiments.progress(experiment)
    total, done = now.get("total") or 0, now.get("done") or 0
    scored, to_score = now["scores_done"], now["scores_total"]
    finished = experiment.status in FINISHED_STATUSES
    labels = labels_of(experiment.scorers)
    cost = now.get("used_cost") if now["cost_known"] else None
    return {
        "finished": finished,
        "status": experiment.get_status_display(),
        "status_key": experiment.status,
        "done": done,
        "total": total,
        "percent": round(100 * done / total) if total else 0,
        "errors": now.get("errors") or 0,
        "scores_done": scored,
        "scores_total": to_score,
        "scoring": [{**s, "label": label_of_key(s["scorer"], labels)} for s in now["scoring"]],
        # Answered, not yet scored: what the runner does until the figures are whole.
        "scoring_now": not finished and total > 0 and done == total and scored < to_score,
        "tokens": display.shown(now.get("used_tokens"), "tokens"),
        "cost": money.usd(cost),
        "cost_title": "" if now["cost_known"] else money.UNKNOWN_WHY,
        "budget_tokens": _budget(now.get("budget_tokens"), "tokens"),
        "budget_cost": "" if now.get("budget_cost") is None else money.usd(now["budget_cost"]),
        "cancel_requested": experiment.cancel_requested,
        "url": _url("progress", experiment),
    }


def _scorers_shown(experiment: Experiment) -> list[dict[str, str]]:
    """Each scorer in words, its key (the name of its scores) and its options in full."""
    shown = []
    for spec in experiment.scorers:
        spec = {"name": spec} if isinstance(spec, str) else spec
        options = ", ".join(f"{k}: {v}" for k, v in spec.items() if k != "name")
        shown.append({"label": label_of(spec), "key": spec_key(spec), "options": options})
    return shown


def _page_context(request: HttpRequest, experiment: Experiment) -> dict[str, Any]:
    can_change = may(request, "change", experiment)
    can_rate = may(request, "rate", experiment)
    progress = progress_context(experiment)
    return {
        **admin.site.each_context(request),
        "title": str(experiment),
        "opts": Experiment._meta,
        "experiment": experiment,
        "versions": figures.versions_of(experiment),
        "scorers": _scorers_shown(experiment),
        "progress": progress,
        "figures": figures.figures(experiment, shows_items=may_read_items(request)),
        "tallies": blind.tally(experiment),
        "can_change": can_change,
        "can_cancel": can_change and not progress["finished"],
        "can_resume": can_change and runner.resumable(experiment),
        "can_delete": may(request, "delete", experiment),
        "rescore_form": rescore_form(request, experiment) if can_change else None,
        "urls": {
            name: _url(name, experiment)
            for name in ("cancel", "resume", "rescore", "csv", "json", "rate", "delete")
        },
        "can_rate": can_rate,
        "left_to_rate": blind.unrated(experiment, request.user).count() if can_rate else 0,
    }


@require_GET
def experiment_view(request: HttpRequest, experiment_id: Any) -> HttpResponse:
    experiment = experiment_for(request, experiment_id, "view")
    return TemplateResponse(request, TEMPLATE, _page_context(request, experiment))


@require_GET
def progress_view(request: HttpRequest, experiment_id: Any) -> HttpResponse:
    """The progress box, which the page polls while the experiment runs; once it has finished,
    the whole page is loaded again, with its report and without polling."""
    experiment = experiment_for(request, experiment_id, "view")
    if request.htmx and experiment.status in FINISHED_STATUSES:  # type: ignore[attr-defined]
        return HttpResponseClientRefresh()
    context = {"progress": progress_context(experiment)}
    return TemplateResponse(request, PROGRESS_TEMPLATE, context)


@require_http_methods(["GET", "POST"])
def cancel_view(request: HttpRequest, experiment_id: Any) -> HttpResponse:
    """GET asks first (a page of its own, so it needs no script); POST cancels."""
    experiment = experiment_for(request, experiment_id, "change")
    if experiment.status in FINISHED_STATUSES:
        messages.info(request, f"The experiment had already ended ({experiment.status}).")
    elif request.method == "GET":
        return TemplateResponse(request, CANCEL_TEMPLATE, _cancel_context(request, experiment))
    else:
        runner.cancel(experiment)
        messages.success(request, "The experiment is cancelled; answers under way are let go.")
    return HttpResponseRedirect(page_url(experiment))


def _cancel_context(request: HttpRequest, experiment: Experiment) -> dict[str, Any]:
    return {
        **admin.site.each_context(request),
        "title": "Cancel the experiment?",
        "opts": Experiment._meta,
        "experiment": experiment,
        "experiment_url": page_url(experiment),
        "progress": progress_context(experiment),
    }


@require_POST
def resume_view(request: HttpRequest, experiment_id: Any) -> HttpResponse:
    """Go on with an experiment that ended with something left to ask (stopped, or with failed
    answers): only what was not answered, or failed, or not scored is asked (raise its budget
    first, on the API, if it stopped at it)."""
    experiment = experiment_for(request, experiment_id, "change")
    if runner.resumable(experiment):
        runner.request(experiment)
        messages.success(request, "The experiment goes on with what it had left to do.")
    else:
        messages.info(request, f"The experiment is {experiment.status}: nothing to resume.")
    return HttpResponseRedirect(page_url(experiment))


def rescore_form(request: HttpRequest, experiment: Experiment, data: Any = None) -> RescoreForm:
    """Its judge is chosen as the start form chooses it: by staff who may read agents."""
    return RescoreForm(data, judge=experiment.judge, may_choose_judge=may_read_agents(request))


@require_POST
def rescore_view(request: HttpRequest, experiment_id: Any) -> HttpResponse:
    experiment = experiment_for(request, experiment_id, "change")
    form = rescore_form(request, experiment, request.POST)
    if form.is_valid() and not form.cleaned_data["scorers"]:
        form.add_error("scorers", "Choose a scorer.")
    if not form.is_valid():
        messages.error(request, "Nothing to score: " + _problems(form))
        return HttpResponseRedirect(page_url(experiment))
    specs, judge = form.specs(), form.chosen_judge()
    if judge is not None and judge.pk != experiment.judge_id and _judged(experiment):
        # One scorer's scores from two judges would be compared as one judge's.
        messages.error(
            request,
            f"Its answers were judged by {experiment.judge}: judging them by another agent "
            "would mix two judges under one scorer. Start a new experiment to try another judge.",
        )
        return HttpResponseRedirect(page_url(experiment))
    try:
        with transaction.atomic():
            if judge is not None and judge.pk != experiment.judge_id:
                Experiment.objects.filter(pk=experiment.pk).update(judge=judge)
                experiment.judge = judge
            runner.rescore(experiment, specs)
    except (experiments.ExperimentError, SpecError) as exc:
        messages.error(request, str(exc))
    else:
        names = ", ".join(label_of(spec) for spec in specs)
        by = (
            f", judged by {judge}"
            if judge is not None and any(spec["name"] in JUDGED for spec in specs)
            else ""
        )
        messages.success(request, f"Scoring the answers with {names}{by}; the answers are kept.")
    return HttpResponseRedirect(page_url(experiment))


def _judged(experiment: Experiment) -> bool:
    return Score.objects.filter(trial__experiment=experiment, judge_version__isnull=False).exists()


def _problems(form: RescoreForm) -> str:
    """The form's errors, each after the label of its field."""
    said = []
    for name, errors in form.errors.items():
        field = form.fields.get(name)
        label = f"{field.label or name.replace('_', ' ').capitalize()}: " if field else ""
        said += [f"{label}{error}" for error in errors]
    return " ".join(said)


def _attachment(body: str, content_type: str, experiment: Experiment, ext: str) -> HttpResponse:
    name = f"experiment-{str(experiment.pk)[:8]}.{ext}"
    response = HttpResponse(body, content_type=content_type)
    response["Content-Disposition"] = f'attachment; filename="{name}"'
    return response


@require_GET
def csv_view(request: HttpRequest, experiment_id: Any) -> HttpResponse:
    experiment = experiment_for(request, experiment_id, "view")
    body = build_report(experiment).to_csv()
    return _attachment(body, "text/csv; charset=utf-8", experiment, "csv")


@require_GET
def json_view(request: HttpRequest, experiment_id: Any) -> HttpResponse:
    experiment = experiment_for(request, experiment_id, "view")
    body = json.dumps(build_report(experiment).to_dict(), indent=2, default=str)
    return _attachment(body, "application/json", experiment, "json")

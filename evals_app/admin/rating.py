"""The blind side-by-side page: one answer pair at a time that this person has not rated, the
answers as "A" and "B" only (no version, agent, experiment name or score on the page), and
their choice with a comment; then the next pair."""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import reverse
from django.views.decorators.http import require_http_methods

from evals_app import blind
from evals_app.admin import turns
from evals_app.admin.forms import RateForm
from evals_app.admin.gate import experiment_for
from evals_app.admin.page import page_url
from evals_app.models import Experiment
from sessions_app.services.access import NotFound
from sessions_app.services.markdown import highlight_css

TEMPLATE = "admin/evals_app/experiment/rate.html"


def rate_url(experiment: Experiment) -> str:
    return reverse("admin:evals_app_experiment_rate", args=[experiment.pk])


def _context(request: HttpRequest, experiment: Experiment) -> dict[str, Any]:
    pair = blind.next_pair(experiment, request.user)
    context = {
        **admin.site.each_context(request),
        # The experiment's own name may name the versions: it is left off this page.
        "title": "Rate answers",
        "opts": Experiment._meta,
        "experiment": experiment,
        "experiment_url": page_url(experiment),
        "experiment_label": f"Experiment {str(experiment.pk)[:8]}",  # not its name, as above
        "pair": pair,
        "left": blind.unrated(experiment, request.user).count(),
        "rated": blind.rateable(experiment).filter(human_verdicts__rater=request.user).count(),
        "highlight_css": highlight_css(),
    }
    if pair is not None:
        first, second = pair.shown
        context["input_turns"] = turns.input_turns(pair.candidate)
        context["shown"] = [("A", turns.answer_turns(first)), ("B", turns.answer_turns(second))]
        context["form"] = RateForm(initial={"pair": pair.candidate.pk})
    return context


@require_http_methods(["GET", "POST"])
def rate_view(request: HttpRequest, experiment_id: Any) -> HttpResponse:
    experiment = experiment_for(request, experiment_id, "rate", items=True)
    if request.method == "GET":
        return TemplateResponse(request, TEMPLATE, _context(request, experiment))
    form = RateForm(request.POST)
    if not form.is_valid():
        messages.error(request, "Choose A, B or tie.")
        return HttpResponseRedirect(rate_url(experiment))
    data = form.cleaned_data
    try:
        blind.record(experiment, request.user, data["pair"], data["choice"], data["comment"])
    except NotFound as exc:
        raise Http404("No such answer pair in this experiment.") from exc
    messages.success(request, "Thank you: your verdict is kept.")
    return HttpResponseRedirect(rate_url(experiment))

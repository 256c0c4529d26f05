"""One item of an experiment side by side: what it asked, its reference answer, the baseline's
answer and a candidate's, each with every score and reason and what it cost; and the button
that sends the candidate's answer to a dataset for review."""

from __future__ import annotations

import copy
from typing import Any

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.html import format_html
from django.views.decorators.http import require_GET, require_POST

from datasets_app.models import Dataset, DatasetItem
from datasets_app.services import catalog, collect
from datasets_app.services.snapshot import EXAMPLE_NAMES, clean
from evals_app import money
from evals_app.admin import turns
from evals_app.admin.forms import SendForm
from evals_app.admin.gate import experiment_for
from evals_app.admin.page import page_url
from evals_app.models import Experiment, Score, Trial
from evals_app.scorer_labels import label_of_key, labels_of
from sessions_app.admin import display
from sessions_app.services.access import NotFound
from sessions_app.services.markdown import highlight_css

TEMPLATE = "admin/evals_app/experiment/compare.html"
TITLE_LENGTH = 60  # characters of the question the page is titled by


def compare_url(experiment: Experiment, trial: Trial) -> str:
    return reverse("admin:evals_app_experiment_compare", args=[experiment.pk, trial.pk])


def _candidate(experiment: Experiment, trial_id: Any) -> Trial:
    """A candidate's trial of this experiment (the baseline's is what it is compared with)."""
    trials = Trial.objects.select_related("item", "version__agent")
    try:
        return trials.exclude(version_id=experiment.baseline_id).get(
            experiment=experiment, pk=trial_id
        )
    except Trial.DoesNotExist as exc:
        raise Http404("No such answer in this experiment.") from exc


def _baseline_of(experiment: Experiment, candidate: Trial) -> Trial | None:
    return (
        Trial.objects.select_related("version__agent")
        .filter(
            experiment=experiment,
            version_id=experiment.baseline_id,
            item_uuid=candidate.item_uuid,
            repeat=candidate.repeat,
        )
        .first()
    )


def _scores(trial: Trial, labels: dict[str, str]) -> list[dict[str, Any]]:
    return [
        {
            "scorer": score.scorer,
            "label": label_of_key(score.scorer, labels),
            "value": display.EMPTY if score.value is None else f"{score.value:g}",
            "reason": score.reason,
            "error": score.error,
            "judge": str(score.judge_version) if score.judge_version else "",
            "orders": _orders(score.details),
            "prompts": _prompts(score.judge_prompt),
        }
        for score in Score.objects.filter(trial=trial)
        .select_related("judge_version__agent")
        .order_by("scorer")
    ]


def _orders(details: Any) -> list[dict[str, str]]:
    """The pairwise judge's verdict in each order it was asked."""
    orders = details.get("orders") if isinstance(details, dict) else None
    return [
        {
            "first": str(o.get("first", "")),
            "winner": str(o.get("winner") or "unread"),
            "reason": str(o.get("reason") or ""),
        }
        for o in orders or []
        if isinstance(o, dict)
    ]


def _prompts(prompt: Any) -> list[list[dict[str, str]]]:
    """What the judge was sent: one conversation, or one per order asked (pairwise)."""
    if not isinstance(prompt, list) or not prompt:
        return []
    asked = prompt if isinstance(prompt[0], list) else [prompt]
    return [
        [{"role": str(m.get("role")), "content": str(m.get("content") or "")} for m in one]
        for one in asked
        if isinstance(one, list)
    ]


def _answer(trial: Trial | None, role: str, labels: dict[str, str]) -> dict[str, Any]:
    if trial is None:
        return {"role": role, "missing": True}
    return {
        "role": role,
        "version": str(trial.version),
        "trial": trial,
        "turns": turns.answer_turns(trial),
        "scores": _scores(trial, labels),
        "metrics": _metrics(trial),
    }


def _metrics(trial: Trial) -> list[tuple[str, str]]:
    """The run's figures, its cost by evaluation's one rule (see evals_app.money)."""
    cost = money.usd(trial.cost, estimated=trial.usage_estimated)
    return [(name, cost if name == "Cost" else value) for name, value in display.metrics(trial)]


def _repeats(experiment: Experiment, candidate: Trial) -> list[tuple[int, str, bool]]:
    """The same item and version's other repeats, to step between."""
    siblings = Trial.objects.filter(
        experiment=experiment, item_uuid=candidate.item_uuid, version_id=candidate.version_id
    ).order_by("repeat")
    return [(t.repeat, compare_url(experiment, t), t.pk == candidate.pk) for t in siblings]


@require_GET
def compare_view(request: HttpRequest, experiment_id: Any, trial_id: Any) -> HttpResponse:
    experiment = experiment_for(request, experiment_id, "view", items=True)
    candidate = _candidate(experiment, trial_id)
    may_send = catalog.may(request.user, catalog.ADD_ITEMS) and candidate.item is not None
    labels = labels_of(experiment.scorers)
    context = {
        **admin.site.each_context(request),
        # Named by what it asked; its id, as its dataset's admin and the report's links name
        # it, is the line under the heading.
        "title": display.excerpt(turns.question(candidate), TITLE_LENGTH)
        or f"Item {candidate.item_uuid}",
        "item_url": display.change_url(DatasetItem, candidate.item_uuid) if candidate.item else "",
        "opts": Experiment._meta,
        "experiment": experiment,
        "experiment_url": page_url(experiment),
        "candidate": candidate,
        "input_turns": turns.input_turns(candidate),
        "reference_turns": turns.reference_turns(candidate),
        "answers": [
            _answer(_baseline_of(experiment, candidate), "baseline", labels),
            _answer(candidate, "candidate", labels),
        ],
        "repeats": _repeats(experiment, candidate) if experiment.repeats > 1 else [],
        "send_form": SendForm(initial={"dataset": experiment.dataset_id}) if may_send else None,
        "send_url": reverse("admin:evals_app_experiment_send", args=[experiment.pk, candidate.pk]),
        "highlight_css": highlight_css(),
    }
    return TemplateResponse(request, TEMPLATE, context)


def as_seen(candidate: Trial) -> DatasetItem:
    """The candidate's item with the conversation as the candidate was sent it: its own system
    message (not the one the item was taken with), the history and the question, without its
    few-shot examples. Unsaved: what the new item is made from."""
    item = copy.copy(candidate.item)
    sent = [clean(m) for m in candidate.sent_messages or () if m.get("name") not in EXAMPLE_NAMES]
    if item is not None and sent:
        item.messages = sent
    return item  # type: ignore[return-value]  (the view has made sure there is one)


@require_POST
def send_view(request: HttpRequest, experiment_id: Any, trial_id: Any) -> HttpResponse:
    """The candidate's answer to the conversation it was sent, as a pending item of the chosen
    dataset, to be reviewed there."""
    experiment = experiment_for(request, experiment_id, "view", items=True)
    if not catalog.may(request.user, catalog.ADD_ITEMS):
        raise PermissionDenied
    candidate = _candidate(experiment, trial_id)
    back = compare_url(experiment, candidate)
    form = SendForm(request.POST)
    if not form.is_valid():
        messages.error(request, "Choose a dataset to send the answer to.")
        return HttpResponseRedirect(back)
    chosen: Dataset = form.cleaned_data["dataset"]
    try:
        dataset = catalog.get_dataset_for_user(request.user, chosen.pk, catalog.ADD_ITEMS)
    except NotFound as exc:
        raise Http404 from exc
    if candidate.item is None:
        messages.error(request, "The item has been deleted: its conversation is gone.")
        return HttpResponseRedirect(back)
    try:
        item = collect.add_variant(
            dataset, as_seen(candidate), candidate.content, model=candidate.model, by=request.user
        )
    except (collect.AlreadyInDataset, collect.NotCollectable) as exc:
        messages.error(request, str(exc))
    else:
        link = display.change_url(DatasetItem, item.pk)
        text = f"the dataset “{dataset.name}”"
        messages.success(request, format_html('Sent to <a href="{}">{}</a>, pending review.',
                                              link, text))  # fmt: skip
    return HttpResponseRedirect(back)

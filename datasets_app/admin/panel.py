"""What a session's transcript and a run's page show about datasets: a form to add the run
(or the whole session) to one, and the few-shot examples each run was given."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from django.urls import reverse

from datasets_app.admin.collect import may_collect, no_dataset_context
from datasets_app.admin.examples import examples_by_run
from datasets_app.models import Dataset
from sessions_app.models import Run


def _collect(request: HttpRequest, runs: list[Run]) -> dict[str, Any]:
    if not may_collect(request.user):
        return {"allowed": False}
    datasets = list(Dataset.objects.only("dataset_id", "name"))
    return {
        "allowed": True,
        "datasets": datasets,
        "url": reverse("admin:datasets_app_datasetitem_collect"),
        "next": request.get_full_path(),
        "runs": runs,
        **({} if datasets else no_dataset_context(request)),
    }


def session_context(request: HttpRequest, entries: list[Any]) -> dict[str, Any]:
    """For a page of a session's transcript: each entry gets the examples its run was given."""
    examples = examples_by_run(entry.run for entry in entries)
    for entry in entries:
        entry.examples = examples.get(entry.run.pk, [])
    return {"collect": _collect(request, [entry.run for entry in entries])}


def run_context(request: HttpRequest, run: Run) -> dict[str, Any]:
    return {"collect": _collect(request, [run]), "examples": examples_by_run([run])[run.pk]}

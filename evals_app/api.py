"""The experiments API, for staff with the permissions on experiments: make one (it starts at
once on a server), watch it, cancel it, score it again, read its report.

Thin adapters: the gate is evals_app.staff, the work evals_app.runner and evals_app.report.
"""

from __future__ import annotations

import uuid
from typing import Any

from django.http import HttpRequest, HttpResponse, JsonResponse
from ninja import NinjaAPI, Query, Router, Status
from ninja.responses import NinjaJSONEncoder

from evals_app import runner
from evals_app.experiments import ExperimentError, progress
from evals_app.models import Experiment
from evals_app.report import build_report
from evals_app.schemas import (
    ExperimentDetailOut,
    ExperimentIn,
    ExperimentList,
    ExperimentListQuery,
    ReportQuery,
    RescoreIn,
    ResumeIn,
)
from evals_app.staff import create_for_user, experiments_for_user, get_experiment_for_user
from sessions_app.api.pagination import paginate
from sessions_app.api.schemas.errors import ErrorOut
from sessions_app.models import User

# Every call here may answer 403: experiments are for staff with the permission each names.
READ_ERRORS: dict[int, Any] = {401: ErrorOut, 403: ErrorOut, 404: ErrorOut, 422: ErrorOut}
WRITE_ERRORS: dict[int, Any] = {**READ_ERRORS, 400: ErrorOut}
REPORT_DOC = {
    "responses": {
        200: {
            "description": "The report: JSON, or with `format=csv` a CSV file to download.",
            "content": {
                "application/json": {"schema": {"type": "object"}},
                "text/csv": {"schema": {"type": "string"}},
            },
        }
    }
}

experiments_router = Router(tags=["experiments"])


def _user(request: HttpRequest) -> User:
    return request.auth  # type: ignore[attr-defined,no-any-return]


def install_error_handlers(api: NinjaAPI) -> None:
    def problems(request: HttpRequest, exc: ExperimentError) -> HttpResponse:
        # As the API's own validation answers: a list of problems, each with its field.
        detail = [
            {"type": "value_error", "loc": ["body", field] if field else ["body"], "msg": msg}
            for field, msg in exc.problems
        ]
        return api.create_response(request, {"detail": detail}, status=422)

    api.add_exception_handler(ExperimentError, problems)  # type: ignore[arg-type]


def _detailed(experiment: Experiment) -> Experiment:
    experiment.progress = progress(experiment)  # type: ignore[attr-defined]
    return experiment


@experiments_router.get("", response={200: ExperimentList, **READ_ERRORS})
def list_experiments(request: HttpRequest, query: Query[ExperimentListQuery]) -> dict[str, Any]:
    """Newest first by default; filter by `status`."""
    experiments = experiments_for_user(_user(request))
    if query.status:
        experiments = experiments.filter(status=query.status)
    orderings = {"created_at": ["created_at"], "name": ["name"], "status": ["status"]}
    return paginate(experiments, query, orderings)


@experiments_router.post("", response={201: ExperimentDetailOut, **WRITE_ERRORS})
def create_experiment(request: HttpRequest, payload: ExperimentIn) -> Status[Any]:
    """Compare `versions` (ids), or the live versions of `agents` (ids), on the dataset's
    accepted items (of `split`), `repeats` times each; scored by `scorers`. It is queued and a
    server starts it at once. 422 lists every problem found."""
    fields = payload.model_dump()
    experiment = create_for_user(_user(request), **fields)
    runner.request(experiment)
    return Status(201, _detailed(get_experiment_for_user(_user(request), experiment.pk)))


@experiments_router.get("/{experiment_id}", response={200: ExperimentDetailOut, **READ_ERRORS})
def get_experiment(request: HttpRequest, experiment_id: uuid.UUID) -> Any:
    """With its `progress`: trials done and failed of all, and what it spent."""
    return _detailed(get_experiment_for_user(_user(request), experiment_id))


@experiments_router.post(
    "/{experiment_id}/cancel", response={200: ExperimentDetailOut, **WRITE_ERRORS}
)
def cancel_experiment(request: HttpRequest, experiment_id: uuid.UUID) -> Any:
    """No trial starts any more; those in flight stop and stay pending (`request` again via
    `manage.py evaluate --resume`). Cancelling an ended experiment changes nothing."""
    experiment = get_experiment_for_user(_user(request), experiment_id, "change")
    runner.cancel(experiment)
    return _detailed(get_experiment_for_user(_user(request), experiment_id))


@experiments_router.post(
    "/{experiment_id}/resume", response={200: ExperimentDetailOut, **WRITE_ERRORS}
)
def resume_experiment(
    request: HttpRequest, experiment_id: uuid.UUID, payload: ResumeIn | None = None
) -> Any:
    """Go on with an experiment that ended with something left to ask (cancelled, stopped at
    its budget, failed, or completed with failed answers), optionally with a new budget: only
    what was not answered, or failed, or was not scored is asked. Anything else changes
    nothing."""
    experiment = get_experiment_for_user(_user(request), experiment_id, "change")
    budgets = {k: v for k, v in (payload.model_dump() if payload else {}).items() if v is not None}
    if budgets and runner.resumable(experiment):
        Experiment.objects.filter(pk=experiment.pk).update(**budgets)
    runner.request(experiment)
    return _detailed(get_experiment_for_user(_user(request), experiment_id))


@experiments_router.post(
    "/{experiment_id}/rescore", response={200: ExperimentDetailOut, **WRITE_ERRORS}
)
def rescore_experiment(request: HttpRequest, experiment_id: uuid.UUID, payload: RescoreIn) -> Any:
    """Add scorers (changed options make a new scorer) and score the answers that lack their
    scores; no answer is asked again."""
    experiment = get_experiment_for_user(_user(request), experiment_id, "change")
    runner.rescore(experiment, payload.model_dump()["scorers"])
    return _detailed(get_experiment_for_user(_user(request), experiment_id))


@experiments_router.get("/{experiment_id}/report", response=READ_ERRORS, openapi_extra=REPORT_DOC)
def experiment_report(
    request: HttpRequest, experiment_id: uuid.UUID, query: Query[ReportQuery]
) -> Any:
    """Per version and scorer the mean with its 95 % interval; against the baseline the paired
    difference, wins, ties and losses; cost and latency; the items the candidates did worse."""
    experiment = get_experiment_for_user(_user(request), experiment_id)
    report = build_report(experiment)
    if query.format == "csv":
        response = HttpResponse(report.to_csv(), content_type="text/csv; charset=utf-8")
        name = f"experiment-{experiment.pk}.csv"
        response["Content-Disposition"] = f'attachment; filename="{name}"'
        return response
    return JsonResponse(report.to_dict(), encoder=NinjaJSONEncoder)

"""Experiments as staff reach them through the API (and any other door): the one access gate,
and making one from the ids a request gives. Every door asks Django's permissions on the
Experiment model: view to read, add to make one, change to cancel or rescore."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

from datasets_app.models import Dataset, DatasetItem
from evals_app.experiments import ExperimentError, create_experiment, scorer_specs
from evals_app.models import Experiment
from sessions_app.models import Agent, AgentVersion, User
from sessions_app.services.access import NotFound
from sessions_app.services.permissions import Action, require


def experiments_for_user(user: User) -> Any:
    require(user, "view", Experiment)
    return Experiment.objects.select_related("dataset", "created_by").prefetch_related(
        "versions__agent"
    )


def get_experiment_for_user(user: User, experiment_id: Any, action: Action = "view") -> Experiment:
    """The permission first (PermissionDenied naming it, whether or not the experiment
    exists, as the admin does), then NotFound when it is missing."""
    require(user, action, Experiment)
    try:
        key = uuid.UUID(str(experiment_id))
        return experiments_for_user(user).get(pk=key)
    except (Experiment.DoesNotExist, ValueError) as exc:
        raise NotFound from exc


def create_for_user(
    user: User,
    *,
    dataset_id: Any,
    versions: list[Any] | None = None,
    agents: list[Any] | None = None,
    baseline: Any = None,
    judge_id: Any = None,
    **settings: Any,
) -> Experiment:
    """An experiment of the versions given by id, or of the agents' live versions; `baseline`
    is one of those ids (default the first). Raises ExperimentError listing what is wrong."""
    # Making it is seeing it, and replaying a dataset's items through agents is reading them.
    for action, model in (("add", Experiment), ("view", Experiment), ("view", Dataset),
                          ("view", DatasetItem), ("view", Agent)):  # fmt: skip
        require(user, action, model)
    problems = []
    dataset = Dataset.objects.filter(pk=dataset_id).first()
    if dataset is None:
        problems.append(("dataset_id", "No such dataset."))
    compared = dict(_compared(versions, agents, problems))
    judge = Agent.objects.filter(pk=judge_id).first() if judge_id is not None else None
    if judge_id is not None and judge is None:
        problems.append(("judge_id", "No such agent."))
    chosen = compared.get(baseline if baseline is not None else next(iter(compared), None))
    if compared and chosen is None:
        problems.append(("baseline", "The baseline must be one of the ids given."))
    if problems or dataset is None or chosen is None:
        problems += scorer_specs(settings.get("scorers", ()), judge)[1]
        raise ExperimentError(
            problems or [("versions", "An experiment compares at least two versions.")]
        )
    return create_experiment(
        dataset=dataset,
        versions=list(compared.values()),
        baseline=chosen,
        judge=judge,
        created_by=user,
        **settings,
    )


def _compared(
    versions: list[Any] | None, agents: list[Any] | None, problems: list[tuple[str, str]]
) -> Iterator[tuple[Any, AgentVersion]]:
    """(the id given, its version) for each version, or each agent's live version."""
    if (versions is None) == (agents is None):
        problems.append(("versions", "Give either `versions` (version ids) or `agents`."))
        return
    if versions is not None:
        field, given = "versions", versions
        found = AgentVersion.objects.select_related("agent").in_bulk(versions)
    else:
        field, given = "agents", agents or []
        found = _live_versions(given)
    for key in given:
        if key in found:
            yield key, found[key]
        else:
            problems.append((field, f"No such {field[:-1]}: {key}."))


def _live_versions(agent_ids: list[Any]) -> dict[Any, AgentVersion]:
    live = dict(Agent.objects.filter(pk__in=agent_ids).values_list("pk", "live_version_id"))
    versions = AgentVersion.objects.select_related("agent").in_bulk(list(live.values()))
    return {agent: versions[v] for agent, v in live.items() if v in versions}

"""Experiments written directly as rows: a dataset's items, versions, trials and scores, for the
tests of scoring and of the report (the runner that makes them for real is tested apart)."""

from __future__ import annotations

import uuid
from typing import Any

from datasets_app.models import Dataset, DatasetItem, ItemSource, ItemStatus, Split
from evals_app.models import Experiment, ExperimentStatus, Score, Trial, TrialStatus
from sessions_app.models import Agent, AgentVersion, config_of


def judge_agent(name: str = "Judge", **fields: Any) -> Agent:
    return Agent.objects.create(name=name, model=fields.pop("model", "judge-model"), **fields)


def draft(agent: Agent, **changes: Any) -> AgentVersion:
    """A draft version of the agent: its configuration with `changes`."""
    return AgentVersion.objects.of_config(agent, {**config_of(agent), **changes}, live=False)


def item(dataset: Dataset, question: str, answer: str, corrected: str = "") -> DatasetItem:
    messages = [{"role": "user", "content": question}, {"role": "assistant", "content": answer}]
    return DatasetItem.objects.create(
        dataset=dataset,
        source=ItemSource.RUN,
        messages=messages,
        corrected_answer=corrected,
        status=ItemStatus.ACCEPTED,
        split=Split.TEST,
        content_hash=uuid.uuid4().hex,
    )


def experiment(
    dataset: Dataset,
    baseline: AgentVersion,
    *candidates: AgentVersion,
    scorers: list[Any] | None = None,
    judge: Agent | None = None,
    **fields: Any,
) -> Experiment:
    made = Experiment.objects.create(
        dataset=dataset,
        baseline=baseline,
        scorers=scorers or [],
        judge=judge,
        status=fields.pop("status", ExperimentStatus.COMPLETED),
        **fields,
    )
    made.versions.set([baseline, *candidates])
    return made


def trial(
    experiment: Experiment,
    item: DatasetItem,
    version: AgentVersion,
    content: str = "",
    *,
    repeat: int = 1,
    status: str = TrialStatus.COMPLETED,
    **fields: Any,
) -> Trial:
    question = next(m for m in item.messages if m["role"] == "user")
    sent = [{"role": "system", "content": "Be brief."}, question]
    return Trial.objects.create(
        experiment=experiment,
        item=item,
        item_uuid=item.pk,
        version=version,
        repeat=repeat,
        status=status,
        content=content,
        sent_messages=fields.pop("sent_messages", sent),
        **fields,
    )


def score(trial: Trial, scorer: str, value: float | None, **fields: Any) -> Score:
    error = "" if value is not None else fields.pop("error", "The scorer failed.")
    return Score.objects.create(trial=trial, scorer=scorer, value=value, error=error, **fields)

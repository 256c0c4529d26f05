"""Experiments made directly as rows, as a finished run of one leaves them: a dataset of
questions with reference answers, an agent's live version and a draft, and the trials and
scores of an experiment comparing them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from datasets_app.models import Dataset, DatasetItem, ItemSource, ItemStatus, Split
from datasets_app.services import snapshot
from evals_app.models import Experiment, ExperimentStatus, Score, Trial, TrialStatus
from sessions_app.models import Agent, AgentVersion, User
from sessions_app.models.agents import config_of

Answer = Callable[[str, int, int], str]  # (role "baseline" or "candidate", item index, repeat)
Value = Callable[[str, str, int, int], "float | None"]  # (scorer, role, index, repeat)


def question(i: int) -> str:
    return f"Question {i}?"


def reference(i: int) -> str:
    return f"Answer {i}."


def dataset_with_items(name: str = "qa", count: int = 3, owner: User | None = None) -> Dataset:
    """Accepted items, each a system message, a question and its reference answer."""
    dataset = Dataset.objects.create(name=name)
    for i in range(count):
        messages = [
            {"role": "system", "content": "You answer questions."},
            {"role": "user", "content": question(i)},
            {"role": "assistant", "content": reference(i)},
        ]
        DatasetItem.objects.create(
            dataset=dataset,
            source=ItemSource.RUN,
            messages=messages,
            owner=owner,
            status=ItemStatus.ACCEPTED,
            split=Split.TEST,
            content_hash=snapshot.content_hash(messages),
        )
    return dataset


def items_of(dataset: Dataset) -> list[DatasetItem]:
    return sorted(dataset.items.all(), key=lambda item: item.messages[1]["content"])


def two_versions(name: str = "Assistant") -> tuple[Agent, AgentVersion, AgentVersion]:
    """An agent's live version (the baseline) and a draft with other instructions."""
    agent = Agent.objects.create(name=name, model="scripted", instructions="Be brief.")
    baseline = AgentVersion.objects.get(pk=agent.live_version_id)
    config = {**config_of(agent), "instructions": "Be thorough."}
    draft = AgentVersion.objects.of_config(agent, config, live=False)
    return agent, baseline, draft


def plain_answer(role: str, i: int, repeat: int) -> str:
    """The baseline gives the reference; the candidate misses it on even items."""
    if role == "baseline" or i % 2:
        return reference(i)
    return f"Something else {i}."


def exact_value(scorer: str, role: str, i: int, repeat: int) -> float | None:
    return 1.0 if plain_answer(role, i, repeat) == reference(i) else 0.0


def experiment(
    dataset: Dataset,
    baseline: AgentVersion,
    candidate: AgentVersion,
    *,
    repeats: int = 1,
    scorers: tuple[str, ...] = ("exact",),
    answer: Answer = plain_answer,
    value: Value = exact_value,
    status: str = ExperimentStatus.COMPLETED,
    created_by: User | None = None,
    **fields: Any,
) -> Experiment:
    """An experiment whose every trial is answered and scored."""
    made = Experiment.objects.create(
        dataset=dataset,
        baseline=baseline,
        repeats=repeats,
        scorers=[{"name": s} for s in scorers],
        status=status,
        created_by=created_by,
        **fields,
    )
    made.versions.set([baseline, candidate])
    for i, item in enumerate(items_of(dataset)):
        for role, version in (("baseline", baseline), ("candidate", candidate)):
            for repeat in range(1, repeats + 1):
                trial = Trial.objects.create(
                    experiment=made, item=item, item_uuid=item.pk, version=version,
                    repeat=repeat, status=TrialStatus.COMPLETED, model="scripted",
                    content=answer(role, i, repeat), input_tokens=12, output_tokens=4,
                    total_tokens=16, time_to_first_token=0.1, duration=0.4, cost="0.000100",
                )  # fmt: skip
                for scorer in scorers:
                    found = value(scorer, role, i, repeat)
                    Score.objects.create(
                        trial=trial,
                        scorer=scorer,
                        value=found,
                        reason=f"{scorer} says {found}",
                        error="" if found is not None else "the scorer failed",
                    )
    return made


def trial_of(made: Experiment, version: AgentVersion, i: int, repeat: int = 1) -> Trial:
    item = items_of(made.dataset)[i]
    return Trial.objects.get(experiment=made, version=version, item_uuid=item.pk, repeat=repeat)

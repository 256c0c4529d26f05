"""What the runner's tests are made of: an agent with a live version and a draft, a dataset of
accepted items with a history and a marked question each, an experiment of the two versions,
and the scripted upstream answering as each version (told apart by its instructions)."""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from datasets_app.models import Dataset, DatasetItem, ItemSource, ItemStatus, Split
from evals_app.experiments import create_experiment
from evals_app.models import Experiment, Trial
from evals_app.scorers import REGISTRY, Scorer, Verdict
from sessions_app.models import Agent, AgentVersion, User, config_of
from testkit.upstream import Reply, ScriptedUpstream
from tests.support.apiclient import default_agent

BASELINE_SAYS = "You are version one."
CANDIDATE_SAYS = "You are version two."


def versions(**candidate: Any) -> tuple[AgentVersion, AgentVersion]:
    """The default agent's live version (told BASELINE_SAYS) and a draft (CANDIDATE_SAYS, and
    `candidate`'s changes)."""
    agent = default_agent()
    agent.instructions = BASELINE_SAYS
    agent.save()
    live = AgentVersion.objects.get(pk=agent.live_version_id)
    changes = {"instructions": CANDIDATE_SAYS, **candidate}
    draft = AgentVersion.objects.of_config(agent, {**config_of(agent), **changes}, live=False)
    return live, draft


def question(n: int) -> str:
    return f"Question number {n}?"


def add_item(
    dataset: Dataset,
    n: int,
    *,
    owner: User | None = None,
    status: str = ItemStatus.ACCEPTED,
    split: str = Split.TEST,
    answer: str = "",
) -> DatasetItem:
    """An item as a snapshot leaves it: the system message its model saw, a turn of history,
    the question (marked with `n`) and its answer."""
    messages = [
        {"role": "system", "content": "The old system message."},
        {"role": "user", "content": f"Earlier turn {n}."},
        {"role": "assistant", "content": f"Earlier answer {n}.", "rating": 1},
        {"role": "user", "content": question(n)},
        {"role": "assistant", "content": answer or f"Answer {n}.", "rating": 1},
    ]
    return DatasetItem.objects.create(
        dataset=dataset,
        source=ItemSource.RUN,
        owner=owner,
        messages=messages,
        status=status,
        split=split,
        content_hash=uuid.uuid4().hex,
    )


def dataset_of(count: int, name: str = "questions", **fields: Any) -> Dataset:
    dataset = Dataset.objects.create(name=name)
    for n in range(count):
        add_item(dataset, n, **fields)
    return dataset


def experiment_of(items: int, **fields: Any) -> Experiment:
    baseline, candidate = versions()
    return create_experiment(
        dataset=dataset_of(items),
        versions=[baseline, candidate],
        baseline=baseline,
        **fields,
    )


def sent_by(request: dict[str, Any]) -> str:
    """Which version sent the request, by the instructions it carries."""
    system = next((m["content"] for m in request["messages"] if m["role"] == "system"), "")
    return "candidate" if CANDIDATE_SAYS in system else "baseline"


def asked(request: dict[str, Any]) -> str:
    return request["messages"][-1]["content"]


def asks_per_trial(requests: list[dict[str, Any]]) -> Counter[tuple[str, str]]:
    """How often each (question, version) was asked."""
    return Counter((asked(r), sent_by(r)) for r in requests)


@contextmanager
def answering(
    upstream: ScriptedUpstream, reply: Callable[[dict[str, Any]], Reply]
) -> Iterator[None]:
    """The upstream answers every request not scripted with `reply(request)` meanwhile."""
    before = upstream.default
    upstream.default = reply
    try:
        yield
    finally:
        upstream.default = before


def statuses(experiment: Experiment) -> Counter[str]:
    return Counter(Trial.objects.filter(experiment=experiment).values_list("status", flat=True))


def a_judge() -> Agent:
    return Agent.objects.create(name="Judge", model="scripted")


@contextmanager
def a_scorer_that_needs_a_judge() -> Iterator[str]:
    """A scorer named "needs_a_judge", known meanwhile: any scorer that asks a judge."""

    class NeedsAJudge(Scorer):
        name = "needs_a_judge"
        label = "Needs a judge"
        needs_judge = True

        async def score(self, case: Any) -> Verdict:
            return Verdict(1.0)

    REGISTRY[NeedsAJudge.name] = NeedsAJudge
    try:
        yield NeedsAJudge.name
    finally:
        del REGISTRY[NeedsAJudge.name]

"""Making an experiment: what it compares and how is checked first (every problem said at once),
then a pending trial is written for each accepted item (of its split), version and repeat, a
batch at a time."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from datasets_app.models import ItemStatus, Split
from evals_app import experiments
from evals_app.experiments import ExperimentError, create_experiment, progress
from evals_app.models import Trial
from tests.evals import kit

pytestmark = pytest.mark.django_db


@pytest.fixture
def versions():
    return kit.versions()


def test_a_trial_for_each_accepted_item_of_its_split_version_and_repeat(versions, settings):
    settings.PARLEY_EVAL_CONCURRENCY = 5
    dataset = kit.dataset_of(3)
    kit.add_item(dataset, 3, split=Split.TRAIN)
    kit.add_item(dataset, 4, status=ItemStatus.PENDING)
    kit.add_item(dataset, 5, status=ItemStatus.REJECTED)
    baseline, draft = versions

    experiment = create_experiment(
        dataset=dataset, versions=[baseline, draft], baseline=baseline, repeats=2, split="test"
    )

    trials = Trial.objects.filter(experiment=experiment)
    assert trials.count() == 3 * 2 * 2
    assert set(trials.values_list("status", flat=True)) == {"pending"}
    assert {t.item.messages[-2]["content"] for t in trials} == {kit.question(n) for n in range(3)}
    assert set(trials.values_list("repeat", flat=True)) == {1, 2}
    assert draft.is_draft and set(trials.values_list("version", flat=True)) == {
        baseline.pk,
        draft.pk,
    }
    assert experiment.concurrency == 5
    assert progress(experiment) == {
        "status": "queued",
        "total": 12,
        "done": 0,
        "errors": 0,
        "scores_done": 0,
        "scores_total": 0,
        "scoring": [],
        "used_tokens": 0,
        "used_cost": Decimal(0),
        "cost_known": False,
        "budget_tokens": None,
        "budget_cost": None,
    }


def test_trials_are_written_a_batch_at_a_time(versions, monkeypatch):
    monkeypatch.setattr(experiments, "TRIAL_BATCH", 4)
    dataset = kit.dataset_of(5)
    baseline, draft = versions

    with CaptureQueriesContext(connection) as queries:
        experiment = create_experiment(
            dataset=dataset, versions=[baseline, draft], baseline=baseline
        )

    inserts = [q for q in queries if q["sql"].startswith('INSERT INTO "evals_app_trial"')]
    assert len(inserts) == 3  # 4, 4 and 2 trials
    assert Trial.objects.filter(experiment=experiment).count() == 10


def problems_of(**asked) -> list[tuple[str, str]]:
    with pytest.raises(ExperimentError) as refused:
        create_experiment(**asked)
    return refused.value.problems


def test_every_problem_is_said_at_once(versions):
    _, draft = versions
    other = kit.a_judge().live_version
    problems = problems_of(
        dataset=kit.dataset_of(0),
        versions=[draft, draft],
        baseline=other,
        repeats=0,
        concurrency=101,
        budget_tokens=-1,
        budget_cost="-0.5",
        scorers=["exact", {"name": "regex"}],
    )
    assert problems == [
        ("versions", "The same version is given twice."),
        ("versions", "An experiment compares at least two versions."),
        ("baseline", "The baseline must be one of the versions compared."),
        ("repeats", "Repeats go from 1 to 5."),
        ("concurrency", "Concurrency goes from 1 to 100."),
        ("budget_tokens", "A token budget cannot be negative."),
        ("budget_cost", "A cost budget goes from 0 to 999999.999999."),
        ("scorers", "regex: give a 'pattern'."),
        ("dataset_id", "The dataset “questions” has no accepted item."),
    ]


def test_a_scorer_that_needs_a_judge_needs_one(versions):
    baseline, draft = versions
    dataset = kit.dataset_of(1)
    with kit.a_scorer_that_needs_a_judge() as name:
        problems = problems_of(
            dataset=dataset, versions=[baseline, draft], baseline=baseline, scorers=[name]
        )
        assert problems == [("scorers", "The needs_a_judge scorer needs a judge agent.")]
        judged = create_experiment(
            dataset=dataset,
            versions=[baseline, draft],
            baseline=baseline,
            scorers=[name, name],
            judge=kit.a_judge(),
        )
    assert judged.scorers == [{"name": name}]  # the same scorer once


def test_an_unknown_split_is_named(versions):
    baseline, draft = versions
    problems = problems_of(
        dataset=kit.dataset_of(1), versions=[baseline, draft], baseline=baseline, split="dev"
    )
    assert problems == [("split", "Unknown split “dev”; the splits are train, validation, test.")]

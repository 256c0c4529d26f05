"""Runs of two versions of an agent with live scores, and an experiment's usage, on days whose
figures were worked out by hand; shared by the dashboard's and the admin's tests."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from datasets_app.models import Dataset
from evals_app.models import EvalRule, Experiment, Score, Trial, TrialStatus
from evals_app.scorers import spec_key
from sessions_app.models import Agent, Run, Session
from tests.support.apiclient import stored_run

HELLO = {"name": "regex", "pattern": "Hello"}
REGEX = spec_key(HELLO)
# Two days, beside the two days before (8 and 9 March).
RANGE = "start=2025-03-10&end=2025-03-11"


def at(day: int, hour: int = 12) -> datetime:
    return datetime(2025, 3, day, hour, tzinfo=UTC)


def score(run: Run, key: str, value: float | None, when: datetime, **fields: Any) -> Score:
    made = Score.objects.create(run=run, scorer=key, value=value, **fields)
    Score.objects.filter(pk=made.pk).update(created_at=when)
    return made


def scored_runs(user) -> dict[str, Any]:
    """Helper v1 answers on the 8th (previous period) and the 10th; Helper v2 on the 10th and
    11th. Regex scores: 0.5 before; 1, 0, 1 in the range (mean 0.67, by version v1 1.0 on the
    10th, v2 0.0 on the 10th and 1.0 on the 11th). The last run's JSON check failed."""
    helper = Agent.objects.create(name="Helper", model="scripted")
    EvalRule.objects.create(agent=helper, sample_percent=100, scorers=[HELLO, "json_valid"])
    v1 = helper.live_version
    session = Session.objects.create(user=user, agent=helper, session_name="Scored")
    before = _run(session, "Hi", "Hello?", at(8), v1)
    first = _run(session, "Hello", "Hello!", at(10, 9), v1)
    helper.instructions = "Be brief."
    helper.save()
    v2 = helper.live_version
    second = _run(session, "Bye", "Bye.", at(10, 15), v2)
    third = _run(session, "Hi again", "Hello again", at(11), v2)
    score(before, REGEX, 0.5, at(8))
    score(first, REGEX, 1.0, at(10, 9))
    score(second, REGEX, 0.0, at(10, 15))
    score(third, REGEX, 1.0, at(11))
    score(third, "json_valid", None, at(11), error="The scorer failed: boom")
    unscored = _run(session, "More?", "No.", at(11, 13), v2)
    return {"helper": helper, "v1": v1, "v2": v2, "runs": [before, first, second, third],
            "unscored": unscored}  # fmt: skip


def _run(session: Session, question: str, answer: str, when: datetime, version) -> Run:
    run = stored_run(session, question, answer, at=when)
    Run.objects.filter(pk=run.pk).update(agent_version=version)
    return run


def experiment_usage(helper: Agent, v1, v2) -> None:
    """An experiment's answers: 40 tokens on the 8th, 100 ($0.01) on the 10th, a judge's 30
    ($0.003) on the 11th; and a live judge's 20 tokens (price unknown) on the 10th."""
    dataset = Dataset.objects.create(name="greetings")
    experiment = Experiment.objects.create(dataset=dataset, baseline=v1)
    trials = [
        Trial.objects.create(experiment=experiment, item_uuid=uuid.uuid4(), version=v2,
                             status=TrialStatus.COMPLETED, total_tokens=tokens, cost=cost,
                             finished_at=when)
        for tokens, cost, when in ((40, None, at(8)), (100, Decimal("0.01"), at(10)))
    ]  # fmt: skip
    judge = {"judge_tokens": 30, "judge_cost": Decimal("0.003")}
    Score.objects.filter(pk=Score.objects.create(trial=trials[1], scorer="judge", value=4.0,
                                                 **judge).pk).update(created_at=at(11))  # fmt: skip
    live = Run.objects.filter(agent=helper).order_by("created_at")[2]
    score(live, "judge", 4.0, at(10), judge_tokens=20)

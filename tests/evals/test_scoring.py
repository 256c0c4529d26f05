"""Scoring an experiment's trials and live runs: which answers each scorer scores, what a score
keeps, what judges spend, and that nothing is scored twice or silently dropped."""

from __future__ import annotations

import asyncio
import json
from decimal import Decimal

import pytest
from asgiref.sync import sync_to_async

from datasets_app.models import Dataset
from evals_app.models import Experiment, Score, TrialStatus
from evals_app.scorers import Case, Scorer, Verdict
from evals_app.scoring import score_run, score_trials
from sessions_app import engine
from testkit.upstream import Reply
from tests.evals import rows
from tests.evals.test_judges import closed_port_url, prefers

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def setup(agent, upstream):
    """An experiment of the default agent's live version against a draft, with a judge, on a
    dataset of two items: the first kept as it was answered, the second corrected."""
    dataset = Dataset.objects.create(name="capitals")
    baseline = agent.live_version
    candidate = rows.draft(agent, instructions="Answer in one word.")
    judge = rows.judge_agent()
    experiment = rows.experiment(dataset, baseline, candidate, judge=judge, concurrency=4)
    france = rows.item(dataset, "Capital of France?", "Paris")
    germany = rows.item(dataset, "Capital of Germany?", "Bonn", corrected="Berlin")
    return experiment, baseline, candidate, judge, france, germany


def scores_of(trial) -> dict[str, Score]:
    return {s.scorer: s for s in Score.objects.filter(trial=trial)}


async def test_completed_trials_are_scored_against_the_items_reference(setup):
    experiment, baseline, candidate, _, france, germany = setup
    make = sync_to_async(rows.trial)
    paris = await make(experiment, france, baseline, "Paris")
    berlin = await make(experiment, germany, baseline, "berlin ")  # the corrected answer
    bonn = await make(experiment, germany, candidate, "Bonn")  # the original, corrected since
    failed = await make(experiment, france, candidate, status=TrialStatus.ERROR, error="502")
    waiting = await make(experiment, france, baseline, repeat=2, status=TrialStatus.PENDING)

    written = await score_trials(experiment, [paris, berlin, bonn, failed, waiting], ["exact"])

    assert written == 3
    got = await sync_to_async(lambda: {t.pk: scores_of(t) for t in (paris, berlin, bonn)})()
    assert [got[t.pk]["exact"].value for t in (paris, berlin, bonn)] == [1.0, 1.0, 0.0]
    assert got[bonn.pk]["exact"].reason == "Differs from the reference."
    count = await Score.objects.filter(trial__in=[failed, waiting]).acount()
    assert count == 0


async def test_scoring_again_scores_only_what_lacks_a_score_of_that_key(setup):
    experiment, baseline, _, _, france, _ = setup
    trial = await sync_to_async(rows.trial)(experiment, france, baseline, "It is Paris.")
    assert await score_trials(experiment, [trial], ["exact", "contains"]) == 2
    assert await score_trials(experiment, [trial.pk], ["exact", "contains"]) == 0

    changed = {"name": "contains", "text": "PARIS", "case_sensitive": True}
    assert await score_trials(experiment, [trial], [changed]) == 1
    values = {s.scorer: s.value async for s in Score.objects.filter(trial=trial)}
    assert len(values) == 3 and values["exact"] == 0.0 and values["contains"] == 1.0
    assert [v for k, v in values.items() if k.startswith("contains:")] == [0.0]


async def test_a_judge_score_keeps_the_prompt_version_and_spending(setup, upstream, settings):
    experiment, baseline, _, judge, france, _ = setup
    settings.LLM_PRICES = "judge-model=1.00:2.00"
    sent = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Say hi", "name": "example_user"},
        {"role": "assistant", "content": "Hi", "name": "example_assistant"},
        {"role": "user", "content": "Capital of France?"},
    ]
    trial = await sync_to_async(rows.trial)(
        experiment, france, baseline, "Paris.", sent_messages=sent
    )
    upstream.script(
        Reply('{"score": 5, "reason": "Exact."}', prompt_tokens=100, completion_tokens=10)
    )

    assert await score_trials(experiment, [trial], ["judge"]) == 1

    score = await Score.objects.aget(trial=trial, scorer="judge")
    assert (score.value, score.reason, score.error) == (5.0, "Exact.", "")
    assert score.judge_version_id == judge.live_version_id
    assert score.judge_prompt == upstream.requests[0]["messages"]
    assert (score.judge_tokens, score.judge_cost) == (110, Decimal("0.000120"))
    shown = score.judge_prompt[1]["content"]
    # The conversation as the model saw it, without its system message or few-shot examples.
    assert "User: Capital of France?" in shown
    assert "Be brief." not in shown and "Say hi" not in shown
    spent = await Experiment.objects.aget(pk=experiment.pk)
    assert (spent.used_tokens, spent.used_cost) == (110, Decimal("0.000120"))


async def test_an_unreachable_judge_gives_error_scores_not_missing_ones(setup, settings):
    experiment, baseline, _, _, france, _ = setup
    trial = await sync_to_async(rows.trial)(experiment, france, baseline, "Paris")
    settings.LLM_BASE_URL = closed_port_url()

    assert await score_trials(experiment, [trial], ["judge", "exact"]) == 2

    got = await sync_to_async(scores_of)(trial)
    assert got["judge"].value is None and "could not be reached" in got["judge"].error
    assert got["exact"].value == 1.0


async def test_pairwise_waits_for_the_baselines_trial_of_the_same_item_and_repeat(setup, upstream):
    experiment, baseline, candidate, _, france, _ = setup
    make = sync_to_async(rows.trial)
    theirs = await make(experiment, france, candidate, "It is Paris.")
    other_repeat = await make(experiment, france, candidate, "Paris!", repeat=2)
    base = await make(experiment, france, baseline, status=TrialStatus.RUNNING)

    assert await score_trials(experiment, [theirs], ["pairwise"]) == 0
    assert upstream.requests == []

    base.status, base.content = TrialStatus.COMPLETED, "It is Lyon."
    await base.asave()
    upstream.script(prefers("Paris"), prefers("Paris"))
    # The baseline's trial, finished later, brings the candidate's waiting trial with it.
    assert await score_trials(experiment, [base], ["pairwise"]) == 1

    score = await Score.objects.aget(scorer="pairwise")
    assert score.trial_id == theirs.pk and score.value == 1.0
    assert len(score.judge_prompt) == 2 and len(upstream.requests) == 2
    assert not await Score.objects.filter(trial__in=[base, other_repeat]).aexists()


async def test_a_failed_baseline_trial_gives_its_candidates_an_error_score(setup, upstream):
    experiment, baseline, candidate, _, france, _ = setup
    make = sync_to_async(rows.trial)
    theirs = await make(experiment, france, candidate, "It is Paris.")
    await make(experiment, france, baseline, status=TrialStatus.ERROR, error="Upstream 502.")

    assert await score_trials(experiment, [theirs], ["pairwise", "contains"]) == 2

    got = await sync_to_async(scores_of)(theirs)
    assert got["pairwise"].value is None
    assert got["pairwise"].error == "The baseline gave no answer to compare with: Upstream 502."
    assert got["contains"].value == 1.0 and upstream.requests == []


class Counting(Scorer):
    """Counts how many of its verdicts are being worked on at once."""

    name = "counting"
    label = "Counting"

    def __init__(self) -> None:
        super().__init__({"name": self.name})
        self.busy = self.peak = 0

    async def score(self, case: Case) -> Verdict:
        self.busy += 1
        self.peak = max(self.peak, self.busy)
        for _ in range(5):
            await asyncio.sleep(0)
        self.busy -= 1
        return Verdict(1.0)


async def test_verdicts_are_worked_on_at_most_the_experiments_concurrency_at_once(setup):
    experiment, baseline, _, _, france, _ = setup
    experiment.concurrency = 2
    trials = [
        await sync_to_async(rows.trial)(experiment, france, baseline, "Paris", repeat=r)
        for r in range(1, 7)
    ]
    counting = Counting()
    assert await score_trials(experiment, trials, [counting]) == 6
    assert counting.peak == 2


class Broken(Scorer):
    name = "broken"
    label = "Broken"

    async def score(self, case: Case) -> Verdict:
        raise RuntimeError("boom")


async def test_a_scorer_that_breaks_gives_an_error_score(setup):
    experiment, baseline, _, _, france, _ = setup
    trial = await sync_to_async(rows.trial)(experiment, france, baseline, "Paris")
    assert await score_trials(experiment, [trial], [Broken({"name": "broken"})]) == 1
    score = await Score.objects.aget(trial=trial)
    assert score.value is None and score.error == "The Broken scorer failed: boom"


# -- live runs --------------------------------------------------------------------------------


async def answered(user, text: str, session_id=None):
    return await (await engine.start_run(user, text, session_id=session_id)).wait()


async def test_a_live_run_is_scored_on_its_stored_conversation(alice, brief_agent, upstream):
    judge = await sync_to_async(rows.judge_agent)()
    first = await answered(alice, "Hi, a geography question.")
    upstream.script(Reply("Paris."))
    run = await answered(alice, "Capital of France?", session_id=first.session_id)
    upstream.script(Reply(json.dumps({"score": 4, "reason": "Right."})))

    written = await score_run(run, [{"name": "contains", "text": "paris"}, "judge", "exact"], judge)

    assert len(written) == 3
    got = {s.scorer.split(":")[0]: s async for s in Score.objects.filter(run=run)}
    assert got["contains"].value == 1.0
    assert got["judge"].value == 4.0 and got["judge"].judge_tokens > 0
    assert got["exact"].error == "A live run has no reference answer."
    shown = got["judge"].judge_prompt[1]["content"]
    assert shown.startswith("## Conversation\nUser: Hi, a geography question.\n\nAssistant: Echo:")
    assert "User: Capital of France?" in shown and "Be brief." not in shown
    assert shown.endswith("## Answer to judge\nParis.")
    assert await score_run(run.pk, ["judge", "exact"], judge) == []


async def test_a_live_run_cannot_be_scored_pairwise(alice, agent, upstream):
    judge = await sync_to_async(rows.judge_agent)()
    run = await answered(alice, "Hello")
    [score] = await score_run(run, ["pairwise"], judge)
    assert score.value is None
    assert score.error == "A live run has no baseline answer to compare with."

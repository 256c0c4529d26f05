"""Live evaluation through the real engine and the scripted upstream: an agent's rule scores a
sample of its completed runs, and every run rated down, in the background after the answer."""

from __future__ import annotations

import threading
import uuid
from typing import ClassVar

import pytest
from asgiref.sync import sync_to_async
from django.utils import timezone

from evals_app import live
from evals_app.live import sampled, scoring
from evals_app.models import EvalRule, Score
from evals_app.scorers import REGISTRY, Case, Scorer, Verdict
from evals_app.scoring import score_run
from sessions_app import engine
from sessions_app.engine import liveness
from sessions_app.llm import client as llm
from sessions_app.models import Agent, Run, RunStatus, Session
from sessions_app.signals import run_finished
from testkit.upstream import Reply
from tests.support.apiclient import asgi_client, read_events
from tests.support.processes import a_dead_worker, printed_by
from tests.support.waiting import until

pytestmark = pytest.mark.django_db(transaction=True)

HELLO = {"name": "regex", "pattern": "Hello"}


class Boom(Scorer):
    """A scorer that always fails, as a judge that cannot be reached does."""

    name = "boom_for_tests"
    label = "Always fails"

    async def score(self, case: Case) -> Verdict:
        raise RuntimeError("the judge is away")


class AskTheModel(Scorer):
    """A judge in miniature: asks the scripted upstream for a number, and gives it."""

    name = "ask_for_tests"
    label = "Asks the model"
    seen: ClassVar[list[Case]] = []

    async def score(self, case: Case) -> Verdict:
        AskTheModel.seen.append(case)
        text, _ = await llm.complete("judge", [{"role": "user", "content": case.answer}])
        return Verdict(float(text), reason="the model said so")


@pytest.fixture
def test_scorers():
    added = {cls.name: cls for cls in (Boom, AskTheModel)}
    REGISTRY.update(added)
    AskTheModel.seen.clear()
    yield
    for name in added:
        REGISTRY.pop(name, None)


def rule(agent: Agent, percent: int, *scorers, rated_down: bool = False) -> EvalRule:
    return EvalRule.objects.create(
        agent=agent, sample_percent=percent, scorers=list(scorers), rated_down=rated_down
    )


async def answered(user, text: str, agent: Agent | None = None) -> Run:
    handle = await engine.start_run(user, text, agent_id=agent.pk if agent else None)
    return await handle.wait()


async def scores_of(*runs: Run) -> list[Score]:
    found = Score.objects.filter(run__in=[r.pk for r in runs]).order_by("created_at", "pk")
    return [score async for score in found]


async def scored(count: int, *runs: Run) -> list[Score]:
    """The runs' scores once there are `count`, and nothing more is waiting to be scored."""

    async def enough() -> bool:
        return len(await scores_of(*runs)) >= count

    await until(enough, f"{count} score(s)")
    await scoring.drain()
    return await scores_of(*runs)


# -- sampling ----------------------------------------------------------------------------------


async def test_a_rule_at_100_percent_scores_every_completed_run(alice, agent, upstream):
    await sync_to_async(rule)(agent, 100, HELLO)
    upstream.script(
        Reply("Hello there."), Reply("Goodbye."), Reply(status=500), Reply("Hello again.")
    )
    runs = [await answered(alice, f"question {i}") for i in range(4)]
    assert [r.status for r in runs] == ["COMPLETED", "COMPLETED", "ERROR", "COMPLETED"]

    scores = {s.run_id: s for s in await scored(3, *runs)}

    assert {run_id: s.value for run_id, s in scores.items()} == {
        runs[0].pk: 1.0,
        runs[1].pk: 0.0,
        runs[3].pk: 1.0,
    }
    assert {s.scorer for s in scores.values()} == {scores[runs[0].pk].scorer}
    assert scores[runs[0].pk].scorer.startswith("regex:")
    assert scores[runs[0].pk].reason == "Matched 'Hello'."


async def test_a_rule_at_0_percent_scores_none(alice, agent, upstream):
    helper = await Agent.objects.acreate(name="Helper", model="scripted")
    await sync_to_async(rule)(agent, 0, HELLO)
    await sync_to_async(rule)(helper, 100, "json_valid")
    upstream.script(Reply("Hello."), Reply("{}"))
    unsampled = await answered(alice, "hi")
    sampled_run = await answered(alice, "json please", helper)

    assert [s.scorer for s in await scored(1, unsampled, sampled_run)] == ["json_valid"]
    assert await scores_of(unsampled) == []


async def test_the_sample_is_the_runs_whose_id_hashes_into_it(alice, agent, upstream):
    await sync_to_async(rule)(agent, 50, HELLO)
    runs = [await answered(alice, f"question {i}") for i in range(8)]
    chosen = {r.pk for r in runs if sampled(r.pk, 50)}

    scores = await scored(len(chosen), *runs)

    assert {s.run_id for s in scores} == chosen


def test_the_sample_is_the_same_in_every_process_and_grows_with_the_percent():
    ids = [uuid.UUID(int=i * 7919) for i in range(400)]
    here = ["".join("1" if sampled(i, p) else "0" for i in ids) for p in (10, 30)]
    code = (
        "import uuid, django; django.setup()\n"
        "from evals_app.live import sampled\n"
        "ids = [uuid.UUID(int=i * 7919) for i in range(400)]\n"
        "for p in (10, 30): print(''.join('1' if sampled(i, p) else '0' for i in ids))\n"
    )
    # Another process, whose string hashes differ from this one's.
    assert printed_by(code, PYTHONHASHSEED="12345") == here
    assert 0.07 < here[0].count("1") / len(ids) < 0.13
    assert 0.25 < here[1].count("1") / len(ids) < 0.35
    assert all(small <= big for small, big in zip(here[0], here[1], strict=True))


async def test_runs_of_agents_without_an_active_rule_are_not_scored(alice, agent, upstream):
    helper = await Agent.objects.acreate(name="Helper", model="scripted")
    off = await sync_to_async(rule)(agent, 100, HELLO)
    off.active = False
    await off.asave()
    await sync_to_async(rule)(helper, 100, HELLO)
    upstream.script(Reply("Hello."), Reply("Hello."))
    mine, helped = await answered(alice, "hi"), await answered(alice, "hi", helper)

    assert [s.run_id for s in await scored(1, mine, helped)] == [helped.pk]


# -- rated down --------------------------------------------------------------------------------


async def test_a_rated_down_rule_scores_a_run_once_it_is_rated_down(alice, agent, upstream):
    await sync_to_async(rule)(agent, 0, HELLO, rated_down=True)
    upstream.script(Reply("Hello."), Reply("Goodbye."))
    liked, disliked = await answered(alice, "one"), await answered(alice, "two")
    client = await sync_to_async(asgi_client)(alice)

    up = await client.post(f"/api/runs/{liked.pk}/feedback", {"rating": 1})
    down = await client.post(f"/api/runs/{disliked.pk}/feedback", {"rating": -1})
    assert (up.status_code, down.status_code) == (200, 200)
    scores = await scored(1, liked, disliked)

    assert [(s.run_id, s.value) for s in scores] == [(disliked.pk, 0.0)]


async def test_a_run_is_scored_once_per_scorer(alice, agent, upstream):
    await sync_to_async(rule)(agent, 100, HELLO)
    upstream.script(Reply("Hello."))
    run = await answered(alice, "hi")
    [first] = await scored(1, run)

    # As a second process, or a rating down after the sample, would score it.
    again = await score_run(run, [HELLO, "json_valid"], None)

    assert [s.scorer for s in again] == ["json_valid"]
    assert {s.pk for s in await scores_of(run) if s.scorer == first.scorer} == {first.pk}


async def test_a_run_rated_down_by_staff_is_scored_too(alice, agent, upstream):
    await sync_to_async(rule)(agent, 0, HELLO, rated_down=True)
    upstream.script(Reply("Hello."))
    run = await answered(alice, "one")

    await sync_to_async(_staff_rates_down)(run)

    assert [(s.run_id, s.value) for s in await scored(1, run)] == [(run.pk, 1.0)]


def _staff_rates_down(run: Run) -> None:
    """What the runs admin's action does, from a request thread."""
    from django.utils import timezone

    from sessions_app.signals import send_run_rated

    stamp = timezone.now()
    Run.objects.filter(pk=run.pk).update(staff_rating=-1, staff_rated_at=stamp)
    send_run_rated(Run.objects.filter(pk=run.pk), "staff")


# -- never in the answer's way -----------------------------------------------------------------


async def test_the_answer_completes_while_its_scorer_waits_on_a_held_model(
    alice, agent, upstream, test_scorers
):
    await sync_to_async(rule)(agent, 100, "ask_for_tests")
    release = threading.Event()
    upstream.script(Reply("Hello Alice."), Reply("0.75", held=release))
    client = await sync_to_async(asgi_client)(alice)

    response = await client.open("POST", "/api/runs", {"input": "hi", "stream": True})
    events = await read_events(response)
    # The judge's request is made, and held, while the answer is already whole.
    await upstream.wait_for_requests(2)

    assert [kind for kind, _ in events][-1] == "RunCompleted"
    run = await Run.objects.aget(pk=events[-1][1]["run_id"])
    assert run.status == RunStatus.COMPLETED and await scores_of(run) == []
    release.set()
    [score] = await scored(1, run)
    assert (score.scorer, score.value, score.reason) == ("ask_for_tests", 0.75, "the model said so")
    # The judge was shown the answer and the turns before it.
    assert AskTheModel.seen[0].answer == "Hello Alice."
    assert AskTheModel.seen[0].conversation == [{"role": "user", "content": "hi"}]


# -- failures are scores too -------------------------------------------------------------------


async def test_a_failing_or_unusable_scorer_stores_an_error(alice, agent, upstream, test_scorers):
    unusable = {"name": "regex"}  # no pattern: the rule was saved around the admin's checks
    await sync_to_async(rule)(agent, 100, "boom_for_tests", "exact", unusable, "json_valid")
    upstream.script(Reply("Hello."))
    run = await answered(alice, "hi")

    scores = {s.scorer: s for s in await scored(4, run)}

    assert scores["boom_for_tests"].value is None
    assert scores["boom_for_tests"].error == "The Always fails scorer failed: the judge is away"
    assert scores["exact"].error == "A live run has no reference answer."
    assert scores["regex"].error == "regex: give a 'pattern'."
    assert (scores["json_valid"].value, scores["json_valid"].error) == (0.0, "")
    assert run.status == RunStatus.COMPLETED


# -- the chat app's signal of runs' ends -------------------------------------------------------


async def test_every_end_is_told_once_committed_with_its_status(alice, agent, upstream):
    told: dict = {}

    async def hear(sender, runs, statuses, **kwargs):
        stored = {run.pk: run.status async for run in runs}
        told.update({run_id: (status, stored[run_id]) for run_id, status in statuses.items()})

    run_finished.connect(hear, dispatch_uid="tests.hear")
    try:
        upstream.script(Reply("Hello."), Reply(status=500), Reply(tokens=500, delay=0.01))
        done, failed = await answered(alice, "one"), await answered(alice, "two")
        streaming = await engine.start_run(alice, "three")
        await upstream.wait_for_requests(3)
        await engine.cancel_run(alice, streaming.run_id)
        reaped = await sync_to_async(_run_of_a_dead_process)(alice, agent)
        await liveness.reap_and_announce()
        await until(lambda: len(told) == 4, "four ends told")
    finally:
        run_finished.disconnect(dispatch_uid="tests.hear")

    # Each with the status it was stored with, committed before it was told.
    assert told == {
        done.pk: ("COMPLETED", "COMPLETED"),
        failed.pk: ("ERROR", "ERROR"),
        streaming.run_id: ("CANCELLED", "CANCELLED"),
        reaped.pk: ("INTERRUPTED", "INTERRUPTED"),
    }


def _run_of_a_dead_process(user, agent: Agent) -> Run:
    session = Session.objects.create(user=user, agent=agent)
    return Run.objects.create(
        session=session, user=user, agent=agent, position=1, status=RunStatus.RUNNING,
        input="left behind", worker=a_dead_worker(), heartbeat_at=timezone.now(),
    )  # fmt: skip


def test_the_receivers_are_connected_once():
    from sessions_app.signals import run_rated

    live.connect()
    finished = [r for r in run_finished.receivers if r[0][0] == "evals_app.live.finished"]
    rated = [r for r in run_rated.receivers if r[0][0] == "evals_app.live.rated"]
    assert len(finished) == len(rated) == 1

"""Running an experiment: at most its concurrency of model calls at once, stopping at its budget
or a cancel, resumed from where a dead process left it without asking anything twice, handed
back when the server stops, and scored again without asking again."""

from __future__ import annotations

import asyncio
import threading
from datetime import timedelta
from decimal import Decimal

import pytest
from asgiref.sync import sync_to_async
from django.utils import timezone

from evals_app import runner
from evals_app.models import Experiment, Score, Trial, TrialStatus
from evals_app.runner import run_experiment, try_run
from sessions_app.engine import lifespan
from sessions_app.process import WORKER_ID
from testkit.upstream import Reply
from tests.evals import kit, rows
from tests.support.processes import a_dead_worker
from tests.support.waiting import until

pytestmark = pytest.mark.django_db(transaction=True)


def slow(request) -> Reply:
    return Reply(f"Slow answer to {kit.asked(request)}", first_delay=0.05)


@pytest.fixture
def quick_heartbeat(settings):
    settings.PARLEY_HEARTBEAT_INTERVAL = 0.05


async def made(items: int, **fields) -> Experiment:
    return await sync_to_async(kit.experiment_of)(items, **fields)


async def test_no_more_model_calls_at_once_than_its_concurrency(upstream):
    experiment = await made(12, concurrency=3)
    held = threading.Event()
    upstream.script(*[Reply("Held answer.", held=held) for _ in range(3)])

    with kit.answering(upstream, slow):
        run = asyncio.create_task(run_experiment(experiment.pk))
        await upstream.wait_for_requests(3)
        # With three answers held, a fourth call would be a fourth at once: none comes.
        await asyncio.sleep(0.3)
        assert len(upstream.requests) == 3
        held.set()
        ended = await run

    assert ended.status == "completed"
    assert await sync_to_async(kit.statuses)(experiment) == {"completed": 24}
    assert set(kit.asks_per_trial(upstream.requests).values()) == {1}


async def test_it_stops_starting_answers_at_its_token_budget(upstream):
    experiment = await made(5, concurrency=1, budget_tokens=1)

    ended = await run_experiment(experiment.pk)

    assert ended.status == "budget"
    assert ended.error.startswith("Stopped at its budget:")
    assert "tokens used of 1" in ended.error
    assert await sync_to_async(kit.statuses)(experiment) == {"completed": 1, "pending": 9}
    assert len(upstream.requests) == 1


async def test_answers_in_flight_at_the_budget_finish(upstream):
    experiment = await made(5, concurrency=3, budget_cost=Decimal("0.000001"))
    held = threading.Event()
    upstream.script(*[Reply("priced", model="gpt-4o", held=held) for _ in range(3)])

    run = asyncio.create_task(run_experiment(experiment.pk))
    await upstream.wait_for_requests(3)
    held.set()
    ended = await run

    assert ended.status == "budget" and "spent of 0.000001" in ended.error
    assert await sync_to_async(kit.statuses)(experiment) == {"completed": 3, "pending": 7}
    assert ended.used_cost > Decimal("0.000001")


async def test_a_cancel_stops_it_and_puts_the_answers_in_flight_back(upstream):
    experiment = await made(4, concurrency=2)
    held = threading.Event()
    upstream.script(Reply("first", held=held), Reply("second", held=held))

    run = asyncio.create_task(run_experiment(experiment.pk))
    await upstream.wait_for_requests(2)
    await sync_to_async(runner.cancel)(experiment)
    ended = await run
    held.set()

    assert ended.status == "cancelled" and ended.cancel_requested
    assert await sync_to_async(kit.statuses)(experiment) == {"pending": 8}
    assert len(upstream.requests) == 2
    await until(lambda: upstream.disconnects == 2, "the calls in flight closed")


async def test_a_cancel_asked_in_another_process_is_heard_at_the_heartbeat(
    upstream, quick_heartbeat
):
    experiment = await made(3, concurrency=1)
    held = threading.Event()
    upstream.script(Reply("first", held=held))

    run = asyncio.create_task(run_experiment(experiment.pk))
    await upstream.wait_for_requests(1)
    await Experiment.objects.filter(pk=experiment.pk).aupdate(cancel_requested=True)
    ended = await run
    held.set()

    assert ended.status == "cancelled"
    assert await sync_to_async(kit.statuses)(experiment) == {"pending": 6}


async def test_a_queued_experiment_cancelled_ends_at_once(upstream):
    experiment = await made(2)

    await sync_to_async(runner.cancel)(experiment)

    await experiment.arefresh_from_db()
    assert experiment.status == "cancelled" and experiment.finished_at is not None
    assert not await try_run(experiment.pk)
    assert upstream.requests == []


@sync_to_async
def left_by(worker: str, experiment: Experiment, *, heartbeat_age: float = 0) -> None:
    """The experiment as a process that died mid-way left it: two answers stored, two in
    flight (running), the rest pending."""
    trials = list(Trial.objects.filter(experiment=experiment).order_by("pk"))
    for trial in trials[:2]:
        trial.status, trial.content = TrialStatus.COMPLETED, "answered before"
        trial.save()
    Trial.objects.filter(pk__in=[t.pk for t in trials[2:4]]).update(status=TrialStatus.RUNNING)
    beat = timezone.now() - timedelta(seconds=heartbeat_age)
    Experiment.objects.filter(pk=experiment.pk).update(
        status="running", worker=worker, heartbeat_at=beat
    )


async def test_a_dead_processs_experiment_resumes_without_asking_an_answer_twice(upstream):
    experiment = await made(4)
    await left_by(a_dead_worker(), experiment)

    ended = await run_experiment(experiment.pk)

    assert ended.status == "completed" and ended.worker == ""
    assert await sync_to_async(kit.statuses)(experiment) == {"completed": 8}
    assert len(upstream.requests) == 6  # the two answered before are not asked again
    kept = [t.content async for t in Trial.objects.filter(experiment=experiment)]
    assert kept.count("answered before") == 2


async def test_a_dead_processs_cancelled_experiment_ends_cancelled_asking_nothing(upstream):
    judge = await sync_to_async(rows.judge_agent)()
    experiment = await made(4, scorers=["judge"], judge=judge)
    await left_by(a_dead_worker(), experiment)
    await Experiment.objects.filter(pk=experiment.pk).aupdate(cancel_requested=True)

    ended = await run_experiment(experiment.pk)

    # Cancelled before it died: neither its answers nor its judges go on.
    assert ended.status == "cancelled"
    assert upstream.requests == []
    assert not await Score.objects.filter(trial__experiment=experiment).aexists()


@pytest.mark.parametrize("dies", [False, True], ids=["", "its-first-process-dying"])
async def test_a_rescore_of_a_cancelled_experiment_scores_what_it_answered(upstream, dies):
    experiment = await made(4, concurrency=1)
    await left_by(a_dead_worker(), experiment)  # two answered
    await sync_to_async(runner.cancel)(experiment)
    await Experiment.objects.filter(pk=experiment.pk).aupdate(
        status="cancelled", worker="", finished_at=timezone.now()
    )

    await sync_to_async(runner.rescore)(experiment, ["contains"])
    if dies:  # taken up for the rescore by a process that died at once
        await Experiment.objects.filter(pk=experiment.pk).aupdate(
            status="running", worker=a_dead_worker(), heartbeat_at=timezone.now()
        )
    ended = await run_experiment(experiment.pk)

    assert ended.status == "cancelled"
    assert upstream.requests == []  # no answer asked
    assert await Score.objects.filter(trial__experiment=experiment).acount() == 2


async def test_another_hosts_experiment_is_taken_only_once_its_heartbeat_is_stale(
    upstream, settings
):
    experiment = await made(2)
    await left_by("elsewhere:4242:0123abcd", experiment, heartbeat_age=5)

    settings.PARLEY_STALE_RUN_AFTER = 30
    assert not await try_run(experiment.pk)
    settings.PARLEY_STALE_RUN_AFTER = 1
    assert await try_run(experiment.pk)

    await experiment.arefresh_from_db()
    assert experiment.status == "completed"
    assert len(upstream.requests) == 2


async def test_a_live_claim_is_not_taken(upstream):
    experiment = await made(2)
    await left_by(f"elsewhere:{4242}:live", experiment)

    assert not await try_run(experiment.pk)
    assert upstream.requests == []


async def test_a_request_on_a_server_starts_it_and_a_stop_hands_it_back(upstream):
    experiment = await made(3, concurrency=2)
    held = threading.Event()
    upstream.script(Reply("first", held=held), Reply("second", held=held))

    await sync_to_async(runner.request)(experiment)
    await upstream.wait_for_requests(2)
    running = await Experiment.objects.aget(pk=experiment.pk)
    assert (running.status, running.worker) == ("running", WORKER_ID)

    await lifespan.stop()
    held.set()

    await experiment.arefresh_from_db()
    assert (experiment.status, experiment.worker) == ("queued", "")
    assert await sync_to_async(kit.statuses)(experiment) == {"pending": 6}
    lifespan.start()  # as a restart would: it goes on from there
    ended = await run_experiment(experiment.pk)
    assert ended.status == "completed"
    assert len(upstream.requests) == 2 + 6


async def test_a_rescore_scores_again_without_asking_again(upstream):
    experiment = await made(3, scorers=["contains"])
    await run_experiment(experiment.pk)
    asked = len(upstream.requests)

    await sync_to_async(runner.rescore)(experiment, [{"name": "regex", "pattern": "Echo"}])
    ended = await run_experiment(experiment.pk)

    assert ended.status == "completed"
    assert len(upstream.requests) == asked
    keys = [s.scorer async for s in Score.objects.filter(trial__experiment=experiment)]
    regex = next(k for k in keys if k.startswith("regex:"))
    assert sorted(set(keys)) == ["contains", regex]
    assert keys.count(regex) == 6
    values = [s.value async for s in Score.objects.filter(scorer=regex)]
    assert values == [1.0] * 6


async def test_judges_stop_at_the_budget_too(upstream):
    judge = await sync_to_async(rows.judge_agent)()
    experiment = await made(5, concurrency=1, budget_tokens=1, scorers=["judge"], judge=judge)

    ended = await run_experiment(experiment.pk)

    assert ended.status == "budget"
    assert len(upstream.requests) == 1  # the one answer; no judge was asked about it
    assert not await Score.objects.filter(trial__experiment=experiment).aexists()


async def test_while_the_model_is_away_answers_wait_for_it_and_none_fails(upstream):
    experiment = await made(3, concurrency=2)
    # The endpoint away for its first three calls (a restart, an overload), then back.
    upstream.script(
        Reply(status=503, error_message="restarting"),
        Reply(status=503, error_message="restarting"),
        Reply(status=503, error_message="restarting"),
    )

    ended = await run_experiment(experiment.pk)

    assert ended.status == "completed"
    assert await sync_to_async(kit.statuses)(experiment) == {"completed": 6}
    assert len(upstream.requests) == 6 + 3  # the three that met it away were asked again


async def test_a_model_that_refuses_a_request_fails_that_answer_at_once(upstream):
    experiment = await made(1, concurrency=1)
    upstream.script(Reply(status=400, error_message="bad request"))

    ended = await run_experiment(experiment.pk)

    assert ended.status == "completed"
    assert await sync_to_async(kit.statuses)(experiment) == {"completed": 1, "error": 1}
    assert len(upstream.requests) == 2


async def test_a_resume_asks_the_failed_answers_again(upstream):
    experiment = await made(2, concurrency=1)
    upstream.script(Reply(status=400, error_message="refused once"))
    ended = await run_experiment(experiment.pk)
    assert ended.status == "completed"
    assert await sync_to_async(kit.statuses)(experiment) == {"completed": 3, "error": 1}
    assert await sync_to_async(runner.resumable)(ended)

    await sync_to_async(runner.request)(ended)
    again = await run_experiment(experiment.pk)

    assert again.status == "completed"
    assert await sync_to_async(kit.statuses)(experiment) == {"completed": 4}
    assert len(upstream.requests) == 4 + 1  # only the failed one was asked again
    assert not await sync_to_async(runner.resumable)(again)

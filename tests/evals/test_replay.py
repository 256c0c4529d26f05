"""What each trial sends the model, as the scripted upstream received it: the item's history and
question as its model saw them, under the candidate's own system message, with the candidate's
few-shot examples (never the item under evaluation) and its sampling; no tools."""

from __future__ import annotations

from datetime import timedelta

import pytest
from asgiref.sync import sync_to_async
from django.utils import timezone

from evals_app.experiments import create_experiment
from evals_app.models import Trial, TrialStatus
from evals_app.runner import run_experiment
from testkit.upstream import Reply
from tests.evals import kit

pytestmark = pytest.mark.django_db(transaction=True)

CONVERSATION = [
    {"role": "user", "content": "Earlier turn 0."},
    {"role": "assistant", "content": "Earlier answer 0."},
    {"role": "user", "content": "Question number 0?"},
]


@sync_to_async
def one_item_experiment(**candidate):
    baseline, draft = kit.versions(**candidate)
    dataset = kit.dataset_of(1)
    experiment = create_experiment(dataset=dataset, versions=[baseline, draft], baseline=baseline)
    return experiment


def by_version(requests):
    return {kit.sent_by(r): r for r in requests}


async def test_each_version_is_sent_the_items_conversation_under_its_own_system_message(upstream):
    experiment = await one_item_experiment(temperature=0.3, max_tokens=50, model="other-model")

    ended = await run_experiment(experiment.pk)

    assert ended.status == "completed"
    sent = by_version(upstream.requests)
    assert sent["baseline"]["messages"] == [
        {"role": "system", "content": kit.BASELINE_SAYS},
        *CONVERSATION,
    ]
    assert sent["candidate"]["messages"] == [
        {"role": "system", "content": kit.CANDIDATE_SAYS},
        *CONVERSATION,
    ]
    # The candidate's model and sampling; the baseline sets none, so sends none.
    assert sent["candidate"]["model"] == "other-model"
    assert (sent["candidate"]["temperature"], sent["candidate"]["max_tokens"]) == (0.3, 50)
    assert sent["baseline"]["model"] == "scripted"
    assert "temperature" not in sent["baseline"] and "max_tokens" not in sent["baseline"]
    assert not any("tools" in request for request in upstream.requests)


async def test_a_trial_keeps_what_it_sent_its_answer_and_its_measures(upstream):
    experiment = await one_item_experiment()

    await run_experiment(experiment.pk)

    trials = [t async for t in Trial.objects.filter(experiment=experiment)]
    assert {t.status for t in trials} == {TrialStatus.COMPLETED}
    for trial in trials:
        request = next(r for r in upstream.requests if r["messages"] == trial.sent_messages)
        assert trial.content == "Echo: Question number 0?"
        assert trial.model == request["model"]
        assert trial.input_tokens > 0 and trial.output_tokens > 0
        assert trial.total_tokens == trial.input_tokens + trial.output_tokens
        assert trial.time_to_first_token is not None and trial.duration >= trial.time_to_first_token
    await experiment.arefresh_from_db()
    assert experiment.used_tokens == sum(t.total_tokens for t in trials)


async def test_instructions_are_filled_from_the_candidates_initial_state(upstream, alice):
    @sync_to_async
    def made():
        baseline, draft = kit.versions(
            instructions="Hello {user_id}, who likes {colour}.",
            session_state={"colour": "green"},
            add_session_state_to_context=True,
        )
        dataset = kit.dataset_of(1, owner=alice)
        return create_experiment(dataset=dataset, versions=[baseline, draft], baseline=baseline)

    experiment = await made()
    await run_experiment(experiment.pk)

    systems = sorted(r["messages"][0]["content"] for r in upstream.requests)
    assert systems == [
        'Hello alice, who likes green.\n\n<session_state>\n{"colour": "green"}\n</session_state>',
        kit.BASELINE_SAYS,
    ]


@sync_to_async
def fewshot_experiment(alice):
    """Four items, newest last; the candidate is given two examples from the same dataset."""
    dataset = kit.dataset_of(0)
    items = [kit.add_item(dataset, n, owner=alice) for n in range(4)]
    now = timezone.now()
    for n, item in enumerate(items):
        item.created_at = item.reviewed_at = now - timedelta(minutes=10 - n)
        item.save()
    baseline, draft = kit.versions(fewshot_dataset=str(dataset.pk), fewshot_count=2)
    experiment = create_experiment(dataset=dataset, versions=[baseline, draft], baseline=baseline)
    return experiment


def examples_in(request) -> list[str]:
    return [m["content"] for m in request["messages"] if m.get("name") == "example_user"]


async def test_the_candidates_examples_leave_out_the_item_under_evaluation(upstream, alice):
    experiment = await fewshot_experiment(alice)

    await run_experiment(experiment.pk)

    candidate = [r for r in upstream.requests if kit.sent_by(r) == "candidate"]
    shown = {kit.asked(r): examples_in(r) for r in candidate}
    # The newest two, newest first; the item asked is replaced by the next one.
    assert shown == {
        kit.question(0): [kit.question(3), kit.question(2)],
        kit.question(1): [kit.question(3), kit.question(2)],
        kit.question(2): [kit.question(3), kit.question(1)],
        kit.question(3): [kit.question(2), kit.question(1)],
    }
    request = next(r for r in candidate if kit.asked(r) == kit.question(0))
    assert request["messages"][0] == {"role": "system", "content": kit.CANDIDATE_SAYS}
    assert request["messages"][1:5] == [
        {"role": "user", "name": "example_user", "content": kit.question(3)},
        {"role": "assistant", "name": "example_assistant", "content": "Answer 3."},
        {"role": "user", "name": "example_user", "content": kit.question(2)},
        {"role": "assistant", "name": "example_assistant", "content": "Answer 2."},
    ]
    # The baseline has no few-shot dataset: no examples.
    baseline = [r for r in upstream.requests if kit.sent_by(r) == "baseline"]
    assert all(examples_in(r) == [] for r in baseline)


async def test_a_failing_upstream_fails_that_trial_with_its_reason_and_the_rest_go_on(upstream):
    experiment = await sync_to_async(kit.experiment_of)(3, concurrency=1)
    upstream.script(Reply(status=500, error_message="the model fell over"))

    ended = await run_experiment(experiment.pk)

    assert ended.status == "completed"
    assert await sync_to_async(kit.statuses)(experiment) == {"completed": 5, "error": 1}
    failed = await Trial.objects.aget(experiment=experiment, status=TrialStatus.ERROR)
    assert "the model fell over" in failed.error
    assert failed.sent_messages is not None


async def test_an_item_deleted_or_without_a_question_fails_its_trials(upstream):
    experiment = await sync_to_async(kit.experiment_of)(3)

    @sync_to_async
    def spoil():
        first, second, _ = experiment.dataset.items.order_by("created_at")
        second.messages = [{"role": "assistant", "content": "An answer to nothing."}]
        second.save()
        first.delete()

    await spoil()
    ended = await run_experiment(experiment.pk)

    assert ended.status == "completed"
    errors = [t.error async for t in Trial.objects.filter(experiment=experiment, status="error")]
    assert sorted(errors) == sorted(
        ["The item was deleted from its dataset."] * 2
        + ["The item has no user turn to answer."] * 2
    )
    assert len(upstream.requests) == 2

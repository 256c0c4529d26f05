"""The few-shot loop: a dataset's accepted examples reach the model before the history, and
nowhere else (not the session's messages, not its history, not a new item's snapshot)."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async

from datasets_app.models import Dataset, ItemStatus
from datasets_app.services import collect
from sessions_app import engine
from sessions_app.models import FewShotOrder, Message, Run

pytestmark = pytest.mark.django_db(transaction=True)


async def answered(user, text: str, **kwargs) -> Run:
    handle = await engine.start_run(user, text, **kwargs)
    return await handle.wait()


@sync_to_async
def curate(dataset: Dataset, run: Run, status: str = ItemStatus.ACCEPTED, **fields):
    (item, *_) = collect.add_run(dataset, Run.objects.get(pk=run.pk), status=status)
    for name, value in fields.items():
        setattr(item, name, value)
    item.save()
    return item


@pytest.fixture
def dataset(db) -> Dataset:
    return Dataset.objects.create(name="greetings")


def examples(request: dict) -> list[tuple[str, str, str]]:
    return [
        (m["role"], m.get("name", ""), m["content"])
        for m in request["messages"]
        if m.get("name", "").startswith("example_")
    ]


async def test_accepted_examples_are_sent_after_the_system_message_and_before_history(
    alice, bob, brief_agent, dataset, upstream
):
    first = await curate(dataset, await answered(bob, "hello"))
    second = await curate(dataset, await answered(bob, "good morning"), corrected_answer="Morning!")
    await curate(dataset, await answered(bob, "pending one"), status=ItemStatus.PENDING)
    await curate(dataset, await answered(bob, "rejected one"), status=ItemStatus.REJECTED)
    brief_agent.fewshot_dataset = dataset
    brief_agent.fewshot_count = 3
    await brief_agent.asave()

    opening = await answered(alice, "hi")
    follow = await answered(alice, "and then?", session_id=opening.session_id)

    sent = upstream.requests[-1]["messages"]
    assert sent[0] == {"role": "system", "content": "Be brief."}
    # Newest first, the reviewer's correction in place of the answer; nothing pending or rejected.
    assert sent[1:5] == [
        {"role": "user", "name": "example_user", "content": "good morning"},
        {"role": "assistant", "name": "example_assistant", "content": "Morning!"},
        {"role": "user", "name": "example_user", "content": "hello"},
        {"role": "assistant", "name": "example_assistant", "content": "Echo: hello"},
    ]
    assert sent[5:] == [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "Echo: hi"},
        {"role": "user", "content": "and then?"},
    ]
    assert examples(upstream.requests[-2]) == examples(upstream.requests[-1])
    assert follow.fewshot_items == [str(second.item_id), str(first.item_id)]
    stored = [m.content async for m in Message.objects.filter(session_id=follow.session_id)]
    assert sorted(stored) == sorted(["hi", "Echo: hi", "and then?", "Echo: and then?"])


async def test_a_run_given_examples_is_collected_without_them(
    alice, bob, brief_agent, dataset, upstream
):
    await curate(dataset, await answered(bob, "hello"))
    brief_agent.fewshot_dataset = dataset
    await brief_agent.asave()
    run = await answered(alice, "hi")

    other = await Dataset.objects.acreate(name="second")
    item = await curate(other, run)

    assert examples(upstream.requests[-1])
    assert item.messages == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "Echo: hi"},
    ]


async def test_count_order_and_opt_out_choose_the_examples(
    alice, bob, brief_agent, dataset, upstream
):
    liked = await curate(dataset, await answered(bob, "liked"), rating=1)
    await curate(dataset, await answered(bob, "plain"))
    await curate(dataset, await answered(alice, "alice's own"), rating=1)
    alice.allow_training = False
    await alice.asave()
    brief_agent.fewshot_dataset = dataset
    brief_agent.fewshot_count = 1
    brief_agent.fewshot_order = FewShotOrder.BEST
    await brief_agent.asave()

    run = await answered(bob, "question")

    # Best rated first, one only; alice opted out, so her rated item is never shown.
    assert examples(upstream.requests[-1]) == [
        ("user", "example_user", "liked"),
        ("assistant", "example_assistant", "Echo: liked"),
    ]
    assert run.fewshot_items == [str(liked.item_id)]


async def test_an_agent_without_a_dataset_sends_no_examples(alice, brief_agent, dataset, upstream):
    await curate(dataset, await answered(alice, "hello"))
    run = await answered(alice, "hi")
    assert examples(upstream.requests[-1]) == [] and run.fewshot_items == []


async def test_a_run_item_gives_its_own_question_and_answer_not_its_history(
    alice, bob, brief_agent, dataset, upstream
):
    opening = await answered(bob, "first question")
    later = await answered(bob, "second question", session_id=opening.session_id)
    await curate(dataset, later)
    brief_agent.fewshot_dataset = dataset
    await brief_agent.asave()

    await answered(alice, "hi")

    assert examples(upstream.requests[-1]) == [
        ("user", "example_user", "second question"),
        ("assistant", "example_assistant", "Echo: second question"),
    ]

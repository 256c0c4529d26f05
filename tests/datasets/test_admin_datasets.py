"""Staff curate datasets in the admin: runs and sessions added from their lists and pages, items
reviewed and corrected, datasets downloaded; only staff with the datasets' permissions."""

from __future__ import annotations

import json

import pytest
from django.contrib.auth.models import Permission
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from datasets_app.admin import collect as collect_admin
from datasets_app.admin.excerpts import with_excerpt
from datasets_app.models import Dataset, DatasetItem, DatasetRule, ItemSource, ItemStatus
from datasets_app.services import collect, snapshot
from sessions_app.models import Agent, Run, RunStatus, Session
from tests.support.apiclient import stored_run

XSS = '<script>alert("x")</script><img src=x onerror=alert(1)>'
RUNS = "/admin/sessions_app/run/"
SESSIONS = "/admin/sessions_app/session/"
ITEMS = "/admin/datasets_app/datasetitem/"
DATASETS = "/admin/datasets_app/dataset/"
COLLECT = ITEMS + "collect/"

pytestmark = [
    pytest.mark.django_db,
    # Exports stream from an async iterator, which the sync test client reads whole.
    pytest.mark.filterwarnings("ignore:StreamingHttpResponse must consume asynchronous iterators"),
]


def staff_with(django_user_model, name: str, *codenames: str) -> Client:
    user = django_user_model.objects.create_user(name, password="x", is_staff=True)
    user.user_permissions.add(*Permission.objects.filter(codename__in=codenames))
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def good() -> Dataset:
    return Dataset.objects.create(name="good")


@pytest.fixture
def talk(alice, agent) -> Session:
    """Three runs: two answered, the last failed."""
    session = Session.objects.create(user=alice, agent=agent, session_name="Bread talk")
    stored_run(session, "How do I bake bread?", "Knead **well**.")
    stored_run(session, "And rye?", "Use a *sourdough* starter.")
    stored_run(session, "And spelt?", "", status=RunStatus.ERROR)
    return session


def runs_of(session: Session) -> list[Run]:
    return list(session.runs.order_by("position"))


def messages_of(response) -> list[str]:
    return [str(m) for m in response.context["messages"]]


def choose(client: Client, path: str, action: str, keys: list[str], **extra: str):
    """The action's first step: the page asking which dataset."""
    return client.post(path, {"action": action, "_selected_action": keys, **extra})


def apply(client: Client, path: str, action: str, keys: list[str], dataset: Dataset, **extra):
    form = {"action": action, "_selected_action": keys, "apply": "yes",
            "dataset": str(dataset.pk), "status": "pending", **extra}  # fmt: skip
    return client.post(path, form, follow=True)


def test_the_action_asks_for_the_dataset_then_adds_the_selected_runs(root, talk, good):
    first, second, failed = runs_of(talk)
    collect.add_run(good, second)
    keys = [str(r.pk) for r in (first, second, failed)]

    asked = choose(root, RUNS, "add_runs_to_dataset", keys)
    page = asked.content.decode()
    assert asked.status_code == 200 and "Add the 3 selected runs to a dataset" in page
    assert f'<option value="{good.pk}">good</option>' in page
    assert 'name="csrfmiddlewaretoken"' in page
    assert all(f'name="_selected_action" value="{k}"' in page for k in keys)

    done = apply(root, RUNS, "add_runs_to_dataset", keys, good)
    assert messages_of(done) == [
        "1 run added to the dataset “good”; 1 run was already in it; 1 run could not be added: "
        "Only completed runs can be added; this run is ERROR."
    ]
    kept = DatasetItem.objects.filter(dataset=good).values_list("source_run_id", flat=True)
    assert set(kept) == {first.pk, second.pk}


def test_the_action_adds_a_whole_filtered_selection_a_limited_number_at_a_time(
    root, alice, agent, good, monkeypatch
):
    session = Session.objects.create(user=alice, agent=agent, session_name="Many")
    for i in range(5):
        stored_run(session, f"q{i}", f"a{i}")
    stored_run(session, "broken", "", status=RunStatus.ERROR)
    monkeypatch.setattr(collect_admin, "COLLECT_LIMIT", 3)
    one = str(session.runs.first().pk)
    path = RUNS + "?status__exact=COMPLETED"

    done = apply(root, path, "add_runs_to_dataset", [one], good, select_across="1")
    assert messages_of(done) == [
        "3 runs added to the dataset “good”; 2 runs more left: run the action again to add them."
    ]
    again = apply(root, path, "add_runs_to_dataset", [one], good, select_across="1")
    assert messages_of(again) == ["2 runs added to the dataset “good”; 3 runs were already in it."]
    inputs = DatasetItem.objects.filter(dataset=good).values_list("run__input", flat=True)
    assert sorted(inputs) == [f"q{i}" for i in range(5)]


def test_sessions_are_added_whole_and_one_without_an_answer_is_refused(root, talk, alice, good):
    empty = Session.objects.create(user=alice, agent=talk.agent, session_name="Empty")
    keys = [str(talk.pk), str(empty.pk)]
    done = apply(root, SESSIONS, "add_sessions_to_dataset", keys, good, status="accepted")
    assert messages_of(done) == [
        "1 session added to the dataset “good”; 1 session could not be added: "
        "This session has no completed run to learn from."
    ]
    item = DatasetItem.objects.get(dataset=good)
    assert item.source == ItemSource.SESSION and item.status == ItemStatus.ACCEPTED
    said = [m["content"] for m in item.messages if m["role"] == "user"]
    assert said == ["How do I bake bread?", "And rye?"]
    twice = apply(root, SESSIONS, "add_sessions_to_dataset", [str(talk.pk)], good)
    assert messages_of(twice) == [
        "0 sessions added to the dataset “good”; 1 session was already in it."
    ]


def test_without_a_dataset_the_action_says_so_and_links_to_adding_one(root, talk):
    page = choose(root, RUNS, "add_runs_to_dataset", [str(runs_of(talk)[0].pk)])
    text = page.content.decode()
    assert "There is no dataset yet." in text
    assert 'href="/admin/datasets_app/dataset/add/"' in text
    assert not DatasetItem.objects.exists()


def test_a_run_is_added_from_the_transcript_and_not_twice(root, talk, good):
    first = runs_of(talk)[0]
    path = f"{SESSIONS}{talk.pk}/change/"
    page = root.get(path).content.decode()
    assert f'form="collect-run-{first.pk}"' in page and 'form="collect-session"' in page
    # Forms do not nest: the page's own form closes before the dataset forms begin.
    main = page[page.index('id="session_form"') :]
    assert "<form" not in main[: main.index("</form>")]
    assert f'<form id="collect-run-{first.pk}" method="post"' in main

    form = {"dataset": str(good.pk), "run": str(first.pk), "status": "pending",
            "next": f"{path}#run-{first.pk}"}  # fmt: skip
    added = root.post(COLLECT, form)
    assert added.status_code == 302 and added["Location"] == f"{path}#run-{first.pk}"
    back = root.get(path)
    assert messages_of(back) == ["Run added to the dataset “good”."]
    again = root.post(COLLECT, form, follow=True)
    assert messages_of(again) == [f"Run {first.pk} is already in the dataset “good”."]
    assert DatasetItem.objects.filter(dataset=good).count() == 1


def test_a_run_added_again_brings_the_pair_rated_since(root, alice, agent, good):
    session = Session.objects.create(user=alice, agent=agent)
    first = stored_run(session, "How do I bake bread?", "Knead well.")
    Run.objects.filter(pk=first.pk).update(feedback_rating=1)
    worse = stored_run(session, first.input, "Just buy it.")
    form = {"dataset": str(good.pk), "run": str(first.pk), "status": "pending"}
    assert messages_of(root.post(COLLECT, form, follow=True)) == [
        "Run added to the dataset “good”."
    ]
    Run.objects.filter(pk=worse.pk).update(feedback_rating=-1)
    again = root.post(COLLECT, form, follow=True)
    assert messages_of(again) == ["The run's preference pair added to the dataset “good”."]
    sources = DatasetItem.objects.filter(dataset=good).values_list("source", flat=True)
    assert sorted(sources) == ["pair", "run"]


def test_a_whole_session_and_a_run_from_its_page_are_added(root, talk, good):
    whole = {"dataset": str(good.pk), "session": str(talk.pk), "status": "pending"}
    done = root.post(COLLECT, whole, follow=True)
    assert done.redirect_chain[-1][0] == f"{SESSIONS}{talk.pk}/change/"
    assert messages_of(done) == ["Session added to the dataset “good”."]
    failed = runs_of(talk)[2]
    refused = root.post(COLLECT, {**whole, "session": "", "run": str(failed.pk)}, follow=True)
    assert messages_of(refused) == [
        "Not added: Only completed runs can be added; this run is ERROR."
    ]
    run_page = root.get(f"{RUNS}{runs_of(talk)[0].pk}/change/").content.decode()
    assert f'form="collect-run-{runs_of(talk)[0].pk}"' in run_page


@pytest.mark.parametrize(
    ("form", "said"),
    [
        ({"run": "", "session": ""}, "Choose one run or one session to add."),
        ({"dataset": "not-an-id"}, "“not-an-id” is not a valid UUID."),
        ({"dataset": "0" * 32}, "Select a valid choice."),
    ],
)
def test_the_add_form_refuses_bad_input_clearly(root, talk, good, form, said):
    data = {"dataset": str(good.pk), "run": str(runs_of(talk)[0].pk), "status": "pending", **form}
    done = root.post(COLLECT, data, follow=True)
    assert done.status_code == 200
    assert messages_of(done)[0].startswith("Nothing was added: ")
    assert said in messages_of(done)[0]
    assert root.get(COLLECT).status_code == 405
    assert not DatasetItem.objects.exists()


def test_the_transcript_says_when_no_dataset_exists(root, talk):
    page = root.get(f"{SESSIONS}{talk.pk}/change/").content.decode()
    assert "No dataset to add to yet" in page and "/admin/datasets_app/dataset/add/" in page


def test_a_run_page_lists_the_examples_it_was_given(root, talk, good):
    first, second, _ = runs_of(talk)
    example = collect.add_run(good, first)[0]
    gone = collect.add_run(good, second)[0]
    gone_id = str(gone.pk)
    gone.delete()
    Run.objects.filter(pk=second.pk).update(fewshot_items=[str(example.pk), gone_id])
    for path in (f"{RUNS}{second.pk}/change/", f"{SESSIONS}{talk.pk}/change/"):
        page = root.get(path).content.decode()
        assert f'href="{ITEMS}{example.pk}/change/">How do I bake bread?</a>' in page, path
        assert f"item deleted ({gone_id})" in page, path


def add_items(dataset: Dataset, session: Session) -> list[DatasetItem]:
    return [collect.add_run(dataset, run)[0] for run in runs_of(session)[:2]]


def test_an_item_page_shows_the_conversation_and_saves_a_correction(root, talk, good):
    item = add_items(good, talk)[1]
    path = f"{ITEMS}{item.pk}/change/"
    page = root.get(path).content.decode()
    conversation = page[page.index('data-testid="item-conversation"') :]
    assert "How do I bake bread?" in conversation and "Knead <strong>well</strong>." in conversation
    answer = page[page.index('data-testid="original-answer"') :]
    assert "Use a <em>sourdough</em> starter." in answer
    assert '<textarea name="corrected_answer"' in page

    form = {"status": "pending", "split": "test", "corrected_answer": "Use rye flour.",
            "_accept": "Save and accept"}  # fmt: skip
    assert root.post(path, form).status_code == 302
    item.refresh_from_db()
    assert (item.status, item.split, item.corrected_answer) == (
        "accepted",
        "test",
        "Use rye flour.",
    )
    assert item.reviewed_at is not None
    assert item.content_hash == snapshot.content_hash(item.messages, "Use rye flour.")
    assert item.content_hash != snapshot.content_hash(item.messages)
    listed = root.get(f"{ITEMS}?corrected=yes").context["cl"].result_list
    assert [i.pk for i in listed] == [item.pk]


@pytest.mark.parametrize(
    "button, said, status",
    [
        ({"_accept": "Save and accept"}, "The item was saved and accepted.", "accepted"),
        ({"_reject": "Save and reject"}, "The item was saved and rejected.", "rejected"),
        ({"_save": "Save"}, "was changed successfully.", "pending"),
    ],
)
def test_saving_an_item_says_what_its_review_decided(root, talk, good, button, said, status):
    item = add_items(good, talk)[0]
    path = f"{ITEMS}{item.pk}/change/"

    saved = root.post(path, {"status": "pending", "split": "train", **button}, follow=True)

    assert saved.redirect_chain[-1][0] == ITEMS
    listed = saved.content.decode().split('<ul class="messagelist">')[1].split("</ul>")[0]
    assert listed.count("<li") == 1 and f"{said}</li>" in listed, listed
    item.refresh_from_db()
    assert item.status == status


def test_the_item_list_reads_no_whole_conversation(root, talk, good):
    first, second = add_items(good, talk)
    DatasetItem.objects.filter(pk=first.pk).update(corrected_answer="Knead it for ten minutes.")
    with CaptureQueriesContext(connection) as captured:
        page = root.get(ITEMS)
    rows = page.context["cl"].result_list
    assert {row.pk for row in rows} == {first.pk, second.pk}
    for row in rows:
        unread = {"messages", "tools", "corrected_answer", "rejected_answer"}
        assert unread <= row.get_deferred_fields()
    rows_read = 'SELECT "datasets_app_datasetitem"."item_id"'
    (listing,) = [q["sql"] for q in captured if q["sql"].startswith(rows_read)]
    columns = listing.split(' FROM "datasets_app_datasetitem"')[0]
    # The conversation is read only by the JSON lookups of its first words, never whole.
    messages = '"datasets_app_datasetitem"."messages"'
    first_words = str(with_excerpt(DatasetItem.objects.only("pk")).query).count(messages)
    assert first_words > 0 and columns.count(messages) == first_words
    assert '"datasets_app_datasetitem"."rejected_answer"' not in columns
    assert '"datasets_app_datasetitem"."tools"' not in columns
    html = page.content.decode()
    assert html.count('alt="True"') == 1 and html.count('alt="False"') == 1


def test_an_item_shows_its_runs_rating_now_when_it_changed_since(root, talk, good):
    first = runs_of(talk)[0]
    Run.objects.filter(pk=first.pk).update(feedback_rating=1)
    item = collect.add_run(good, Run.objects.get(pk=first.pk))[0]
    page = root.get(f"{ITEMS}{item.pk}/change/").content.decode()
    assert "(the run now:" not in page
    Run.objects.filter(pk=first.pk).update(staff_rating=-1)
    for path in (f"{ITEMS}{item.pk}/change/", ITEMS):
        page = root.get(path).content.decode()
        assert '👍 <span class="quiet">(the run now: 👎)</span>' in page, path
    item.refresh_from_db()
    assert item.rating == 1  # the snapshot keeps the rating it was taken with


def test_a_pair_item_shows_both_answers(root, talk, good):
    first, second, _ = runs_of(talk)
    pair = collect.add_pair(good, first, second)
    page = root.get(f"{ITEMS}{pair.pk}/change/").content.decode()
    chosen = page[page.index('data-testid="chosen-answer"') :]
    rejected = page[page.index('data-testid="rejected-answer"') :]
    assert "Knead <strong>well</strong>." in chosen[: chosen.index("rejected-answer")]
    assert "Use a <em>sourdough</em> starter." in rejected


def test_items_are_accepted_rejected_and_moved_in_bulk(root, talk, good):
    first, second = add_items(good, talk)
    keys = [str(first.pk), str(second.pk)]
    done = root.post(ITEMS, {"action": "accept", "_selected_action": keys}, follow=True)
    assert messages_of(done) == ["2 items accepted."]
    moved = root.post(ITEMS, {"action": "move_to_validation", "_selected_action": keys[:1]},
                      follow=True)  # fmt: skip
    assert messages_of(moved) == ["1 item moved to validation."]
    root.post(ITEMS, {"action": "reject", "_selected_action": keys[1:]})
    rows = DatasetItem.objects.order_by("created_at").values_list("status", "split")
    assert list(rows) == [("accepted", "validation"), ("rejected", second.split)]
    assert not DatasetItem.objects.filter(reviewed_at=None).exists()


def review(item: DatasetItem, **changed: str) -> dict[str, str]:
    """The item page's form as it is, with some fields changed."""
    form = {"status": item.status, "split": item.split, "corrected_answer": item.corrected_answer}
    if item.use_weights:
        form["use_weights"] = "on"
    return {**form, **changed}


def test_an_item_sent_back_to_pending_is_no_longer_reviewed(root, talk, good):
    item = add_items(good, talk)[0]
    path = f"{ITEMS}{item.pk}/change/"
    assert root.post(path, review(item, _accept="Save and accept")).status_code == 302
    item.refresh_from_db()
    assert item.status == "accepted" and item.reviewed_at is not None
    assert root.post(path, review(item, status="pending")).status_code == 302
    item.refresh_from_db()
    assert item.status == "pending" and item.reviewed_at is None


def test_a_correction_of_an_item_without_an_answer_is_refused_on_the_form(root, talk, good):
    item = add_items(good, talk)[0]
    DatasetItem.objects.filter(pk=item.pk).update(messages=item.messages[:-1])
    item.refresh_from_db()
    page = root.post(f"{ITEMS}{item.pk}/change/", review(item, corrected_answer="Knead it."))
    assert page.status_code == 200
    assert page.context["adminform"].form.errors == {
        "corrected_answer": ["This item has no final answer to correct."]
    }
    item.refresh_from_db()
    assert item.corrected_answer == "" and item.reviewed_at is None


def weights_exported(root: Client, dataset: Dataset) -> list[list]:
    _, body = accepted_export(root, dataset, "format=openai-chat")
    lines = [json.loads(line) for line in body.splitlines()]
    return [[m.get("weight") for m in line["messages"] if m["role"] == "assistant"]
            for line in lines]  # fmt: skip


def test_training_only_on_turns_not_rated_down_is_set_on_the_item_page(root, talk, good):
    first, second = runs_of(talk)[:2]
    Run.objects.filter(pk=first.pk).update(feedback_rating=-1)
    Run.objects.filter(pk=second.pk).update(feedback_rating=1)
    item = collect.add_session(good, talk, status=ItemStatus.ACCEPTED)
    path = f"{ITEMS}{item.pk}/change/"
    page = root.get(path).content.decode()
    assert 'name="use_weights"' in page
    assert "Train only on turns not rated down (weights)" in page
    assert weights_exported(root, good) == [[None, None]]
    assert root.post(path, review(item, use_weights="on")).status_code == 302
    item.refresh_from_db()
    assert item.use_weights and item.status == "accepted"
    assert weights_exported(root, good) == [[0, 1]]


def test_turns_are_weighted_or_not_in_bulk(root, talk, good):
    first, second = add_items(good, talk)
    keys = [str(first.pk), str(second.pk)]
    done = root.post(ITEMS, {"action": "weight", "_selected_action": keys}, follow=True)
    assert messages_of(done) == ["2 items weighted by rating."]
    assert set(DatasetItem.objects.values_list("use_weights", flat=True)) == {True}
    undone = root.post(ITEMS, {"action": "unweight", "_selected_action": keys[:1]}, follow=True)
    assert messages_of(undone) == ["1 item no longer weighted."]
    assert not DatasetItem.objects.get(pk=first.pk).use_weights
    # Weighting is not a verdict: the items are still waiting for one.
    assert not DatasetItem.objects.exclude(reviewed_at=None).exists()


def test_counts_per_status_and_split_show_on_the_lists_and_the_dataset_page(
    root, talk, good, agent
):
    first, second = add_items(good, talk)
    DatasetItem.objects.filter(pk=first.pk).update(status="accepted", split="train")
    DatasetItem.objects.filter(pk=second.pk).update(split="test")
    Dataset.objects.create(name="other")
    DatasetRule.objects.create(dataset=good, agent=agent)

    listed = root.get(DATASETS).content.decode()
    row = listed[listed.index(">good<") :].split("</tr>")[0]
    cells = [c.split(">")[-1] for c in row.split("</a>")[:-1]][1:]
    # items, pending, accepted, rejected, train, validation, test; then the rules.
    assert cells == ["2", "1", "1", "0", "1", "0", "1"]
    assert row.split("</td>")[-3].endswith(">1")

    page = root.get(f"{DATASETS}{good.pk}/change/").content.decode()
    table = page[page.index('data-testid="item-counts"') :].split("</table>")[0]
    accepted = table[table.index('data-status="accepted"') :].split("</tr>")[0]
    assert [c.split(">")[-1] for c in accepted.split("</a>")[:-1]] == ["1", "0", "0", "1"]
    assert f"dataset__dataset_id__exact={good.pk}&amp;status__exact=accepted" in accepted

    items = root.get(f"{ITEMS}?dataset__dataset_id__exact={good.pk}").content.decode()
    assert 'data-testid="item-counts"' in items
    assert 'id="id_rules-0-agent"' in page  # the rules inline


def accepted_export(root: Client, dataset: Dataset, query: str) -> tuple:
    response = root.get(f"{DATASETS}{dataset.pk}/export/?{query}")
    return response, b"".join(response).decode()


def test_a_dataset_downloads_its_accepted_items(root, talk, good):
    first, _pending = add_items(good, talk)
    DatasetItem.objects.filter(pk=first.pk).update(
        status="accepted", split="train", corrected_answer="Knead for ten minutes."
    )
    response, body = accepted_export(root, good, "format=openai-chat")
    assert response["Content-Type"].startswith("application/jsonl")
    assert response["Content-Disposition"].startswith("attachment")
    lines = [json.loads(line) for line in body.splitlines()]
    assert len(lines) == 1
    assert lines[0]["messages"][-1] == {"role": "assistant", "content": "Knead for ten minutes."}

    _, none = accepted_export(root, good, "format=openai-chat&split=test")
    assert none == ""
    card = root.get(f"{DATASETS}{good.pk}/card/?format=openai-chat")
    assert card["Content-Type"].startswith("text/markdown")
    assert "good" in card.content.decode()


@pytest.mark.parametrize("query", ["format=yaml", "format=openai-chat&split=holdout", ""])
def test_a_download_with_bad_options_goes_back_with_why(root, good, query):
    response = root.get(f"{DATASETS}{good.pk}/export/?{query}", follow=True)
    assert response.redirect_chain[-1][0] == f"{DATASETS}{good.pk}/change/"
    assert messages_of(response)[0].startswith("Nothing to download: ")


def test_the_dataset_page_offers_every_format_and_the_card(root, good):
    page = root.get(f"{DATASETS}{good.pk}/change/").content.decode()
    for name in ["openai-chat", "openai-preference", "sharegpt", "hf-messages", "csv"]:
        assert f'<option value="{name}"' in page
    assert f'action="{DATASETS}{good.pk}/export/"' in page
    assert f'href="{DATASETS}{good.pk}/card/?format=openai-chat"' in page


def test_the_agent_page_groups_its_few_shot_settings(root, agent, good):
    page = root.get(f"/admin/sessions_app/agent/{agent.pk}/change/").content.decode()
    fewshot = page[page.index("Few-shot examples") :]
    for name in ("fewshot_dataset", "fewshot_count", "fewshot_order"):
        assert f'name="{name}"' in fewshot
    assert f'<option value="{good.pk}">good</option>' in fewshot


@pytest.mark.parametrize("path", [DATASETS, ITEMS, "item", "export", "dataset"])
def test_datasets_are_closed_to_anyone_who_is_not_staff(alice, talk, good, path):
    item = add_items(good, talk)[0]
    path = {
        "item": f"{ITEMS}{item.pk}/change/",
        "export": f"{DATASETS}{good.pk}/export/?format=openai-chat",
        "dataset": f"{DATASETS}{good.pk}/change/",
    }.get(path, path)
    user = Client()
    user.force_login(alice)
    for client in (Client(), user):
        response = client.get(path)
        assert response.status_code == 302 and "/admin/login/" in response["Location"]
    posted = user.post(COLLECT, {"dataset": str(good.pk), "run": str(talk.runs.first().pk)})
    assert posted.status_code == 302 and "/admin/login/" in posted["Location"]
    assert DatasetItem.objects.count() == 2


def test_staff_without_the_datasets_permissions_get_403(staff, talk, good):
    client = Client()
    client.force_login(staff)  # may read runs and model calls, nothing of datasets
    run = runs_of(talk)[0]
    item = add_items(good, talk)[0]
    for path in (DATASETS, ITEMS, f"{ITEMS}{item.pk}/change/", f"{DATASETS}{good.pk}/change/",
                 f"{DATASETS}{good.pk}/export/?format=openai-chat",
                 f"{DATASETS}{good.pk}/card/?format=openai-chat"):  # fmt: skip
        assert client.get(path).status_code == 403, path
    assert client.post(COLLECT, {"dataset": str(good.pk), "run": str(run.pk)}).status_code == 403
    choices = client.get(RUNS).context["action_form"].fields["action"].choices
    assert "add_runs_to_dataset" not in [name for name, _ in choices]
    page = client.get(f"{RUNS}{run.pk}/change/").content.decode()
    assert "collect-run" not in page
    client.post(RUNS, {"action": "add_runs_to_dataset", "_selected_action": [str(run.pk)],
                       "apply": "yes", "dataset": str(good.pk), "status": "pending"})  # fmt: skip
    assert DatasetItem.objects.count() == 2


def test_staff_who_may_only_read_datasets_download_but_do_not_review(django_user_model, talk, good):
    reader = staff_with(django_user_model, "reader", "view_dataset", "view_datasetitem")
    item = add_items(good, talk)[0]
    assert reader.get(f"{DATASETS}{good.pk}/export/?format=csv").status_code == 200
    reader.post(ITEMS, {"action": "accept", "_selected_action": [str(item.pk)]})
    reader.post(
        f"{ITEMS}{item.pk}/change/",
        {"status": "accepted", "split": "train", "corrected_answer": "x", "_accept": "1"},
    )
    item.refresh_from_db()
    assert item.status == "pending" and item.corrected_answer == ""
    assert (
        'data-testid="item-accept"' not in reader.get(f"{ITEMS}{item.pk}/change/").content.decode()
    )


def test_staff_who_may_add_items_collect_without_other_dataset_rights(
    django_user_model, talk, good
):
    collector = staff_with(django_user_model, "collector", "view_run", "add_datasetitem")
    run = runs_of(talk)[0]
    done = collector.post(COLLECT, {"dataset": str(good.pk), "run": str(run.pk),
                                    "status": "pending"}, follow=True)  # fmt: skip
    assert messages_of(done) == ["Run added to the dataset “good”."]
    # Without reading sessions, a session is not copied into a dataset by id.
    refused = collector.post(COLLECT, {"dataset": str(good.pk), "session": str(talk.pk),
                                       "status": "pending"})  # fmt: skip
    assert refused.status_code == 403


def test_names_and_messages_are_inert_html_in_the_datasets_admin(root, alice, good):
    agent = Agent.objects.create(name=XSS, model=XSS, instructions="")
    session = Session.objects.create(user=alice, agent=agent, session_name=XSS)
    run = stored_run(session, XSS, XSS)
    item = collect.add_run(good, run)[0]
    DatasetItem.objects.filter(pk=item.pk).update(corrected_answer=XSS)
    Run.objects.filter(pk=run.pk).update(fewshot_items=[str(item.pk)])
    Dataset.objects.filter(pk=good.pk).update(description=XSS)
    for path in (ITEMS, f"{ITEMS}{item.pk}/change/", DATASETS, f"{DATASETS}{good.pk}/change/",
                 f"{RUNS}{run.pk}/change/", f"{SESSIONS}{session.pk}/change/"):  # fmt: skip
        page = root.get(path).content.decode()
        assert "<script>alert" not in page, path
        assert "<img src=x" not in page, path


def _queries(client: Client, path: str) -> int:
    """The queries of a page served once already: what caches fill on a first view (content
    types, permissions) is not what the page costs per row."""
    assert client.get(path).status_code == 200
    with CaptureQueriesContext(connection) as captured:
        assert client.get(path).status_code == 200
    return len(captured)


@pytest.mark.parametrize("path", [DATASETS, ITEMS, "filtered"])
def test_a_datasets_list_costs_the_same_queries_for_three_rows_or_thirty(
    root, alice, agent, good, path
):
    path = {"filtered": f"{ITEMS}?dataset__dataset_id__exact={good.pk}"}.get(path, path)

    def grow(n: int) -> None:
        for i in range(n):
            session = Session.objects.create(user=alice, agent=agent, session_name=f"s{i}")
            item = collect.add_run(good, stored_run(session, f"q{i}", f"a{i}"))[0]
            Dataset.objects.create(name=f"set-{item.pk}")

    grow(3)
    few = _queries(root, path)
    grow(27)
    assert _queries(root, path) == few
    assert few <= 12


def test_a_transcript_with_examples_costs_the_same_queries_for_three_runs_or_thirty(
    root, talk, good
):
    example = collect.add_run(good, runs_of(talk)[0])[0]
    Run.objects.filter(pk=runs_of(talk)[1].pk).update(fewshot_items=[str(example.pk)])
    path = f"{SESSIONS}{talk.pk}/change/"
    few = _queries(root, path)
    for i in range(27):
        run = stored_run(talk, f"more {i}", f"answer {i}")
        Run.objects.filter(pk=run.pk).update(fewshot_items=[str(example.pk)])
    assert _queries(root, path) == few


def test_a_dataset_is_created_by_staff_with_splits_that_fit(root, superuser):
    form = {"name": "fine-tune", "description": "", "validation_percent": "60",
            "test_percent": "50", "rules-TOTAL_FORMS": "0", "rules-INITIAL_FORMS": "0"}  # fmt: skip
    refused = root.post(f"{DATASETS}add/", form)
    assert refused.status_code == 200 and not Dataset.objects.exists()
    page = refused.content.decode()
    assert "Validation and test together take 110 % of the items; at most 100 %." in page
    assert "dataset_splits_fit" not in page
    assert root.post(f"{DATASETS}add/", {**form, "test_percent": "10"}).status_code == 302
    assert Dataset.objects.get().created_by == superuser


def test_deleting_a_dataset_counts_what_goes_with_it(root, talk, good):
    add_items(good, talk)
    path = f"{DATASETS}{good.pk}/delete/"
    confirm = root.get(path).content.decode()
    assert "good: 2 items, 0 rules" in confirm
    assert root.post(path, {"post": "yes"}).status_code == 302
    assert not Dataset.objects.exists() and not DatasetItem.objects.exists()

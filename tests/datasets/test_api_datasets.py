"""The datasets API (staff with the datasets' permissions): datasets, their items, reviews,
exports; agents' few-shot fields."""

from __future__ import annotations

import csv
import io
import json
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from django.test import Client

from datasets_app.models import Dataset, DatasetItem
from sessions_app.models import Agent, RunStatus, Session
from tests.support.apiclient import api_client, stored_run
from tests.support.roles import grant

pytestmark = pytest.mark.django_db

DATASET_FIELDS = {
    "dataset_id",
    "name",
    "description",
    "validation_percent",
    "test_percent",
    "counts",
    "created_at",
    "updated_at",
}
ITEM_FIELDS = {
    "item_id",
    "dataset_id",
    "source",
    "run_id",
    "session_id",
    "status",
    "split",
    "messages",
    "tools",
    "corrected_answer",
    "rejected_answer",
    "rating",
    "use_weights",
    "created_at",
}
FEWSHOT_FIELDS = ("fewshot_dataset_id", "fewshot_count", "fewshot_order")
NO_ITEMS = dict.fromkeys(
    ["pending", "accepted", "rejected", "train", "validation", "test", "total"], 0
)


# What a curator of datasets is given: datasets and their items, and reading the conversations
# they are made of.
CURATOR = (
    "view_dataset", "add_dataset", "view_datasetitem", "add_datasetitem", "change_datasetitem",
    "view_session", "view_run",
)  # fmt: skip


@pytest.fixture
def as_staff(staff) -> Client:
    return api_client(grant(staff, *CURATOR))


@pytest.fixture
def as_alice(alice) -> Client:
    return api_client(alice)


@pytest.fixture
def dataset(as_staff) -> dict:
    response = send(as_staff, "POST", "/api/datasets", {"name": "support-good"})
    assert response.status_code == 201
    return response.json()


@pytest.fixture
def chat(alice, agent) -> Session:
    return Session.objects.create(user=alice, agent=agent, session_name="about tea")


def send(client: Client, method: str, path: str, body: dict | None = None, **headers: str):
    data = json.dumps(body) if body is not None else ""
    return client.generic(method, path, data, content_type="application/json", headers=headers)


def add(client: Client, dataset: dict, **body: object):
    return send(client, "POST", f"/api/datasets/{dataset['dataset_id']}/items", body)


def counts(client: Client, dataset: dict) -> dict:
    return client.get(f"/api/datasets/{dataset['dataset_id']}").json()["counts"]


# -- datasets ----------------------------------------------------------------------------------


def test_staff_create_a_dataset_and_read_it_back(as_staff, staff):
    body = {"name": "tea", "description": "Good answers", "validation_percent": 5,
            "test_percent": 15}  # fmt: skip
    response = send(as_staff, "POST", "/api/datasets", body)
    assert response.status_code == 201
    created = response.json()
    assert set(created) == DATASET_FIELDS
    assert created["counts"] == NO_ITEMS
    assert {k: created[k] for k in body} == body
    assert as_staff.get(f"/api/datasets/{created['dataset_id']}").json() == created
    assert Dataset.objects.get(name="tea").created_by == staff


def test_the_list_is_paged_sorted_and_counts_each_datasets_items(as_staff, chat):
    for name in ("b-set", "a-set", "c-set"):
        send(as_staff, "POST", "/api/datasets", {"name": name})
    b_set = as_staff.get("/api/datasets?sort_by=name").json()["data"][1]
    add(as_staff, b_set, run_id=str(stored_run(chat, "Tea?", "Yes.").run_id))
    body = as_staff.get("/api/datasets?limit=2&page=1").json()
    assert [d["name"] for d in body["data"]] == ["a-set", "b-set"]
    assert body["meta"] == {"page": 1, "limit": 2, "total_pages": 2, "total_count": 3}
    assert body["data"][0]["counts"]["total"] == 0 and body["data"][1]["counts"]["total"] == 1
    newest = as_staff.get("/api/datasets?sort_by=created_at&sort_order=desc").json()["data"]
    assert newest[0]["name"] == "c-set"
    assert as_staff.get("/api/datasets?limit=101").status_code == 422


def test_a_taken_name_conflicts(as_staff, dataset):
    response = send(as_staff, "POST", "/api/datasets", {"name": "support-good"})
    assert response.status_code == 409
    assert response.json() == {"detail": "A dataset named “support-good” already exists."}
    assert Dataset.objects.count() == 1


@pytest.mark.parametrize(
    "body",
    [
        {"name": "two words"},
        {"name": ""},
        {"name": "x" * 101},
        {"name": "ok", "validation_percent": 101},
        {"name": "ok", "validation_percent": 60, "test_percent": 0},
        {"name": "ok", "test_percent": -1},
        {"name": "ok", "test_percent": "10"},
        {"name": "ok", "size": 3},
        {"description": "no name"},
    ],
)
def test_bad_datasets_are_refused(as_staff, body):
    response = send(as_staff, "POST", "/api/datasets", body)
    assert response.status_code == 422
    assert "detail" in response.json()
    assert not Dataset.objects.exists()


def test_splits_take_at_most_half_each(as_staff):
    body = {"name": "ok", "validation_percent": 50, "test_percent": 51}
    response = send(as_staff, "POST", "/api/datasets", body)
    assert response.status_code == 422
    assert "less than or equal to 50" in json.dumps(response.json()["detail"])
    body["test_percent"] = 50
    assert send(as_staff, "POST", "/api/datasets", body).status_code == 201


def test_an_unknown_dataset_is_not_found(as_staff):
    response = as_staff.get(f"/api/datasets/{uuid.uuid4()}")
    assert response.status_code == 404 and response.json() == {"detail": "Not found."}
    assert as_staff.get(f"/api/datasets/{uuid.uuid4()}/items").status_code == 404


def test_signed_in_users_who_are_not_staff_are_forbidden(as_alice, dataset, chat):
    run = stored_run(chat, "Tea?", "Yes.")
    base = f"/api/datasets/{dataset['dataset_id']}"
    calls = [
        ("GET", "/api/datasets", None),
        ("POST", "/api/datasets", {"name": "mine"}),
        ("GET", base, None),
        ("GET", f"{base}/items", None),
        ("POST", f"{base}/items", {"run_id": str(run.run_id)}),
        ("GET", f"{base}/export?format=openai-chat", None),
        ("GET", f"{base}/card?format=csv", None),
    ]
    rights = ["view dataset", "add dataset", "view dataset", "view dataset item",
              "add dataset item", "view dataset", "view dataset"]  # fmt: skip
    for (method, path, body), right in zip(calls, rights, strict=True):
        response = send(as_alice, method, path, body)
        assert response.status_code == 403, path
        assert response.json() == {"detail": f"You need the “{right}” permission."}
    assert not DatasetItem.objects.exists() and Dataset.objects.count() == 1


def test_support_reads_datasets_their_items_and_exports_and_changes_nothing(
    support, as_staff, dataset, chat
):
    run = stored_run(chat, "Tea?", "Yes.")
    (item,) = add(as_staff, dataset, run_id=str(run.run_id)).json()["data"]
    client = api_client(support)  # the group "Support": every view permission
    base = f"/api/datasets/{dataset['dataset_id']}"
    for path in ("/api/datasets", base, f"{base}/items", f"{base}/card?format=csv"):
        assert client.get(path).status_code == 200, path
    assert len(read_lines(client.get(f"{base}/export?format=openai-chat"))) == 0
    refusals = [
        (send(client, "POST", "/api/datasets", {"name": "theirs"}), "add dataset"),
        (add(client, dataset, session_id=str(chat.session_id)), "add dataset item"),
        (send(client, "PATCH", f"{base}/items/{item['item_id']}", {"status": "accepted"}),
         "change dataset item"),
    ]  # fmt: skip
    for response, right in refusals:
        assert response.status_code == 403
        assert response.json() == {"detail": f"You need the “{right}” permission."}
    assert DatasetItem.objects.get().status == "pending" and Dataset.objects.count() == 1


@pytest.mark.parametrize(
    "codenames,answer",
    [
        ((), 403),
        (("view_dataset",), 403),
        (("view_datasetitem", "change_datasetitem"), 403),
        (("view_dataset", "view_datasetitem"), 200),
        (("change_dataset", "change_datasetitem"), 200),
    ],
)
def test_the_api_and_the_admin_download_a_dataset_for_the_same_staff(
    django_user_model, dataset, codenames, answer
):
    clerk = django_user_model.objects.create_user("clerk", password="x", is_staff=True)
    grant(clerk, "view_run", "view_llmcall", *codenames)
    browser = Client()
    browser.force_login(clerk)
    for kind in ("export", "card"):
        api = api_client(clerk).get(f"/api/datasets/{dataset['dataset_id']}/{kind}?format=csv")
        admin = browser.get(
            f"/admin/datasets_app/dataset/{dataset['dataset_id']}/{kind}/?format=csv"
        )
        assert (api.status_code, admin.status_code) == (answer, answer), kind


def test_anonymous_callers_must_authenticate(client, dataset):
    assert client.get("/api/datasets").status_code == 401
    assert client.get(f"/api/datasets/{dataset['dataset_id']}").status_code == 401
    assert send(client, "POST", "/api/datasets", {"name": "anon"}).status_code == 401


def test_a_browser_write_needs_the_csrf_token(staff):
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(grant(staff, "add_dataset"))
    browser.get("/tokens/")  # sets the CSRF cookie
    assert send(browser, "POST", "/api/datasets", {"name": "forged"}).status_code == 403
    token = browser.cookies["csrftoken"].value
    response = send(browser, "POST", "/api/datasets", {"name": "real"}, X_CSRFToken=token)
    assert response.status_code == 201
    assert list(Dataset.objects.values_list("name", flat=True)) == ["real"]


# -- items -------------------------------------------------------------------------------------


def test_a_run_is_added_as_a_snapshot_of_its_conversation(as_staff, dataset, chat, alice):
    stored_run(chat, "Is green tea hot?", "It is brewed at 80 °C.")
    run = stored_run(chat, "And black tea?", "Boiling water.")
    response = add(as_staff, dataset, run_id=str(run.run_id))
    assert response.status_code == 201
    (item,) = response.json()["data"]
    assert set(item) == ITEM_FIELDS
    assert item["source"] == "run" and item["status"] == "pending"
    assert item["run_id"] == str(run.run_id) and item["session_id"] == str(chat.session_id)
    assert item["dataset_id"] == dataset["dataset_id"]
    assert [(m["role"], m["content"]) for m in item["messages"]] == [
        ("user", "Is green tea hot?"),
        ("assistant", "It is brewed at 80 °C."),
        ("user", "And black tea?"),
        ("assistant", "Boiling water."),
    ]
    assert item["split"] in ("train", "validation", "test")
    assert counts(as_staff, dataset) == {**NO_ITEMS, "pending": 1, item["split"]: 1, "total": 1}


def test_status_and_split_can_be_chosen(as_staff, dataset, chat):
    run = stored_run(chat, "Tea?", "Yes.")
    response = add(as_staff, dataset, run_id=str(run.run_id), status="accepted", split="test")
    (item,) = response.json()["data"]
    assert (item["status"], item["split"]) == ("accepted", "test")
    assert counts(as_staff, dataset) == {**NO_ITEMS, "accepted": 1, "test": 1, "total": 1}


def test_the_same_run_twice_conflicts_with_a_clear_message(as_staff, dataset, chat):
    run = stored_run(chat, "Tea?", "Yes.")
    assert add(as_staff, dataset, run_id=str(run.run_id)).status_code == 201
    again = add(as_staff, dataset, run_id=str(run.run_id))
    assert again.status_code == 409
    assert again.json() == {"detail": f"Run {run.run_id} is already in the dataset “support-good”."}
    assert DatasetItem.objects.count() == 1


def test_a_run_without_an_answer_is_refused_with_the_reason(as_staff, dataset, chat):
    failed = stored_run(chat, "Tea?", "", status=RunStatus.ERROR)
    response = add(as_staff, dataset, run_id=str(failed.run_id))
    assert response.status_code == 422
    assert response.json() == {"detail": "Only completed runs can be added; this run is ERROR."}
    empty = stored_run(chat, "Coffee?", "")
    response = add(as_staff, dataset, run_id=str(empty.run_id))
    assert response.status_code == 422
    assert response.json() == {"detail": "This run has no final answer to learn from."}
    assert not DatasetItem.objects.exists()


def test_unknown_runs_and_sessions_are_not_found(as_staff, dataset):
    for body in ({"run_id": str(uuid.uuid4())}, {"session_id": str(uuid.uuid4())}):
        response = add(as_staff, dataset, **body)
        assert response.status_code == 404 and response.json() == {"detail": "Not found."}


@pytest.mark.parametrize("given", ["both", "neither", "null"])
def test_exactly_one_of_run_and_session_is_given(as_staff, dataset, chat, given):
    run = stored_run(chat, "Tea?", "Yes.")
    body = {
        "both": {"run_id": str(run.run_id), "session_id": str(chat.session_id)},
        "neither": {},
        "null": {"run_id": str(run.run_id), "session_id": None},
    }[given]
    response = add(as_staff, dataset, **body)
    assert response.status_code == 422
    if given != "null":
        assert "exactly one of run_id and session_id" in json.dumps(response.json()["detail"])
    assert not DatasetItem.objects.exists()


def test_a_session_is_added_whole_and_only_once(as_staff, dataset, chat):
    stored_run(chat, "Tea?", "Yes.")
    stored_run(chat, "Milk?", "", status=RunStatus.CANCELLED)
    stored_run(chat, "Sugar?", "No.")
    response = add(as_staff, dataset, session_id=str(chat.session_id))
    assert response.status_code == 201
    (item,) = response.json()["data"]
    assert item["source"] == "session" and item["run_id"] is None
    assert [m["content"] for m in item["messages"]] == ["Tea?", "Yes.", "Sugar?", "No."]
    again = add(as_staff, dataset, session_id=str(chat.session_id))
    assert again.status_code == 409
    assert "is already in the dataset" in again.json()["detail"]


def test_a_regenerated_answer_rated_oppositely_brings_its_pair(as_staff, dataset, chat):
    stored_run(chat, "Tea?", "Maybe.")
    worse = stored_run(chat, "Which tea for the evening?", "Espresso.")
    better = stored_run(chat, "Which tea for the evening?", "Rooibos: no caffeine.")
    worse.feedback_rating, better.feedback_rating = -1, 1
    worse.save()
    better.save()
    response = add(as_staff, dataset, run_id=str(better.run_id), status="accepted")
    assert response.status_code == 201
    item, pair = response.json()["data"]
    assert (item["source"], item["status"]) == ("run", "accepted")
    assert (pair["source"], pair["status"]) == ("pair", "pending")
    assert pair["run_id"] == str(better.run_id)
    assert pair["messages"][-1]["content"] == "Rooibos: no caffeine."
    assert pair["rejected_answer"] == "Espresso."
    # The losing run added on its own is a plain item: the pair is there already.
    (alone,) = add(as_staff, dataset, run_id=str(worse.run_id)).json()["data"]
    assert alone["source"] == "run" and alone["rating"] == -1


def rated(run, rating: int):
    run.feedback_rating = rating
    run.save(update_fields=["feedback_rating"])
    return run


def test_a_pair_that_cannot_be_made_leaves_the_run_added_on_its_own(as_staff, dataset, chat):
    worse = rated(stored_run(chat, "Which tea?", "Espresso."), -1)
    rated(stored_run(chat, "Which tea?", ""), 1)  # rated up, yet no answer to prefer
    response = add(as_staff, dataset, run_id=str(worse.run_id))
    assert response.status_code == 201
    assert [i["source"] for i in response.json()["data"]] == ["run"]
    again = add(as_staff, dataset, run_id=str(worse.run_id))
    assert again.status_code == 409
    assert DatasetItem.objects.count() == 1


def test_a_pair_rated_after_its_run_was_added_comes_with_either_side_added_again(
    as_staff, dataset, chat
):
    better = rated(stored_run(chat, "Which tea?", "Rooibos."), 1)
    worse = stored_run(chat, "Which tea?", "Espresso.")
    (alone,) = add(as_staff, dataset, run_id=str(better.run_id)).json()["data"]
    assert alone["source"] == "run"
    rated(worse, -1)
    response = add(as_staff, dataset, run_id=str(better.run_id))
    assert response.status_code == 201
    (pair,) = response.json()["data"]
    assert (pair["source"], pair["rejected_answer"]) == ("pair", "Espresso.")
    # Both are there now: the run itself is plain, and nothing is left to add for the other.
    assert add(as_staff, dataset, run_id=str(better.run_id)).status_code == 409
    (other,) = add(as_staff, dataset, run_id=str(worse.run_id)).json()["data"]
    assert other["source"] == "run"
    assert DatasetItem.objects.count() == 3


def test_a_session_item_dates_from_its_last_answered_run(as_staff, dataset, chat):
    day = datetime(2024, 3, 1, 12, tzinfo=UTC)
    stored_run(chat, "Tea?", "Yes.", at=day)
    stored_run(chat, "Milk?", "", status=RunStatus.ERROR, at=day + timedelta(days=40))
    added = add(as_staff, dataset, session_id=str(chat.session_id), status="accepted")
    assert added.status_code == 201
    card = as_staff.get(f"/api/datasets/{dataset['dataset_id']}/card?format=openai-chat")
    assert "Source conversations from 2024-03-01 to 2024-03-01." in card.content.decode()


def test_items_are_listed_with_filters(as_staff, dataset, chat):
    ids = {}
    for n, (status, split) in enumerate(
        [("accepted", "train"), ("accepted", "test"), ("rejected", "train"), ("pending", "train")]
    ):
        run = stored_run(chat, f"question {n}", f"answer {n}")
        item = add(as_staff, dataset, run_id=str(run.run_id), status=status, split=split)
        ids[n] = item.json()["data"][0]["item_id"]
    base = f"/api/datasets/{dataset['dataset_id']}/items"
    every = as_staff.get(base).json()
    assert [i["item_id"] for i in every["data"]] == [ids[0], ids[1], ids[2], ids[3]]
    assert every["meta"]["total_count"] == 4
    accepted = as_staff.get(f"{base}?status=accepted").json()["data"]
    assert [i["item_id"] for i in accepted] == [ids[0], ids[1]]
    train = as_staff.get(f"{base}?split=train&sort_order=desc").json()["data"]
    assert [i["item_id"] for i in train] == [ids[3], ids[2], ids[0]]
    assert as_staff.get(f"{base}?status=maybe").status_code == 422


def test_a_reviewer_accepts_corrects_and_moves_an_item(as_staff, dataset, chat):
    run = stored_run(chat, "Tea?", "Yes.")
    (item,) = add(as_staff, dataset, run_id=str(run.run_id)).json()["data"]
    path = f"/api/datasets/{dataset['dataset_id']}/items/{item['item_id']}"
    before = DatasetItem.objects.get(pk=item["item_id"]).content_hash
    body = {"status": "accepted", "split": "validation", "corrected_answer": "Yes, green."}
    response = send(as_staff, "PATCH", path, body)
    assert response.status_code == 200
    changed = response.json()
    assert {k: changed[k] for k in body} == body
    assert changed["messages"] == item["messages"]  # the snapshot itself is kept
    stored = DatasetItem.objects.get(pk=item["item_id"])
    assert stored.content_hash != before and stored.reviewed_at is not None
    assert counts(as_staff, dataset) == {**NO_ITEMS, "accepted": 1, "validation": 1, "total": 1}
    # Clearing the correction brings the original back, hash included.
    send(as_staff, "PATCH", path, {"corrected_answer": ""})
    assert DatasetItem.objects.get(pk=item["item_id"]).content_hash == before


@pytest.mark.parametrize(
    "body", [{"status": None}, {"status": "great"}, {"split": "dev"}, {"rating": 1}]
)
def test_bad_reviews_are_refused(as_staff, dataset, chat, body):
    run = stored_run(chat, "Tea?", "Yes.")
    (item,) = add(as_staff, dataset, run_id=str(run.run_id)).json()["data"]
    path = f"/api/datasets/{dataset['dataset_id']}/items/{item['item_id']}"
    assert send(as_staff, "PATCH", path, body).status_code == 422
    assert DatasetItem.objects.get(pk=item["item_id"]).status == "pending"


def test_an_item_of_another_dataset_is_not_found(as_staff, dataset, chat):
    other = send(as_staff, "POST", "/api/datasets", {"name": "other"}).json()
    run = stored_run(chat, "Tea?", "Yes.")
    (item,) = add(as_staff, other, run_id=str(run.run_id)).json()["data"]
    path = f"/api/datasets/{dataset['dataset_id']}/items/{item['item_id']}"
    assert send(as_staff, "PATCH", path, {"status": "accepted"}).status_code == 404


# -- export ------------------------------------------------------------------------------------


def read_lines(response) -> list[dict]:
    assert response.status_code == 200
    body = b"".join(response).decode()  # the sync client reads the stream whole
    return [json.loads(line) for line in body.splitlines() if line.strip()]


def test_the_export_holds_the_accepted_items_of_a_split(as_staff, dataset, chat):
    plan = [("accepted", "train"), ("accepted", "train"), ("accepted", "test"),
            ("pending", "train"), ("rejected", "train")]  # fmt: skip
    for n, (status, split) in enumerate(plan):
        run = stored_run(chat, f"question {n}", f"answer {n}")
        add(as_staff, dataset, run_id=str(run.run_id), status=status, split=split)
    base = f"/api/datasets/{dataset['dataset_id']}/export?format=openai-chat"
    train = read_lines(as_staff.get(f"{base}&split=train"))
    assert [line["messages"][-1]["content"] for line in train] == ["answer 0", "answer 1"]
    assert len(read_lines(as_staff.get(base))) == 3
    assert len(read_lines(as_staff.get(f"{base}&split=test"))) == 1


def test_an_empty_split_means_every_split(as_staff, dataset, chat):
    for n, split in enumerate(["train", "test"]):
        run = stored_run(chat, f"question {n}", f"answer {n}")
        add(as_staff, dataset, run_id=str(run.run_id), status="accepted", split=split)
    base = f"/api/datasets/{dataset['dataset_id']}"
    assert len(read_lines(as_staff.get(f"{base}/export?format=openai-chat&split="))) == 2
    response = as_staff.get(f"{base}/export?format=csv&split=")
    assert response.status_code == 200
    rows = csv.DictReader(io.StringIO(b"".join(response).decode()))
    assert len({row["item_id"] for row in rows}) == 2
    card = as_staff.get(f"{base}/card?format=csv&split=")
    assert card.status_code == 200
    assert "| Split | all |" in card.content.decode()


def test_a_corrected_answer_is_exported_in_place_of_the_original(as_staff, dataset, chat):
    run = stored_run(chat, "Tea?", "Yes.")
    (item,) = add(as_staff, dataset, run_id=str(run.run_id), status="accepted").json()["data"]
    path = f"/api/datasets/{dataset['dataset_id']}/items/{item['item_id']}"
    send(as_staff, "PATCH", path, {"corrected_answer": "Yes: green tea, 80 °C."})
    (line,) = read_lines(
        as_staff.get(f"/api/datasets/{dataset['dataset_id']}/export?format=openai-chat")
    )
    assert line["messages"][-1] == {"role": "assistant", "content": "Yes: green tea, 80 °C."}


def weights_exported(client: Client, dataset: dict) -> list[list]:
    response = client.get(f"/api/datasets/{dataset['dataset_id']}/export?format=openai-chat")
    return [
        [m.get("weight") for m in line["messages"] if m["role"] == "assistant"]
        for line in read_lines(response)
    ]


def test_training_on_turns_not_rated_down_is_chosen_when_adding_or_reviewing(
    as_staff, dataset, chat
):
    rated(stored_run(chat, "Tea?", "Coffee."), -1)
    rated(stored_run(chat, "Milk?", "No milk."), 1)
    (whole,) = add(
        as_staff, dataset, session_id=str(chat.session_id), status="accepted", use_weights=True
    ).json()["data"]
    assert whole["use_weights"] is True
    assert weights_exported(as_staff, dataset) == [[0, 1]]

    path = f"/api/datasets/{dataset['dataset_id']}/items/{whole['item_id']}"
    changed = send(as_staff, "PATCH", path, {"use_weights": False})
    assert changed.status_code == 200 and changed.json()["use_weights"] is False
    assert weights_exported(as_staff, dataset) == [[None, None]]
    for bad in (None, "yes", 1):
        assert send(as_staff, "PATCH", path, {"use_weights": bad}).status_code == 422
    run = stored_run(chat, "Sugar?", "None.")
    refused = add(as_staff, dataset, run_id=str(run.run_id), use_weights="yes")
    assert refused.status_code == 422
    (plain,) = add(as_staff, dataset, run_id=str(run.run_id)).json()["data"]
    assert plain["use_weights"] is False


def test_conversations_of_users_who_opted_out_are_left_out(as_staff, dataset, chat, bob, agent):
    stored_run(chat, "Alice's question", "Alice's answer")
    bobs = Session.objects.create(user=bob, agent=agent)
    stored_run(bobs, "Bob's question", "Bob's answer")
    bob.allow_training = False
    bob.save()
    for session in (chat, bobs):
        response = add(as_staff, dataset, session_id=str(session.session_id), status="accepted")
        assert response.status_code == 201  # collectable all the same
    lines = read_lines(
        as_staff.get(f"/api/datasets/{dataset['dataset_id']}/export?format=openai-chat")
    )
    assert [line["messages"][-1]["content"] for line in lines] == ["Alice's answer"]


def test_an_unknown_format_is_refused_with_the_valid_ones(as_staff, dataset):
    response = as_staff.get(f"/api/datasets/{dataset['dataset_id']}/export?format=parquet")
    assert response.status_code == 422
    detail = response.json()["detail"]
    assert "parquet" in detail
    for name in ("openai-chat", "openai-preference", "sharegpt", "hf-messages", "csv"):
        assert name in detail
    assert as_staff.get(f"/api/datasets/{dataset['dataset_id']}/export").status_code == 422


def test_the_card_is_markdown_naming_the_dataset(as_staff, dataset):
    response = as_staff.get(f"/api/datasets/{dataset['dataset_id']}/card?format=openai-chat")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/markdown")
    assert "support-good" in response.content.decode()
    assert as_staff.get(f"/api/datasets/{dataset['dataset_id']}/card").status_code == 422


# -- agents' few-shot settings -----------------------------------------------------------------


@pytest.fixture
def edits_agents(staff) -> None:
    grant(staff, "add_agent", "change_agent")


def test_an_agent_takes_its_examples_from_a_dataset(as_staff, dataset, agent, edits_agents):
    path = f"/api/agents/{agent.agent_id}"
    shown = as_staff.get(path).json()
    assert {k: shown[k] for k in FEWSHOT_FIELDS} == {
        "fewshot_dataset_id": None,
        "fewshot_count": 3,
        "fewshot_order": "newest",
    }
    body = {
        "fewshot_dataset_id": dataset["dataset_id"],
        "fewshot_count": 5,
        "fewshot_order": "best",
    }
    response = send(as_staff, "PATCH", path, body)
    assert response.status_code == 200
    assert {k: response.json()[k] for k in body} == body
    agent.refresh_from_db()
    assert str(agent.fewshot_dataset_id) == dataset["dataset_id"] and agent.fewshot_count == 5
    cleared = send(as_staff, "PATCH", path, {"fewshot_dataset_id": None}).json()
    assert cleared["fewshot_dataset_id"] is None and cleared["fewshot_count"] == 5


def test_a_new_agent_can_name_its_dataset(as_staff, dataset, edits_agents):
    body = {"name": "Tea expert", "fewshot_dataset_id": dataset["dataset_id"], "fewshot_count": 2}
    response = send(as_staff, "POST", "/api/agents", body)
    assert response.status_code == 201
    assert response.json()["fewshot_dataset_id"] == dataset["dataset_id"]
    assert Agent.objects.get(name="Tea expert").fewshot_count == 2


@pytest.mark.parametrize(
    "body",
    [
        {"fewshot_dataset_id": "tea"},
        {"fewshot_count": 21},
        {"fewshot_count": -1},
        {"fewshot_count": None},
        {"fewshot_order": "random"},
    ],
)
def test_bad_few_shot_settings_are_refused(as_staff, agent, body, edits_agents):
    response = send(as_staff, "PATCH", f"/api/agents/{agent.agent_id}", body)
    assert response.status_code == 422
    agent.refresh_from_db()
    assert agent.fewshot_dataset_id is None and agent.fewshot_count == 3


def test_an_unknown_dataset_is_not_found_like_any_missing_object(as_staff, agent, edits_agents):
    path = f"/api/agents/{agent.agent_id}"
    response = send(as_staff, "PATCH", path, {"fewshot_dataset_id": str(uuid.uuid4())})
    assert response.status_code == 404 and response.json() == {"detail": "Not found."}
    body = {"name": "Nowhere", "fewshot_dataset_id": str(uuid.uuid4())}
    assert send(as_staff, "POST", "/api/agents", body).status_code == 404
    agent.refresh_from_db()
    assert agent.fewshot_dataset_id is None and not Agent.objects.filter(name="Nowhere").exists()

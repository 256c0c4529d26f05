"""An item side by side as staff reach it from the report: named by the question its answers
answered, under one id from the report's link to the page's heading and the dataset's own
admin; and a candidate's answer sent to a dataset as the conversation the candidate saw."""

from __future__ import annotations

import re

import pytest

from datasets_app.models import DatasetItem, ItemStatus
from tests.evals import factories
from tests.evals.test_admin_experiments import ITEMS, compare, page, signed_in, text_of

pytestmark = pytest.mark.django_db


@pytest.fixture
def viewer(django_user_model):
    return signed_in(django_user_model, "viewer", "view_experiment", *ITEMS)


@pytest.fixture
def curator(django_user_model):
    return signed_in(django_user_model, "curator", "view_experiment", "add_datasetitem", *ITEMS)


@pytest.fixture
def done():
    _, baseline, draft = factories.two_versions()
    return factories.experiment(factories.dataset_with_items("qa", 3), baseline, draft)


def candidate_of(made, i: int):
    draft = made.versions.exclude(pk=made.baseline_id).get()
    return factories.trial_of(made, draft, i)


def test_a_worse_item_of_several_turns_is_named_by_the_question_its_answer_answered(viewer, done):
    trial = candidate_of(done, 0)
    item = trial.item
    item.messages = [
        item.messages[0],
        {"role": "user", "content": "Where shall we begin?"},
        {"role": "assistant", "content": "With geography."},
        *item.messages[1:],  # "Question 0?" and its reference answer
    ]
    item.save()

    shown = text_of(viewer.get(page(done)))

    worse = shown.split('data-testid="worse-items"')[1].split("</table>")[0]
    link = re.search(rf'<a href="{compare(done, trial)}"[^>]*>([^<]*)</a>', worse)
    assert link is not None and link.group(1) == "Question 0?"
    assert "Where shall we begin?" not in worse


def breadcrumbs(html: str) -> str:
    return html.split('<div class="breadcrumbs">')[1].split("</div>")[0]


def test_the_side_by_side_heading_is_the_question_with_the_items_id_under_it(viewer, done):
    trial = candidate_of(done, 0)
    shown = text_of(viewer.get(page(done)))
    link = re.search(rf'<a href="{compare(done, trial)}"[^>]*title="Item ([^"]+)"', shown)
    assert link is not None and link.group(1) == str(trial.item_uuid)

    side = text_of(viewer.get(compare(done, trial)))

    assert "<h1>Question 0?</h1>" in side
    assert "<title>Question 0? |" in side
    assert breadcrumbs(side).endswith("› Question 0?")
    assert str(trial.item_uuid) not in breadcrumbs(side) and "side by side" not in side
    # The id, a line under the heading, leads to the item in its dataset's admin.
    under = side.split("</h1>")[1].split('data-testid="item-id">')[1].split("</p>")[0]
    dataset_page = f"/admin/datasets_app/datasetitem/{trial.item_uuid}/change/"
    assert f'<a href="{dataset_page}" data-testid="dataset-item"' in under
    assert f">{trial.item_uuid}</a>" in under
    assert viewer.get(dataset_page).status_code == 200  # the same id is the item's there


def test_a_long_question_titles_the_page_cut_short_and_escaped(viewer, done):
    trial = candidate_of(done, 1)
    item = trial.item
    asked = "<b>Bold</b> & " + "very " * 20 + "long?"
    item.messages = [item.messages[0], {"role": "user", "content": asked}, item.messages[2]]
    item.save()

    side = text_of(viewer.get(compare(done, trial)))

    heading = side.split("<h1>")[1].split("</h1>")[0]
    assert heading.startswith("&lt;b&gt;Bold&lt;/b&gt; &amp; very very") and heading.endswith("…")
    assert len(heading.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")) == 60
    assert "<b>Bold</b>" not in side.split('id="content-main"')[0]


def test_an_item_deleted_since_is_titled_by_the_question_its_answers_were_sent(viewer, done):
    trial = candidate_of(done, 2)
    trial.sent_messages = [
        {"role": "system", "content": "Be thorough."},
        {"role": "user", "content": "Question 2?"},
    ]
    trial.save()
    trial.item.delete()

    side = text_of(viewer.get(compare(done, trial)))

    assert "<h1>Question 2?</h1>" in side
    under = side.split('data-testid="item-id">')[1].split("</p>")[0]
    assert f"{trial.item_uuid} <span" in under and "deleted from its dataset" in under
    assert 'data-testid="dataset-item"' not in side


def test_an_answer_is_sent_with_the_system_message_the_candidate_was_sent(curator, done):
    trial = candidate_of(done, 0)
    trial.sent_messages = [
        {"role": "system", "content": "Be thorough."},
        {"role": "user", "content": "Example question?", "name": "example_user"},
        {"role": "assistant", "content": "Example answer.", "name": "example_assistant"},
        {"role": "user", "content": "Question 0?"},
    ]
    trial.save()

    sent = curator.post(compare(done, trial) + "send/", {"dataset": done.dataset.pk}, follow=True)

    assert "pending review" in text_of(sent)
    item = DatasetItem.objects.get(status=ItemStatus.PENDING)
    assert item.messages == [
        {"role": "system", "content": "Be thorough."},  # not the item's "You answer questions."
        {"role": "user", "content": "Question 0?"},
        {"role": "assistant", "content": "Something else 0."},
    ]
    # The item it was replayed from keeps its own conversation.
    trial.item.refresh_from_db()
    assert trial.item.messages[0]["content"] == "You answer questions."

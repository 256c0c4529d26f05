"""Staff start, watch and read experiments in the admin: the list, the form that starts one, the
page with its progress, report, charts and downloads, the items side by side, and an answer
sent to a dataset for review; each only with the experiments' permissions."""

from __future__ import annotations

import csv
import io
import json
import re

import pytest
from django.test import Client

from datasets_app.models import DatasetItem, ItemStatus
from evals_app.models import Experiment, ExperimentStatus, Score, TrialStatus
from tests.evals import factories
from tests.support.roles import grant

pytestmark = pytest.mark.django_db

LIST = "/admin/evals_app/experiment/"
ITEMS = ("view_dataset", "view_datasetitem")  # to read the items' words
ADD = LIST + "add/"


def page(experiment: Experiment, rest: str = "change/") -> str:
    return f"{LIST}{experiment.pk}/{rest}"


def compare(experiment: Experiment, trial) -> str:
    return page(experiment, f"items/{trial.pk}/")


def signed_in(django_user_model, name: str, *codenames: str) -> Client:
    user = django_user_model.objects.create_user(name, password="x", is_staff=True)
    grant(user, *codenames)
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def viewer(django_user_model) -> Client:
    return signed_in(django_user_model, "viewer", "view_experiment", *ITEMS)


@pytest.fixture
def operator(django_user_model) -> Client:
    return signed_in(django_user_model, "operator", "view_experiment", "change_experiment", *ITEMS)


@pytest.fixture
def outsider(django_user_model) -> Client:
    """Staff who may read runs and datasets, and nothing of experiments."""
    return signed_in(django_user_model, "outsider", "view_run", "view_dataset")


@pytest.fixture
def versions():
    return factories.two_versions()


@pytest.fixture
def qa():
    return factories.dataset_with_items("qa", 3)


@pytest.fixture
def done(qa, versions, superuser) -> Experiment:
    _, baseline, draft = versions
    return factories.experiment(qa, baseline, draft, name="Brevity", created_by=superuser)


def text_of(response) -> str:
    return response.content.decode()


def test_the_list_shows_each_experiment_with_its_versions_status_and_progress(
    viewer, done, versions
):
    _, baseline, draft = versions
    running = factories.experiment(done.dataset, baseline, draft, status=ExperimentStatus.RUNNING)
    running.trials.filter(version=draft).update(status=TrialStatus.PENDING)

    listed = text_of(viewer.get(LIST))
    assert "Brevity" in listed and "qa" in listed and "root" in listed
    assert "Assistant v1 (baseline), Assistant v2 (draft)" in listed
    assert "6 / 6" in listed and "3 / 6" in listed

    only_running = text_of(viewer.get(LIST, {"status__exact": "running"}))
    assert "3 / 6" in only_running and "Brevity" not in only_running
    assert "Start an experiment" not in listed  # viewing is not adding


def test_items_words_are_shown_only_to_staff_who_may_read_the_dataset(
    django_user_model, done, versions
):
    reader = signed_in(django_user_model, "numbers", "view_experiment", "rate_experiment")
    _, _, draft = versions
    trial = factories.trial_of(done, draft, 0)
    shown = text_of(reader.get(page(done)))
    assert "Question 0?" not in shown and f"item {trial.item_uuid}" in shown
    assert compare(done, trial) not in shown
    assert reader.get(compare(done, trial)).status_code == 403
    assert reader.get(page(done, "rate/")).status_code == 403
    assert reader.get(ADD).status_code == 403

    grant(django_user_model.objects.get(username="numbers"), "view_dataset", "view_datasetitem")
    assert "Question 0?" in text_of(reader.get(page(done)))
    assert reader.get(compare(done, trial)).status_code == 200


def test_staff_without_the_view_permission_are_refused_every_page(outsider, done, versions):
    _, _, draft = versions
    trial = factories.trial_of(done, draft, 0)
    pages = [LIST, ADD, page(done), page(done, "progress/"), page(done, "report.csv"),
             page(done, "report.json"), page(done, "rate/"), compare(done, trial)]  # fmt: skip
    assert [outsider.get(url).status_code for url in pages] == [403] * len(pages)
    assert outsider.post(page(done, "cancel/")).status_code == 403


def test_the_page_shows_what_it_compares_the_report_and_a_chart_per_scorer(viewer, done):
    response = viewer.get(page(done))

    assert response.status_code == 200
    shown = text_of(response)
    assert "Assistant v1 <strong>(baseline)</strong>" in shown and "Assistant v2 (draft)" in shown
    assert 'data-testid="report-scorer" data-scorer="exact"' in shown
    assert '<canvas data-chart="exact"' in shown
    charts = json.loads(shown.split('id="experiment-charts" type="application/json">')[1]
                        .split("</script>")[0])  # fmt: skip
    assert charts["exact"]["labels"] == ["Assistant v1", "Assistant v2 (draft)"]
    # Finished, and only viewed: no polling, no cancel, no rating, no rescoring.
    assert "hx-trigger" not in shown and "cancel-experiment" not in shown
    assert "rate-link" not in shown and "rescore" not in shown
    assert page(done, "report.csv") in shown and page(done, "report.json") in shown


def test_a_running_experiment_is_polled_until_it_ends_then_shown_again_whole(viewer, done):
    Experiment.objects.filter(pk=done.pk).update(status=ExperimentStatus.RUNNING)
    done.trials.filter(version=done.baseline).update(status=TrialStatus.PENDING)

    shown = text_of(viewer.get(page(done)))
    assert f'hx-get="{page(done, "progress/")}" hx-trigger="every 2s"' in shown
    fragment = viewer.get(page(done, "progress/"), headers={"HX-Request": "true"})
    assert "3 of 6" in text_of(fragment) and "hx-trigger" in text_of(fragment)

    Experiment.objects.filter(pk=done.pk).update(status=ExperimentStatus.COMPLETED)
    ended = viewer.get(page(done, "progress/"), headers={"HX-Request": "true"})
    assert ended["HX-Refresh"] == "true"
    assert "hx-trigger" not in text_of(viewer.get(page(done)))


def test_the_form_starts_an_experiment_with_the_chosen_versions_and_scorers(
    django_user_model, qa, versions
):
    starter = signed_in(
        django_user_model, "starter", "add_experiment", "view_experiment", *ITEMS, "view_agent"
    )
    _, baseline, draft = versions
    form = starter.get(ADD)
    assert "Assistant v2 (draft)" in text_of(form)

    response = starter.post(ADD, {
        "name": "Thorough?", "dataset": qa.pk, "split": "", "versions": [baseline.pk, draft.pk],
        "baseline": baseline.pk, "repeats": 2, "scorers": ["exact", "regex"],
        "pattern": "Answer", "scale_low": 1, "scale_high": 5, "concurrency": 4,
    })  # fmt: skip

    made = Experiment.objects.get()
    assert response.status_code == 302 and response["Location"] == page(made)
    assert made.name == "Thorough?" and made.baseline == baseline and made.repeats == 2
    assert set(made.versions.all()) == {baseline, draft}
    assert made.scorers == [{"name": "exact"}, {"name": "regex", "pattern": "Answer"}]
    assert made.created_by.username == "starter" and made.concurrency == 4
    assert made.trials.count() == 3 * 2 * 2


def test_what_the_experiment_cannot_be_shows_on_the_form(django_user_model, qa, versions):
    starter = signed_in(
        django_user_model, "starter", "add_experiment", "view_experiment", *ITEMS, "view_agent"
    )
    _, baseline, _ = versions

    response = starter.post(ADD, {
        "dataset": qa.pk, "versions": [baseline.pk], "baseline": baseline.pk, "repeats": 1,
        "scorers": ["exact"], "scale_low": 1, "scale_high": 5,
    })  # fmt: skip

    assert response.status_code == 200
    row = text_of(response).split('class="form-row field-versions errors"')[1].split("</select>")[0]
    assert "An experiment compares at least two versions." in row
    assert not Experiment.objects.exists()


def test_staff_who_may_change_experiments_cancel_a_running_one(operator, viewer, done):
    Experiment.objects.filter(pk=done.pk).update(status=ExperimentStatus.RUNNING)
    assert "cancel-experiment" not in text_of(viewer.get(page(done)))
    assert viewer.post(page(done, "cancel/")).status_code == 403
    assert "cancel-experiment" in text_of(operator.get(page(done)))

    response = operator.post(page(done, "cancel/"))

    assert response.status_code == 302 and response["Location"] == page(done)
    done.refresh_from_db()
    assert done.cancel_requested or done.status == ExperimentStatus.CANCELLED


def test_the_report_downloads_as_csv_and_json_attachments(viewer, done):
    as_csv = viewer.get(page(done, "report.csv"))
    as_json = viewer.get(page(done, "report.json"))

    short = str(done.pk)[:8]
    assert as_csv["Content-Type"].startswith("text/csv")
    assert as_csv["Content-Disposition"] == f'attachment; filename="experiment-{short}.csv"'
    assert len(list(csv.reader(io.StringIO(text_of(as_csv))))) > 1
    assert as_json["Content-Disposition"] == f'attachment; filename="experiment-{short}.json"'
    assert isinstance(json.loads(as_json.content), dict)


def test_scoring_again_adds_the_scorer_and_keeps_the_answers(operator, viewer, done):
    answers = sorted(done.trials.values_list("pk", "content"))
    assert viewer.post(page(done, "rescore/"), {"scorers": ["json_valid"]}).status_code == 403

    response = operator.post(
        page(done, "rescore/"), {"scorers": ["json_valid"], "scale_low": 1, "scale_high": 5}
    )

    assert response.status_code == 302
    done.refresh_from_db()
    assert {"name": "json_valid"} in done.scorers
    assert sorted(done.trials.values_list("pk", "content")) == answers


def test_the_items_a_candidate_did_worse_on_open_side_by_side(viewer, done, versions):
    _, _, draft = versions
    shown = text_of(viewer.get(page(done)))
    # The candidate missed the reference on items 0 and 2.
    assert compare(done, factories.trial_of(done, draft, 0)) in shown
    assert compare(done, factories.trial_of(done, draft, 2)) in shown
    assert compare(done, factories.trial_of(done, draft, 1)) not in shown


def test_side_by_side_shows_the_input_reference_both_answers_and_every_score(
    viewer, done, versions
):
    _, _, draft = versions
    shown = text_of(viewer.get(compare(done, factories.trial_of(done, draft, 0))))

    assert "Question 0?" in shown and "You answer questions." not in shown  # no system message
    assert shown.count("Answer 0.") == 2  # the reference and the baseline's
    assert "Something else 0." in shown
    assert "exact says 1.0" in shown and "exact says 0.0" in shown
    assert "Assistant v1" in shown and "Assistant v2 (draft)" in shown
    assert "Duration" in shown and "$0.0001" in shown


def test_side_by_side_renders_markdown_and_never_the_answers_html(viewer, qa, versions):
    _, baseline, draft = versions

    def hostile(role: str, i: int, repeat: int) -> str:
        return '<script>alert("x")</script> **bold** <img src=x onerror=alert(1)>'

    made = factories.experiment(qa, baseline, draft, answer=hostile)
    shown = text_of(viewer.get(compare(made, factories.trial_of(made, draft, 0))))

    assert "<script>alert" not in shown and "<img src=x" not in shown
    assert "&lt;script&gt;alert" in shown and "<strong>bold</strong>" in shown


def test_the_candidates_answer_is_sent_to_a_dataset_as_a_pending_item(
    django_user_model, done, versions
):
    curator = signed_in(django_user_model, "curator", "view_experiment", "add_datasetitem", *ITEMS)
    _, _, draft = versions
    trial = factories.trial_of(done, draft, 0)
    before = DatasetItem.objects.count()
    assert "send-to-dataset" in text_of(curator.get(compare(done, trial)))

    sent = curator.post(compare(done, trial) + "send/", {"dataset": done.dataset.pk}, follow=True)

    item = DatasetItem.objects.exclude(status=ItemStatus.ACCEPTED).get()
    assert DatasetItem.objects.count() == before + 1
    assert item.status == ItemStatus.PENDING and item.dataset == done.dataset
    assert item.get_source_display() == "an experiment's answer"
    assert [m["content"] for m in item.messages] == [
        "You answer questions.", "Question 0?", "Something else 0."
    ]  # fmt: skip
    assert item.added_by.username == "curator"
    assert "pending review" in text_of(sent)

    again = curator.post(compare(done, trial) + "send/", {"dataset": done.dataset.pk}, follow=True)
    assert "already in the dataset" in text_of(again)
    assert DatasetItem.objects.count() == before + 1


def test_staff_who_may_not_add_items_get_no_button_and_are_refused(viewer, done, versions):
    _, _, draft = versions
    trial = factories.trial_of(done, draft, 0)
    assert "send-to-dataset" not in text_of(viewer.get(compare(done, trial)))
    assert (
        viewer.post(compare(done, trial) + "send/", {"dataset": done.dataset.pk}).status_code == 403
    )
    assert not DatasetItem.objects.filter(status=ItemStatus.PENDING).exists()


def test_a_running_experiment_cannot_be_deleted(django_user_model, done):
    deleter = signed_in(django_user_model, "deleter", "view_experiment", "delete_experiment")
    Experiment.objects.filter(pk=done.pk).update(status=ExperimentStatus.RUNNING)
    assert deleter.get(page(done, "delete/")).status_code == 403

    Experiment.objects.filter(pk=done.pk).update(status=ExperimentStatus.CANCELLED)
    confirm = deleter.get(page(done, "delete/"))
    assert confirm.status_code == 200 and "Answers: 6" in text_of(confirm)


def test_the_report_shows_each_versions_figures_from_the_scores(viewer, done):
    response = viewer.get(page(done))

    rows = text_of(response).split('data-scorer="exact"')[1].split("</table>")[0]
    baseline, candidate = rows.split("<tbody>")[1].split("</tr>")[:2]
    assert "Assistant v1" in baseline and "<td>1</td>" in baseline  # every item right
    assert "Assistant v2 (draft)" in candidate
    assert "<td>0.333</td>" in candidate  # one item of three
    assert "<td>-0.667</td>" in candidate and "<td>0 / 1 / 2</td>" in candidate
    versions = text_of(response).split('data-testid="report-versions"')[1].split("</table>")[0]
    assert versions.count('data-testid="version-answers">3 of 3</td>') == 2  # all three came


def test_an_answer_to_a_whole_sessions_item_joins_the_dataset_that_holds_the_session(
    django_user_model, done, versions, alice
):
    curator = signed_in(django_user_model, "curator", "view_experiment", "add_datasetitem", *ITEMS)
    _, _, draft = versions
    trial = factories.trial_of(done, draft, 0)
    DatasetItem.objects.filter(pk=trial.item_uuid).update(
        source="session", source_session_id="talk-1", owner=alice
    )

    curator.post(compare(done, trial) + "send/", {"dataset": done.dataset.pk})

    item = DatasetItem.objects.get(status=ItemStatus.PENDING)
    assert item.source == "session" and item.owner == alice
    assert item.messages[-1] == {"role": "assistant", "content": "Something else 0."}


def test_side_by_side_shows_each_order_of_a_pairwise_verdict_and_what_the_judge_was_asked(
    viewer, done, versions
):
    _, _, draft = versions
    trial = factories.trial_of(done, draft, 0)
    orders = [
        {"first": "baseline", "choice": "A", "winner": "baseline", "reason": "<script>x</script>"},
        {"first": "candidate", "choice": "A", "winner": "candidate", "reason": "Shorter."},
    ]
    asked = [[{"role": "user", "content": f"Which is better? ({n})"}] for n in (1, 2)]
    Score.objects.create(
        trial=trial, scorer="pairwise", value=0.5, reason="The two orders disagreed.",
        details={"orders": orders}, judge_prompt=asked,
    )  # fmt: skip

    shown = text_of(viewer.get(compare(done, trial)))

    assert "baseline's answer shown first: baseline preferred: &lt;script&gt;x" in shown
    assert "candidate's answer shown first: candidate preferred: Shorter." in shown
    assert "<script>x" not in shown
    assert "Which is better? (1)" in shown and "Which is better? (2)" in shown


def test_an_items_tool_round_before_its_answer_is_neither_shown_as_input_nor_sent_on(
    django_user_model, done, versions
):
    _, _, draft = versions
    trial = factories.trial_of(done, draft, 0)
    call = {"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}
    messages = [
        *trial.item.messages[:2],
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "TOOL RESULT"},
        trial.item.messages[2],
    ]
    DatasetItem.objects.filter(pk=trial.item_uuid).update(messages=messages)
    curator = signed_in(django_user_model, "curator", "view_experiment", "add_datasetitem", *ITEMS)

    shown = text_of(curator.get(compare(done, trial)))
    assert "Question 0?" in shown and "TOOL RESULT" not in shown
    curator.post(compare(done, trial) + "send/", {"dataset": done.dataset.pk})

    sent = DatasetItem.objects.get(status=ItemStatus.PENDING)
    assert [m["role"] for m in sent.messages] == ["system", "user", "assistant"]
    assert sent.messages[-1]["content"] == "Something else 0."


def test_a_cancelled_experiment_goes_on_from_its_page(operator, done):
    Experiment.objects.filter(pk=done.pk).update(status=ExperimentStatus.CANCELLED)
    assert "resume-experiment" in text_of(operator.get(page(done)))

    assert operator.post(page(done, "resume/")).status_code == 302

    done.refresh_from_db()
    assert done.status == ExperimentStatus.QUEUED
    assert "resume-experiment" not in text_of(operator.get(page(done)))


def test_the_status_filter_names_every_status_alike(viewer, done):
    listed = text_of(viewer.get(LIST))

    choices = re.findall(r'<a href="\?status__exact=\w+"[^>]*>([^<]+)</a>', listed)
    assert choices == ["Queued", "Running", "Completed", "Cancelled", "Stopped at its budget",
                       "Failed"]  # fmt: skip

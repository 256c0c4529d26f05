"""Each version's answers in the report: those received of those planned, read alike on the
experiment's page, in the API's JSON and CSV, the page's downloads and the text `evaluate`
prints; an experiment cancelled before any answer came says 0 of them."""

from __future__ import annotations

import csv
import io
import re

import pytest

from evals_app.models import Experiment, ExperimentStatus, Score, TrialStatus
from evals_app.report import build_report
from tests.evals import factories
from tests.evals.test_admin_experiments import ITEMS, page, signed_in, text_of
from tests.support.apiclient import api_client
from tests.support.roles import grant

pytestmark = pytest.mark.django_db


@pytest.fixture
def viewer(django_user_model):
    return signed_in(django_user_model, "viewer", "view_experiment", *ITEMS)


@pytest.fixture
def api(django_user_model):
    user = django_user_model.objects.create_user("reader", password="x", is_staff=True)
    return api_client(grant(user, "view_experiment"))


def planned(status: str = ExperimentStatus.CANCELLED) -> Experiment:
    """Three items by two versions, every trial planned and none answered."""
    _, baseline, draft = factories.two_versions()
    made = factories.experiment(factories.dataset_with_items("qa", 3), baseline, draft,
                                name="Unanswered", status=status)  # fmt: skip
    Score.objects.filter(trial__experiment=made).delete()
    made.trials.update(status=TrialStatus.PENDING, content="", total_tokens=0, cost=None)
    return made


def answers_on_page(client, made: Experiment) -> dict[str, str]:
    """The report table's answers cell by version."""
    table = text_of(client.get(page(made))).split('data-testid="report-versions"')[1]
    table = table.split("</table>")[0]
    rows = re.findall(r'<th scope="row">([^<]+).*?data-testid="version-answers">([^<]*)<', table)
    return {version.strip(): answers for version, answers in rows}


def csv_rows(body: str) -> dict[str, dict[str, str]]:
    return {row["version"]: row for row in csv.DictReader(io.StringIO(body))}


def test_a_cancelled_experiment_with_no_answer_says_none_of_those_planned_came(viewer, api):
    made = planned()

    assert answers_on_page(viewer, made) == {
        "Assistant v1": "0 of 3",
        "Assistant v2 (draft)": "0 of 3",
    }
    as_json = api.get(f"/api/experiments/{made.pk}/report").json()
    assert [(v["trials"], v["completed"], v["errors"]) for v in as_json["versions"]] == [
        (3, 0, 0),
        (3, 0, 0),
    ]
    for body in (
        api.get(f"/api/experiments/{made.pk}/report", {"format": "csv"}).content.decode(),
        viewer.get(page(made, "report.csv")).content.decode(),
    ):
        rows = csv_rows(body).values()
        assert [(r["trials"], r["completed"], r["trial_errors"]) for r in rows] == [
            ("3", "0", "0")
        ] * 2
    downloaded = viewer.get(page(made, "report.json")).json()
    assert [v["completed"] for v in downloaded["versions"]] == [0, 0]
    text = build_report(made).to_text()
    assert re.search(r"Assistant v1 \(baseline\)\s+0 of 3\s+0 ", text), text


def test_a_version_midway_counts_what_came_and_its_failures_apart(viewer, api):
    made = planned(ExperimentStatus.RUNNING)
    draft = made.versions.exclude(pk=made.baseline_id).get()
    made.trials.filter(version_id=made.baseline_id).update(status=TrialStatus.COMPLETED)
    answered, failed = factories.trial_of(made, draft, 0), factories.trial_of(made, draft, 1)
    made.trials.filter(pk=answered.pk).update(status=TrialStatus.COMPLETED)
    made.trials.filter(pk=failed.pk).update(status=TrialStatus.ERROR, error="502")

    assert answers_on_page(viewer, made) == {
        "Assistant v1": "3 of 3",
        "Assistant v2 (draft)": "1 of 3",
    }
    as_json = api.get(f"/api/experiments/{made.pk}/report").json()
    assert [(v["trials"], v["completed"], v["errors"]) for v in as_json["versions"]] == [
        (3, 3, 0),
        (3, 1, 1),
    ]
    rows = csv_rows(
        api.get(f"/api/experiments/{made.pk}/report", {"format": "csv"}).content.decode()
    )
    assert (
        rows["Assistant v2 draft"]["completed"],
        rows["Assistant v2 draft"]["trial_errors"],
    ) == ("1", "1")
    text = build_report(made).to_text()
    assert re.search(r"Assistant v2 draft\s+1 of 3\s+1 ", text), text

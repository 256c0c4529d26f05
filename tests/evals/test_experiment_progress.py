"""An experiment's progress as its page and the API show it while it runs: answers, then the
scores written of those called for, per scorer, counted without reading a row."""

from __future__ import annotations

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from evals_app.experiments import progress
from evals_app.models import Experiment, ExperimentStatus, Score
from evals_app.scorers import spec_key
from tests.evals import factories
from tests.evals.test_admin_experiments import ITEMS, page, signed_in, text_of

pytestmark = pytest.mark.django_db

JUDGE = {"name": "judge", "rubric": "Right?"}


@pytest.fixture
def viewer(django_user_model):
    return signed_in(django_user_model, "viewer", "view_experiment", *ITEMS)


@pytest.fixture
def answered() -> Experiment:
    """Running, every answer in (3 items, 2 versions), scored so far by exact match only: the
    judge and the pairwise judge have yet to score."""
    _, baseline, draft = factories.two_versions()
    made = factories.experiment(
        factories.dataset_with_items("qa", 3), baseline, draft, status=ExperimentStatus.RUNNING
    )
    made.scorers = [{"name": "exact"}, JUDGE, {"name": "pairwise"}]
    made.save()
    return made


def box(client, made: Experiment) -> str:
    shown = text_of(client.get(page(made, "progress/"), headers={"HX-Request": "true"}))
    return re.sub(r"\s+", " ", shown)


def test_once_answered_the_page_says_scoring_goes_on_and_how_far(viewer, answered):
    shown = box(viewer, answered)

    assert "6 of 6</span> answers (100 %)" in shown
    # Exact match 6 of 6; the judge 0 of 6; the pairwise judge 0 of the candidate's 3.
    assert '<span data-testid="scoring-count">Scoring: 6 of 15</span> scores' in shown
    assert "scoring the answers…" in shown
    assert '<span title="exact">Exact match</span>: 6 of 6' in shown
    assert f'<span title="{spec_key(JUDGE)}">Judge (rubric: “Right?”)</span>: 0 of 6' in shown
    assert '<span title="pairwise">Pairwise judge</span>: 0 of 3' in shown
    assert 'hx-trigger="every 2s"' in shown  # still polled


def test_the_scores_written_since_show_at_the_next_poll(viewer, answered):
    draft = answered.versions.exclude(pk=answered.baseline_id).get()
    for i in range(3):
        Score.objects.create(trial=factories.trial_of(answered, draft, i), scorer="pairwise",
                             value=1.0)  # fmt: skip

    shown = box(viewer, answered)

    assert "Scoring: 9 of 15" in shown and "Pairwise judge</span>: 3 of 3" in shown


def test_a_finished_experiment_shows_its_scores_whole_and_no_work_going_on(viewer, answered):
    Experiment.objects.filter(pk=answered.pk).update(
        status=ExperimentStatus.COMPLETED, scorers=[{"name": "exact"}]
    )

    shown = re.sub(r"\s+", " ", text_of(viewer.get(page(answered))))

    assert "Scoring: 6 of 6" in shown and "scoring the answers" not in shown


def test_progress_is_counted_in_a_few_queries_reading_no_answer(answered):
    with CaptureQueriesContext(connection) as queries:
        now = progress(answered)

    assert (now["done"], now["scores_done"], now["scores_total"]) == (6, 6, 15)
    assert now["scoring"] == [
        {"scorer": "exact", "done": 6, "total": 6},
        {"scorer": spec_key(JUDGE), "done": 0, "total": 6},
        {"scorer": "pairwise", "done": 0, "total": 3},
    ]
    assert len(queries.captured_queries) <= 3
    assert not any('"content"' in q["sql"] for q in queries.captured_queries)

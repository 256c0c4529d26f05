"""Moving around an experiment's pages: cancelling asks first, on a page of its own that needs
no script; the blind rating page has the admin's breadcrumb and a way back, without naming the
experiment (its name may name the versions)."""

from __future__ import annotations

import pytest

from evals_app.models import Experiment, ExperimentStatus
from tests.evals import factories
from tests.evals.test_admin_experiments import ITEMS, page, signed_in, text_of

pytestmark = pytest.mark.django_db


@pytest.fixture
def running() -> Experiment:
    _, baseline, draft = factories.two_versions()
    made = factories.experiment(
        factories.dataset_with_items("qa", 3), baseline, draft, name="Assistant v2 against v1",
        status=ExperimentStatus.RUNNING,
    )  # fmt: skip
    return made


@pytest.fixture
def operator(django_user_model):
    return signed_in(django_user_model, "operator", "view_experiment", "change_experiment", *ITEMS)


def test_cancel_asks_first_and_cancels_only_when_confirmed(operator, running):
    shown = text_of(operator.get(page(running)))
    button = f'<a href="{page(running, "cancel/")}" class="button" data-testid="cancel-experiment">'
    assert button in shown  # a link to the question, not a form that cancels at once

    asked = operator.get(page(running, "cancel/"))

    assert asked.status_code == 200
    question = text_of(asked)
    assert "Cancel “Assistant v2 against v1”?" in question and "6 of 6 answers are in" in question
    assert 'name="csrfmiddlewaretoken"' in question and 'method="post"' in question
    assert f'href="{page(running)}" class="button cancel-link"' in question  # no, let it run
    running.refresh_from_db()
    assert not running.cancel_requested and running.status == ExperimentStatus.RUNNING

    confirmed = operator.post(page(running, "cancel/"))

    assert confirmed.status_code == 302 and confirmed["Location"] == page(running)
    running.refresh_from_db()
    assert running.cancel_requested


def test_the_question_is_only_for_staff_who_may_cancel_and_only_while_it_runs(
    django_user_model, operator, running
):
    viewer = signed_in(django_user_model, "viewer", "view_experiment", *ITEMS)
    assert viewer.get(page(running, "cancel/")).status_code == 403

    Experiment.objects.filter(pk=running.pk).update(status=ExperimentStatus.COMPLETED)
    ended = operator.get(page(running, "cancel/"), follow=True)
    assert ended.redirect_chain == [(page(running), 302)]
    assert "The experiment had already ended (completed)." in text_of(ended)


def test_the_rating_page_has_a_breadcrumb_and_a_way_back_naming_no_experiment(
    django_user_model, running
):
    rater = signed_in(django_user_model, "rater", "view_experiment", "rate_experiment", *ITEMS)

    shown = text_of(rater.get(page(running, "rate/")))

    crumbs = shown.split('<div class="breadcrumbs">')[1].split("</div>")[0]
    assert '<a href="/admin/">Home</a>' in crumbs
    assert '<a href="/admin/evals_app/experiment/">Experiments</a>' in crumbs
    # Its short id tells it from other experiments without naming what it compares.
    short = f"Experiment {str(running.pk)[:8]}"
    assert f'<a href="{page(running)}" data-testid="experiment-crumb">{short}</a>' in crumbs
    assert crumbs.endswith("› Rate answers")
    assert f'<a href="{page(running)}" data-testid="back-to-experiment">' in shown
    assert "Assistant v2 against v1" not in shown

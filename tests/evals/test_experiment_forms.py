"""The forms that start an experiment and score one again, as staff fill them in: each error by
its field, the judge's options asked for only with the judge, a judge chosen for a rescore, and
a concurrency fit for the model that answers."""

from __future__ import annotations

import re

import pytest
from django.test import Client

from evals_app.models import Experiment, Score
from sessions_app.models import Agent
from tests.evals import factories
from tests.evals.test_admin_experiments import ADD, ITEMS, page, signed_in, text_of
from tests.support.roles import grant

pytestmark = pytest.mark.django_db

STARTS = ("add_experiment", "view_experiment", *ITEMS, "view_agent")


@pytest.fixture
def starter(django_user_model) -> Client:
    return signed_in(django_user_model, "starter", *STARTS)


@pytest.fixture
def versions():
    return factories.two_versions()


@pytest.fixture
def qa():
    return factories.dataset_with_items("qa", 3)


def start(client: Client, qa, chosen, **changes) -> str:
    _, baseline, draft = chosen
    form = {
        "dataset": qa.pk, "versions": [baseline.pk, draft.pk], "baseline": baseline.pk,
        "repeats": 1, "scorers": ["exact"], "scale_low": 1, "scale_high": 5, **changes,
    }  # fmt: skip
    response = client.post(ADD, {k: v for k, v in form.items() if v is not None})
    return response["Location"] if response.status_code == 302 else text_of(response)


def errors_of(shown: str, field: str) -> list[str]:
    """The errors shown in the row of `field`, in order."""
    row = shown.split(f'class="form-row field-{field} errors"')
    if len(row) == 1:
        return []
    listed = row[1].split("</ul>")[0]
    return re.findall(r"<li>([^<]*)</li>", listed)


def test_each_error_shows_by_its_own_field(starter, qa, versions):
    shown = start(starter, qa, versions, scorers=["regex"], budget_cost="-1")

    assert errors_of(shown, "pattern") == ["The regular expression scorer needs a pattern."]
    assert errors_of(shown, "budget_cost") == ["Ensure this value is greater than or equal to 0."]
    assert errors_of(shown, "versions") == []
    # Styled as the admin's own forms: each row holds its field and its errors together.
    assert 'href="/static/admin/css/forms.css"' in shown

    # What only making the experiment finds out is placed by its field as well.
    _, baseline, _ = versions
    shown = start(starter, qa, versions, versions=[baseline.pk], repeats=1)

    assert errors_of(shown, "versions") == ["An experiment compares at least two versions."]
    assert 'class="errorlist nonfield"' not in shown
    shown = start(starter, qa, versions, split="train")
    assert errors_of(shown, "dataset") == [
        "The dataset “qa” has no accepted item in its train split."
    ]
    assert not Experiment.objects.exists()


def test_a_pattern_that_does_not_compile_shows_by_the_pattern(starter, qa, versions):
    shown = start(starter, qa, versions, scorers=["regex"], pattern="(unclosed")

    [error] = errors_of(shown, "pattern")
    assert error.startswith("regex: the pattern does not compile")


def test_no_rubric_is_asked_for_without_the_llm_judge(starter, qa, versions):
    location = start(starter, qa, versions, scorers=["exact"], rubric="", scale_low=None,
                     scale_high=None)  # fmt: skip

    made = Experiment.objects.get()
    assert location == page(made) and made.scorers == [{"name": "exact"}]


def test_the_llm_judge_asks_for_its_rubric_and_its_judge_each_by_its_field(starter, qa, versions):
    shown = start(starter, qa, versions, scorers=["exact", "judge"], rubric="  ")

    assert errors_of(shown, "rubric") == [
        "The LLM judge needs a rubric: say what makes an answer good, and what each score means."
    ]
    assert errors_of(shown, "judge") == ["The LLM judge asks a judge agent: choose one."]
    assert not Experiment.objects.exists()

    judge = Agent.objects.create(name="Judge", model="scripted")
    start(starter, qa, versions, scorers=["judge"], rubric="Right?", judge=judge.pk)
    made = Experiment.objects.get()
    assert made.judge == judge
    assert made.scorers == [{"name": "judge", "rubric": "Right?", "scale": [1, 5]}]


def test_concurrency_defaults_to_two_on_the_embedded_model(starter, qa, versions, settings):
    settings.PARLEY_EVAL_CONCURRENCY = 8

    def offered() -> str:
        found = re.search(r'name="concurrency" value="(\d+)"', text_of(starter.get(ADD)))
        assert found is not None
        return found.group(1)

    settings.LLM_BASE_URL, settings.LLM_EMBEDDED = "http://127.0.0.1:9/v1", False
    assert offered() == "8"
    settings.LLM_EMBEDDED = True  # the endpoint `serve` started for the embedded model
    assert offered() == "2"
    settings.LLM_BASE_URL, settings.LLM_EMBEDDED = "", False  # none configured: the embedded
    assert offered() == "2"

    start(starter, qa, versions, concurrency="")  # left empty: the default offered
    assert Experiment.objects.get().concurrency == 2


# -- scoring again -------------------------------------------------------------------------------


@pytest.fixture
def done(qa, versions):
    _, baseline, draft = versions
    return factories.experiment(qa, baseline, draft)


@pytest.fixture
def lead(django_user_model) -> Client:
    return signed_in(django_user_model, "lead", "view_experiment", "change_experiment",
                     "view_agent", *ITEMS)  # fmt: skip


def test_a_rescore_with_a_judge_scorer_chooses_its_judge(lead, done):
    judge = Agent.objects.create(name="Strict judge", model="scripted")
    form = text_of(lead.get(page(done))).split('data-testid="rescore"')[1].split("</form>")[0]
    assert 'name="judge"' in form and "Strict judge" in form

    response = lead.post(page(done, "rescore/"), {
        "scorers": ["judge"], "rubric": "Is it right?", "scale_low": 1, "scale_high": 5,
        "judge": judge.pk,
    }, follow=True)  # fmt: skip

    done.refresh_from_db()
    assert done.judge == judge
    assert {"name": "judge", "rubric": "Is it right?", "scale": [1, 5]} in done.scorers
    assert "judged by Strict judge" in text_of(response)


def test_a_rescore_without_a_judge_says_so_and_scores_nothing(lead, done):
    response = lead.post(
        page(done, "rescore/"),
        {"scorers": ["pairwise"], "scale_low": 1, "scale_high": 5},
        follow=True,
    )

    assert "Nothing to score: Judge: The pairwise judge asks a judge agent" in text_of(response)
    done.refresh_from_db()
    assert done.scorers == [{"name": "exact"}] and done.judge is None


def test_a_rescore_changes_the_judge_only_for_staff_who_may_read_agents(django_user_model, done):
    operator = signed_in(django_user_model, "operator", "view_experiment", "change_experiment",
                         *ITEMS)  # fmt: skip
    kept = Agent.objects.create(name="Kept judge", model="scripted")
    other = Agent.objects.create(name="Other judge", model="scripted")
    Experiment.objects.filter(pk=done.pk).update(judge=kept)
    form = text_of(operator.get(page(done))).split('data-testid="rescore"')[1]
    assert 'name="judge"' not in form.split("</form>")[0]

    operator.post(page(done, "rescore/"), {
        "scorers": ["judge"], "rubric": "Kind?", "scale_low": 1, "scale_high": 5,
        "judge": other.pk,
    })  # fmt: skip

    done.refresh_from_db()
    assert done.judge == kept  # the posted judge is not theirs to choose
    assert {"name": "judge", "rubric": "Kind?", "scale": [1, 5]} in done.scorers
    grant(django_user_model.objects.get(username="operator"), "view_agent")
    assert 'name="judge"' in text_of(operator.get(page(done)))


def test_a_judged_experiment_keeps_its_judge(lead, done):
    first = Agent.objects.create(name="First judge", model="scripted")
    second = Agent.objects.create(name="Second judge", model="scripted")
    Experiment.objects.filter(pk=done.pk).update(judge=first)
    Score.objects.filter(trial__experiment=done).update(judge_version=first.live_version)

    response = lead.post(page(done, "rescore/"), {
        "scorers": ["judge"], "rubric": "Is it right?", "scale_low": 1, "scale_high": 5,
        "judge": second.pk,
    }, follow=True)  # fmt: skip

    assert "would mix two judges under one scorer" in text_of(response)
    done.refresh_from_db()
    assert done.judge == first
    assert {"name": "judge", "rubric": "Is it right?", "scale": [1, 5]} not in done.scorers

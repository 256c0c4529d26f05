"""Live evaluation in the admin: the rules, with their scorers checked as the scoring builds
them; the run list filtered by score; a run's scores on its page."""

from __future__ import annotations

import json
import re

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from evals_app.models import EvalRule, Score
from evals_app.scorers import spec_key
from sessions_app.models import Agent, Session
from tests.evals.scored_runs import REGEX, scored_runs
from tests.evals.test_dashboard_scores import grant_evals
from tests.support.apiclient import stored_run

pytestmark = pytest.mark.django_db

RULES = "/admin/evals_app/evalrule/"
RUNS = "/admin/sessions_app/run/"


def rule_form(agent: Agent, chosen: list[str], options: dict | str = "", **fields) -> dict:
    return {
        "agent": str(agent.pk),
        "sample_percent": "20",
        "chosen": chosen,
        "options": options if isinstance(options, str) else json.dumps(options),
        "active": "on",
        **fields,
    }


# -- rules -------------------------------------------------------------------------------------


def test_a_rule_is_made_of_checked_scorers_and_their_options(root, superuser, agent):
    form = rule_form(agent, ["json_valid", "regex"], {"regex": {"pattern": "\\d+"}},
                     rated_down="on")  # fmt: skip
    response = root.post(f"{RULES}add/", form)

    assert response.status_code == 302, response.context["adminform"].form.errors
    rule = EvalRule.objects.get()
    assert rule.scorers == [{"name": "json_valid"}, {"name": "regex", "pattern": "\\d+"}]
    assert (rule.sample_percent, rule.rated_down, rule.created_by) == (20, True, superuser)
    # Its page shows them as they were given.
    page = root.get(f"{RULES}{rule.pk}/change/").content.decode()
    checked = re.findall(r'name="chosen" value="(\w+)" id="\w+" checked', page)
    assert checked == ["json_valid", "regex"]
    assert "{&quot;regex&quot;: {&quot;pattern&quot;: &quot;\\\\d+&quot;}}" in page


@pytest.mark.parametrize(
    "chosen, options, field, message",
    [
        (["regex"], {}, "options", "regex: give a 'pattern'."),
        (["exact"], {}, "chosen", "Exact match compares with a reference answer"),
        (["json_valid"], {"regex": {"pattern": "x"}}, "options", "not chosen: regex"),
        (["json_valid"], "[1, 2]", "options", "Give an object of each scorer's options"),
        ([], {}, "chosen", "This field is required."),
    ],
)
def test_a_scorer_that_cannot_score_a_live_run_is_refused(
    root, agent, chosen, options, field, message
):
    response = root.post(f"{RULES}add/", rule_form(agent, chosen, options))

    assert response.status_code == 200
    errors = response.context["adminform"].form.errors
    assert message in " ".join(errors[field])
    assert not EvalRule.objects.exists()


def test_the_form_offers_only_the_scorers_that_can_score_a_live_run(root):
    page = root.get(f"{RULES}add/").content.decode()

    offered = re.findall(r'name="chosen" value="(\w+)"', page)
    assert offered == ["contains", "json_valid", "judge", "regex"]
    assert "Contains (give its “text” below)" in page


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("exact", "Exact match compares with a reference answer, and a live run has none."),
        ("json_equal", "JSON equal compares with a reference answer, and a live run has none."),
        ("similarity", "Similarity compares with a reference answer, and a live run has none."),
        (
            "pairwise",
            "Pairwise judge compares with the baseline's answer, and a live run has none.",
        ),
        ("nonsense", "There is no scorer “nonsense”."),
    ],
)
def test_a_scorer_posted_that_cannot_score_a_live_run_is_refused_saying_why(
    root, agent, name, message
):
    response = root.post(f"{RULES}add/", rule_form(agent, ["json_valid", name]))

    assert response.status_code == 200
    assert response.context["adminform"].form.errors["chosen"] == [message]
    assert message.replace("'", "&#x27;") in response.content.decode()
    assert not EvalRule.objects.exists()


def test_contains_scores_live_runs_when_its_text_is_given(root, agent):
    response = root.post(
        f"{RULES}add/", rule_form(agent, ["contains"], {"contains": {"text": "sorry"}})
    )
    assert response.status_code == 302
    assert EvalRule.objects.get().scorers == [{"name": "contains", "text": "sorry"}]


# -- the run list and a run's page -------------------------------------------------------------


@pytest.fixture
def scored(alice):
    return scored_runs(alice)


def listed(client: Client, query: str) -> set:
    response = client.get(RUNS, {"score": query} if query else {})
    assert response.status_code == 200
    return {run.pk for run in response.context["cl"].result_list}


def test_the_run_list_filters_by_score(root, scored):
    before, first, second, third = (run.pk for run in scored["runs"])

    assert listed(root, f"{REGEX}<0.5") == {second}
    assert listed(root, f"{REGEX}>=0.5") == {before, first, third}
    assert listed(root, "json_valid!") == {third}
    assert listed(root, "any") == {before, first, second, third}
    assert listed(root, "none") == {scored["unscored"].pk}
    # The choices come from the scores there are.
    page = root.get(RUNS).content.decode()
    assert "Matches “Hello”: below 0.5</a>" in page and "Valid JSON: failed</a>" in page
    assert f"{REGEX}: below" not in page  # the key is the filter's value, not its words


def test_the_score_filter_is_offered_to_staff_who_may_view_scores(staff, scored):
    client = Client()
    client.force_login(staff)
    assert "live score" not in client.get(RUNS).content.decode()

    grant_evals(staff, "view_score")
    assert listed(client, f"{REGEX}<0.5") == {scored["runs"][2].pk}


def scores_column(page: str, run) -> str:
    """The live scores cell of the run's row in the list."""
    row = page.split(f'value="{run.pk}"')[1].split("</tr>")[0]
    return row.split('<td class="field-live_scores">')[1].split("</td>")[0]


def test_the_run_list_shows_each_runs_live_scores_in_a_column(root, scored):
    before, first, second, third = scored["runs"]

    page = root.get(RUNS).content.decode()

    header = page.split('<th scope="col" class="column-live_scores">')[1].split("</th>")[0]
    assert "<span>Live scores</span>" in header
    regex = f'<span title="Matches “Hello” ({REGEX})">Regex&nbsp;'
    assert scores_column(page, first) == f"{regex}✓</span>"
    assert scores_column(page, second) == f"{regex}✗</span>"
    assert scores_column(page, before) == f"{regex}0.50</span>"
    failed = '<span title="Valid JSON (json_valid)">JSON&nbsp;failed</span>'
    assert scores_column(page, third) == f"{failed}<br>{regex}✓</span>"  # one a line
    assert scores_column(page, scored["unscored"]) == "–"


def test_a_judges_live_score_is_shown_on_its_scale(root, agent, alice):
    rubric = {"name": "judge", "rubric": "Kind?", "scale": [1, 10]}
    EvalRule.objects.create(agent=agent, scorers=[rubric, {"name": "contains", "text": "Hi"}])
    run = stored_run(Session.objects.create(user=alice, agent=agent), "Hello", "Hi there")
    Score.objects.create(run=run, scorer=spec_key(rubric), value=7.0)
    Score.objects.create(run=run, scorer=spec_key({"name": "contains", "text": "Hi"}), value=1.0)
    # A judge no rule names any more: its scale is not known.
    Score.objects.create(run=run, scorer="judge:0123abcd", value=3.0)

    shown = scores_column(root.get(RUNS).content.decode(), run)

    words = re.findall(r">([^<]+)</span>", shown)
    assert words == ["Contains&nbsp;✓", "Judge&nbsp;3", "Judge&nbsp;7/10"]
    assert 'title="Judge 1–10 (rubric: “Kind?”)' in shown


def test_the_scores_column_reads_a_page_of_runs_in_as_many_queries_as_one_run(root, agent, alice):
    EvalRule.objects.create(agent=agent, scorers=[{"name": "json_valid"}])
    session = Session.objects.create(user=alice, agent=agent)

    def listed_with(count: int) -> int:
        while session.runs.count() < count:
            run = stored_run(session, "Hello", "{}")
            Score.objects.create(run=run, scorer="json_valid", value=1.0)
        with CaptureQueriesContext(connection) as captured:
            page = root.get(RUNS).content.decode()
        assert page.count("JSON&nbsp;✓") == count
        return len(captured)

    assert listed_with(1) == listed_with(6)


def test_a_runs_page_shows_its_live_scores(root, scored):
    third = scored["runs"][3]
    page = root.get(f"{RUNS}{third.pk}/change/").content.decode()
    panel = page[page.index('data-testid="run-scores"') :].split("</section>")[0]

    # The scorer in words, its key only as the cell's title.
    assert f'<td title="{REGEX}">Matches “Hello”</td>' in panel
    assert f">{REGEX}" not in panel and f"{REGEX}<" not in panel
    assert "The scorer failed: boom" in panel
    unscored = root.get(f"{RUNS}{scored['unscored'].pk}/change/").content.decode()
    assert "Not scored: its agent's evaluation rules score a sample" in unscored


def test_a_judges_scores_are_split_at_the_middle_of_its_scale(root, agent):
    EvalRule.objects.create(agent=agent, scorers=[{"name": "judge", "rubric": "Kind?"}])
    EvalRule.objects.create(agent=agent, scorers=[{"name": "judge", "scale": [0, 10]}])
    page = root.get(RUNS).content.decode()
    assert ": below 3</a>" in page and ": below 5</a>" in page

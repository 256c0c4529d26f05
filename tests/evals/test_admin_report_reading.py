"""The report as staff read it on an experiment's pages: scorers named in words (their keys
only as a title), every column labelled, costs by one rule, and a warning when a judge gave
every answer the same verdict."""

from __future__ import annotations

import re

import pytest

from evals_app.models import Experiment, Score
from evals_app.money import UNKNOWN_WHY
from evals_app.report import build_report
from evals_app.scorers import spec_key
from tests.evals import factories
from tests.evals.test_admin_experiments import ITEMS, compare, page, signed_in, text_of

pytestmark = pytest.mark.django_db

CONTAINS = {"name": "contains", "text": "Paris"}
JUDGE = {"name": "judge", "rubric": "Is the answer right and complete for the user who asked?"}


@pytest.fixture
def viewer(django_user_model):
    return signed_in(django_user_model, "viewer", "view_experiment", *ITEMS)


def judged(values: dict[str, list[float]], count: int = 6) -> Experiment:
    """An experiment of `count` items scored by exact match, contains “Paris” and a judge;
    the judge's values per role ("baseline", "candidate"), one per item."""
    _, baseline, draft = factories.two_versions()
    made = factories.experiment(factories.dataset_with_items("qa", count), baseline, draft)
    made.scorers = [{"name": "exact"}, CONTAINS, JUDGE]
    made.save()
    for role, version in (("baseline", baseline), ("candidate", draft)):
        for i in range(count):
            trial = factories.trial_of(made, version, i)
            Score.objects.create(trial=trial, scorer=spec_key(CONTAINS), value=0.0)
            Score.objects.create(trial=trial, scorer=spec_key(JUDGE), value=values[role][i])
    return made


def test_scorers_are_named_in_words_with_their_key_only_as_a_title(viewer):
    made = judged({"baseline": [4, 5, 4, 5, 4, 5], "candidate": [2, 1, 2, 1, 2, 1]})
    judge_key, contains_key = spec_key(JUDGE), spec_key(CONTAINS)

    shown = text_of(viewer.get(page(made)))

    judge_words = "Judge (rubric: “Is the answer right and complete…”)"
    assert f'<h3 title="{judge_key}">{judge_words}</h3>' in shown
    assert f'<h3 title="{contains_key}">Contains “Paris”</h3>' in shown
    assert f'<span title="{contains_key}">Contains “Paris”</span>' in shown  # what it compares
    # The worse items name the scorer too; no key is shown as words anywhere.
    worse = shown.split('data-testid="worse-items"')[1]
    assert f'<td title="{judge_key}">{judge_words}</td>' in worse
    words = re.sub(r"<script.*?</script>", "", shown, flags=re.DOTALL)  # the charts' data
    assert not re.search(rf">[^<]*{re.escape(judge_key)}", words)

    draft = made.versions.exclude(pk=made.baseline_id).get()
    side = text_of(viewer.get(compare(made, factories.trial_of(made, draft, 0))))
    assert f'<th scope="row" title="{judge_key}">{judge_words}</th>' in side
    assert '<th scope="row" title="exact">Exact match</th>' in side


def test_every_column_of_a_scorers_table_has_its_header(viewer):
    made = judged({"baseline": [4, 5, 4, 5, 4, 5], "candidate": [2, 1, 2, 1, 2, 1]})

    shown = text_of(viewer.get(page(made)))

    table = shown.split(f'data-scorer="{spec_key(JUDGE)}"')[1].split("</thead>")[0]
    headers = re.findall(r"<th scope=\"col\"[^>]*>([^<]*)</th>", table)
    assert "" not in headers and headers[-1] == "verdict"
    assert len(headers) == 9


def test_a_judge_that_gives_every_answer_the_same_score_is_called_into_doubt(viewer):
    made = judged({"baseline": [3] * 6, "candidate": [2, 1, 2, 1, 2, 1]})

    shown = text_of(viewer.get(page(made)))

    warnings = re.findall(r'data-testid="judge-warning">([^<]*)<', shown)
    assert warnings == [
        "Judge (rubric: “Is the answer right and complete…”) gave all 6 scored answers of "
        "Assistant v1 the same score (3): the judge may not be telling answers apart."
    ]
    report = build_report(made)
    assert f"Warning: {warnings[0]}" in report.to_text()
    assert report.to_dict()["warnings"] == warnings


@pytest.mark.parametrize(
    ("count", "values", "warned"),
    [
        (5, {"baseline": [3] * 5, "candidate": [3] * 5}, False),  # too few to tell
        (6, {"baseline": [3, 4] * 3, "candidate": [2, 1] * 3}, False),  # it discriminates
        (6, {"baseline": [3] * 6, "candidate": [3] * 6}, True),
    ],
)
def test_the_judge_is_doubted_only_over_six_scored_answers_all_alike(viewer, count, values, warned):
    made = judged(values, count)

    shown = text_of(viewer.get(page(made)))

    assert ('data-testid="judge-warning"' in shown) is warned
    assert bool(build_report(made).judge_warnings()) is warned
    # Exact match gives every baseline answer 1: not a judge, no doubt.
    assert "Exact match gave" not in shown


def test_an_unknown_cost_is_a_dash_everywhere_never_0(viewer):
    made = judged({"baseline": [4, 5] * 3, "candidate": [2, 1] * 3})
    made.trials.update(cost=None)  # no price is configured for the model
    draft = made.versions.exclude(pk=made.baseline_id).get()

    shown = text_of(viewer.get(page(made)))

    versions = shown.split('data-testid="report-versions"')[1].split("</table>")[0]
    assert versions.count(f'<td title="{UNKNOWN_WHY}">–</td>') == 2
    box = shown.split('data-testid="experiment-progress"')[1].split("</section>")[0]
    assert f'<span data-testid="progress-cost" title="{UNKNOWN_WHY}">–</span>' in box
    assert "$0" not in shown
    side = text_of(viewer.get(compare(made, factories.trial_of(made, draft, 0))))
    assert "<dt>Cost</dt><dd>–</dd>" in side and "$0" not in side
    assert "cost –." in build_report(made).to_text()


def test_a_known_cost_of_nothing_is_0_and_others_keep_one_format(viewer):
    made = judged({"baseline": [4, 5] * 3, "candidate": [2, 1] * 3})
    draft = made.versions.exclude(pk=made.baseline_id).get()
    made.trials.filter(version=draft).update(cost=0)  # a free model, priced at 0
    Experiment.objects.filter(pk=made.pk).update(used_cost="0.000600")

    shown = text_of(viewer.get(page(made)))

    versions = shown.split('data-testid="report-versions"')[1].split("</table>")[0]
    base_row, draft_row = versions.split("<tbody>")[1].split("</tr>")[:2]
    assert "<td>$0.0006</td>" in base_row and "<td>$0</td>" in draft_row
    box = shown.split('data-testid="experiment-progress"')[1].split("</section>")[0]
    assert '<span data-testid="progress-cost">$0.0006</span>' in box
    assert "$0.0000" not in shown
    side = text_of(viewer.get(compare(made, factories.trial_of(made, draft, 0))))
    assert "<dt>Cost</dt><dd>$0</dd>" in side and "<dt>Cost</dt><dd>$0.0001</dd>" in side
    made.refresh_from_db()
    assert "cost $0.0006." in build_report(made).to_text()

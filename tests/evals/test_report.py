"""The report of an experiment written directly as rows: figures per version and scorer, the
comparison with the baseline, what gates a change (regression, minimum score), the worst items
first, and the CSV, JSON and text it is read as."""

from __future__ import annotations

import csv
import io
import json
from decimal import Decimal

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from datasets_app.models import Dataset
from evals_app import stats
from evals_app.models import TrialStatus
from evals_app.report import build_report
from evals_app.report_render import CSV_COLUMNS
from evals_app.scorers import build
from tests.evals import rows

pytestmark = pytest.mark.django_db

RUBRIC = {"name": "judge", "rubric": "Is it right?"}
# Per version, per item (seven of them), the one repeat's values; None is an error score.
EXACT = {
    "base": [1, 1, 1, 1, 1, 1, 1],
    "worse": [0, 0, 0, 0, 1, 0, 0],
    "close": [1, 1, 0, 1, 1, 1, None],
}
JUDGE = {"base": [4] * 7, "worse": [2] * 7, "close": [4, 5, 4, 4, 4, 3, 4]}
PAIRWISE = {"worse": [0, 0, 0, 0.5, 0, 0, 0], "close": [1, 1, 0.5, 0.5, 1, 1, 0.5]}
LATENCY = {"base": (0.1, 1.0), "worse": (0.3, 3.0), "close": (0.2, 2.0)}


@pytest.fixture
def table(agent):
    """The experiment: the agent's live version as baseline, a worse and a close candidate."""
    dataset = Dataset.objects.create(name="capitals")
    judge = rows.judge_agent()
    versions = {
        "base": agent.live_version,
        "worse": rows.draft(agent, instructions="Answer wrongly."),
        "close": rows.draft(agent, instructions="Answer briefly."),
    }
    experiment = rows.experiment(
        dataset,
        versions["base"],
        versions["worse"],
        versions["close"],
        scorers=["exact", RUBRIC, "pairwise"],
        judge=judge,
        seed=11,
    )
    items = [rows.item(dataset, f"Question {i}?", f"Answer {i}") for i in range(7)]
    judge_key = build(RUBRIC, judge).key
    for name, version in versions.items():
        for i, item in enumerate(items):
            first, took = LATENCY[name]
            trial = rows.trial(
                experiment,
                item,
                version,
                f"answer {i}",
                time_to_first_token=first * (i + 1),
                duration=took * (i + 1),
                total_tokens=10,
                cost=Decimal("0.001000"),
            )
            rows.score(trial, "exact", EXACT[name][i])
            rows.score(trial, judge_key, JUDGE[name][i], judge_tokens=5)
            if name in PAIRWISE:
                rows.score(trial, "pairwise", PAIRWISE[name][i], judge_tokens=7)
        rows.trial(experiment, items[0], version, repeat=2, status=TrialStatus.ERROR, error="502")
    return experiment, versions, items, judge_key


def test_each_version_has_its_trials_cost_tokens_and_latency(table):
    experiment, versions, _, _ = table
    report = build_report(experiment)
    assert [v.version_id for v in report.versions] == [versions[n].pk for n in versions]
    assert [v.label for v in report.versions] == [f"Assistant {v.label}" for v in versions.values()]
    assert report.versions[1].label.endswith(" draft")
    base = report.versions[0]
    assert base.baseline and (base.trials, base.completed, base.errors) == (8, 7, 1)
    assert (base.tokens, base.cost) == (70, Decimal("0.007"))
    firsts = [0.1 * (i + 1) for i in range(7)]
    assert base.ttft_p50 == pytest.approx(stats.percentile(firsts, 50))
    assert base.ttft_p95 == pytest.approx(stats.percentile(firsts, 95))
    assert base.duration_p95 == pytest.approx(stats.percentile([i + 1.0 for i in range(7)], 95))


def test_each_version_and_scorer_has_its_mean_interval_and_errors(table):
    experiment, versions, items, _ = table
    report = build_report(experiment)
    close = report.figures(versions["close"].pk, "exact")
    assert (close.n, close.items, close.errors) == (6, 6, 1)
    in_order = sorted(zip(items, EXACT["close"], strict=True), key=lambda p: str(p[0].pk))
    values = [float(v) for _, v in in_order if v is not None]
    assert (close.mean, close.low, close.high) == stats.bootstrap_mean(values, seed=11)
    assert close.mean == pytest.approx(5 / 6)
    base = report.figures(versions["base"].pk, "exact")
    assert (base.mean, base.low, base.high, base.difference) == (1.0, 1.0, 1.0, None)


def test_candidates_are_compared_with_the_baseline_item_by_item(table):
    experiment, versions, _, judge_key = table
    report = build_report(experiment)

    worse = report.figures(versions["worse"].pk, "exact")
    assert worse.difference == pytest.approx(-6 / 7)
    assert (worse.wins, worse.ties, worse.losses) == (0, 1, 6)
    assert worse.difference_high < 0 and worse.worse and worse.within_noise is False

    close = report.figures(versions["close"].pk, "exact")  # its error item is left out
    assert close.difference == pytest.approx(-1 / 6)
    assert (close.wins, close.ties, close.losses) == (0, 5, 1)
    assert close.within_noise and not close.worse

    judged = report.figures(versions["close"].pk, judge_key)
    assert (judged.wins, judged.ties, judged.losses) == (1, 5, 1)
    assert judged.difference == pytest.approx(0.0) and judged.within_noise


def test_the_pairwise_figure_is_the_candidates_win_rate(table):
    experiment, versions, _, _ = table
    report = build_report(experiment)
    assert report.figures(versions["base"].pk, "pairwise").n == 0
    close = report.figures(versions["close"].pk, "pairwise")
    assert close.mean == pytest.approx(5.5 / 7)
    assert (close.wins, close.ties, close.losses) == (4, 3, 0)
    assert close.difference == pytest.approx(close.mean - 0.5)
    assert close.difference_low == pytest.approx(close.low - 0.5)
    worse = report.figures(versions["worse"].pk, "pairwise")
    assert worse.mean == pytest.approx(0.5 / 7) and worse.worse


def test_a_regression_and_a_minimum_score_gate_on_candidates_only(table):
    experiment, versions, _, _ = table
    report = build_report(experiment)
    assert report.regressed
    assert report.below(0.5)  # the worse candidate's exact mean is 1/7
    assert not report.below(0.05)  # nothing but the baseline's pairwise row has less

    experiment.versions.remove(versions["worse"])
    without = build_report(experiment)
    assert not without.regressed and not without.below(0.5)


def test_the_items_a_candidate_did_worse_on_come_worst_first(table):
    experiment, versions, items, judge_key = table
    report = build_report(experiment)
    worse = report.worse_items
    assert all(w.difference < 0 for w in worse)
    spans = {"exact": 1.0, judge_key: 4.0, "pairwise": 0.5}
    relative = [w.difference / spans[w.scorer] for w in worse]
    assert relative == sorted(relative)
    assert {(w.item_uuid, w.scorer) for w in worse if w.version_id == versions["close"].pk} == {
        (items[2].pk, "exact"),
        (items[5].pk, judge_key),
    }
    first = worse[0]
    assert first.version_id == versions["worse"].pk and relative[0] == -1.0


def test_the_csv_has_a_row_per_version_and_scorer(table):
    experiment, versions, _, judge_key = table
    report = build_report(experiment)
    read = list(csv.DictReader(io.StringIO(report.to_csv())))
    assert tuple(read[0]) == CSV_COLUMNS
    assert len(read) == 9
    row = next(
        r for r in read if r["version_id"] == str(versions["worse"].pk) and r["scorer"] == "exact"
    )
    assert (row["version"], row["baseline"], row["n"], row["errors"]) == (
        f"Assistant {versions['worse'].label}",
        "False",
        "7",
        "0",
    )
    assert float(row["mean"]) == pytest.approx(1 / 7)
    assert (row["wins"], row["ties"], row["losses"], row["within_noise"]) == (
        "0",
        "1",
        "6",
        "False",
    )
    assert (row["trials"], row["trial_errors"], row["tokens"], row["cost"]) == (
        "8",
        "1",
        "70",
        "0.007",
    )
    base = next(r for r in read if r["baseline"] == "True" and r["scorer"] == judge_key)
    assert base["difference"] == "" and base["scorer_label"] == "Judge (rubric: “Is it right?”)"


def test_the_dict_is_json_and_the_text_is_a_table(table):
    experiment, _, _, _ = table
    report = build_report(experiment)
    data = json.loads(json.dumps(report.to_dict()))
    assert data["regressed"] is True and len(data["scores"]) == 9
    assert data["experiment"]["judge_tokens"] == 3 * 7 * 5 + 2 * 7 * 7
    text = report.to_text()
    labels = [v.label for v in report.versions]
    assert f"{labels[0]} (baseline)" in text and "within noise" in text and "WORSE" in text
    assert f"Worse than the baseline: {labels[1]} on Exact match" in text
    assert "Items where a candidate did worse" in text


def test_the_report_reads_no_answer_text(table):
    experiment, _, _, _ = table
    with CaptureQueriesContext(connection) as queries:
        build_report(experiment)
    assert not any('"content"' in q["sql"] for q in queries.captured_queries)
    assert len(queries.captured_queries) < 10


def test_the_minimum_score_reads_every_scorer_on_a_scale_of_0_to_1(table):
    experiment, versions, _, _ = table
    experiment.versions.remove(versions["worse"])
    report = build_report(experiment)
    # The close candidate: exact 5/6, judge 4 on 1 to 5 (0.75), pairwise win rate 0.79.
    assert report.below(0.76)
    assert not report.below(0.74)


@pytest.mark.parametrize(("items", "beyond_noise"), [(5, False), (6, True)])
def test_six_paired_items_at_least_to_tell_two_versions_apart(agent, items, beyond_noise):
    dataset = Dataset.objects.create(name="few")
    base, worse = agent.live_version, rows.draft(agent, instructions="Answer wrongly.")
    experiment = rows.experiment(dataset, base, worse, scorers=["exact"])
    for i in range(items):
        item = rows.item(dataset, f"Question {i}?", f"Answer {i}")
        rows.score(rows.trial(experiment, item, base, "right"), "exact", 1)
        rows.score(rows.trial(experiment, item, worse, "wrong"), "exact", 0)

    report = build_report(experiment)

    [figures] = [f for f in report.candidates() if f.scorer == "exact"]
    assert (figures.losses, figures.difference) == (items, -1.0)
    assert figures.within_noise is not beyond_noise
    assert report.regressed is beyond_noise

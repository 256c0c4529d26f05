"""The report's statistics against computations by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest

from evals_app import stats


def by_hand(values: list[float], seed: int, n: int, level: float) -> tuple[float, float, float]:
    """The documented percentile bootstrap, written out: the same index draw, then plain loops
    for the resampled means and the linear-interpolation percentile."""
    k = len(values)
    rows = np.random.default_rng(seed).integers(0, k, size=(n, k)).tolist()
    means = sorted(sum(values[i] for i in row) / k for row in rows)

    def percentile(q: float) -> float:
        position = q * (len(means) - 1)
        below = math.floor(position)
        above = min(below + 1, len(means) - 1)
        return means[below] + (means[above] - means[below]) * (position - below)

    tail = (1 - level) / 2
    return sum(values) / k, percentile(tail), percentile(1 - tail)


@pytest.mark.parametrize(
    ("values", "seed", "n", "level"),
    [
        ([0.0, 1.0, 1.0, 0.0, 1.0, 1.0, 1.0, 0.0], 0, 2000, 0.95),
        ([1.0, 2.0, 2.5, 4.0, 5.0, 3.25], 7, 500, 0.9),
        ([0.25, 0.5, 0.75, 0.5, 1.0], 12345, 1000, 0.95),
    ],
)
def test_the_bootstrap_interval_is_the_hand_computation(values, seed, n, level):
    mean, low, high = stats.bootstrap_mean(values, seed, n=n, level=level)
    expected = by_hand(values, seed, n, level)
    assert (mean, low, high) == pytest.approx(expected, abs=1e-12)
    assert low <= mean <= high


def test_the_bootstrap_is_the_same_for_a_seed_and_differs_across_seeds():
    values = [0.1 * i for i in range(20)]
    assert stats.bootstrap_mean(values, 3) == stats.bootstrap_mean(values, 3)
    assert stats.bootstrap_mean(values, 3) != stats.bootstrap_mean(values, 4)


def test_the_interval_of_one_value_or_equal_values_is_that_value():
    assert stats.bootstrap_mean([0.7], 0) == pytest.approx((0.7, 0.7, 0.7))
    assert stats.bootstrap_mean([2.0, 2.0, 2.0], 0) == (2.0, 2.0, 2.0)


def test_no_values_give_no_figures():
    assert stats.bootstrap_mean([], 0) == (None, None, None)
    assert stats.percentile([], 50) is None
    assert stats.paired({}, {"a": [1.0]}, 0) == (None, None, None, 0, 0, 0)


def test_paired_differences_on_a_small_table():
    # item: the baseline's and the candidate's values over their repeats
    baseline = {"a": [1, 0], "b": [1], "c": [0], "d": [0.5, 0.5], "e": [1]}
    candidate = {"a": [1, 1], "b": [0], "c": [0], "d": [1, 0], "e": [1], "f": [1]}
    # a: 1 - 0.5 = +0.5 (win); b: 0 - 1 = -1 (loss); c, d, e: 0 (ties); f has no baseline.
    assert stats.differences_by_item(baseline, candidate) == {
        "a": 0.5,
        "b": -1.0,
        "c": 0.0,
        "d": 0.0,
        "e": 0.0,
    }
    mean, low, high, wins, ties, losses = stats.paired(baseline, candidate, seed=5)
    assert (wins, ties, losses) == (1, 3, 1)
    assert mean == pytest.approx(-0.1)
    assert (low, high) == pytest.approx(by_hand([0.5, -1.0, 0.0, 0.0, 0.0], 5, 2000, 0.95)[1:])


def test_a_candidate_better_on_every_item_has_an_interval_above_zero():
    baseline = {i: [0.2, 0.3] for i in range(30)}
    candidate = {i: [0.6 + 0.01 * (i % 5), 0.7] for i in range(30)}
    mean, low, high, wins, ties, losses = stats.paired(baseline, candidate, seed=0)
    assert 0 < low <= mean <= high and (wins, ties, losses) == (30, 0, 0)


def test_percentiles_interpolate_between_values():
    assert stats.percentile([4, 1, 3, 2], 50) == 2.5
    assert stats.percentile([1, 2, 3, 4], 95) == pytest.approx(3.85)
    assert stats.percentile([5], 95) == 5.0


def test_resamples_drawn_in_blocks_are_the_ones_a_single_draw_gives():
    values = [0.0, 1.0, 0.5, 1.0, 0.0, 0.25, 1.0]
    rng = np.random.default_rng(7)
    at_once = np.asarray(values)[rng.integers(0, 7, size=(2000, 7))].mean(axis=1)
    expected = np.percentile(at_once, [2.5, 97.5])
    _, low, high = stats.bootstrap_mean(values, seed=7)
    assert (low, high) == (float(expected[0]), float(expected[1]))

"""The statistics behind kdflow's tables, against values computed by hand."""

import math

import numpy as np
import pytest

from kdflow.core import metrics
from kdflow.core.statistics import marks, paired_bootstrap, paired_seed_test, sample_std, seed_interval


def test_the_spread_over_seeds_is_the_sample_standard_deviation():
    assert sample_std([1.0, 2.0, 3.0, 4.0]) == pytest.approx(math.sqrt(5 / 3))  # squares 2.25+0.25+0.25+2.25, / 3
    assert math.isnan(sample_std([0.8]))


def test_the_paired_seed_test_uses_common_seeds_only():
    # differences 0.02, 0.03, 0.04: mean 0.03, sd 0.01, t = 0.03 / (0.01 / sqrt 3) = sqrt 27 on 2 degrees of freedom,
    # whose two-sided p is 1 - t / sqrt(2 + t^2) (the t distribution with 2 dof in closed form)
    scores = {1: 0.80, 2: 0.82, 3: 0.84, 4: 0.99}
    baseline = {1: 0.78, 2: 0.79, 3: 0.80, 5: 0.10}
    result = paired_seed_test(scores, baseline)
    assert result["pairs"] == 3 and result["difference"] == pytest.approx(0.03)
    assert result["p_seeds"] == pytest.approx(1 - math.sqrt(27 / 29))


@pytest.mark.parametrize("scores, baseline", [({1: 0.8}, {1: 0.7}), ({1: 0.8, 2: 0.7}, {1: 0.8, 2: 0.7})],
                         ids=["one-pair", "no-difference"])
def test_the_paired_seed_test_is_undefined_without_two_pairs_or_any_difference(scores, baseline):
    assert math.isnan(paired_seed_test(scores, baseline)["p_seeds"])


def test_the_bootstrap_interval_of_one_fixed_error():
    # The method is right on all 10 examples, the baseline wrong on one: a resample's difference is the number of
    # times that example is drawn, over 10, ~ Binomial(10, 0.1) / 10; its 2.5% quantile is 0 (P(0) = 0.35) and its
    # 97.5% quantile 0.3 (P(X <= 2) = 0.930, P(X <= 3) = 0.987).
    gold = np.ones(10, dtype=int)
    baseline = gold.copy()
    baseline[4] = 0
    result = paired_bootstrap([gold], [baseline], gold, metrics.accuracy, resamples=2000)
    assert result["difference"] == pytest.approx(0.1)
    assert result["low"] == 0.0 and result["high"] == pytest.approx(0.3)


def test_the_bootstrap_keeps_examples_paired_across_runs_and_averages_seeds():
    # The method is the baseline with 4 of its errors fixed: on any resample of the same examples it is at least as
    # good, so a paired interval never goes below zero (an unpaired one would: the baseline's accuracy alone varies
    # by about 7 points over resamples of 200 examples).
    rng = np.random.default_rng(0)
    gold = rng.integers(0, 2, 200)
    baseline = np.where(rng.random(200) < 0.6, gold, 1 - gold)
    method = baseline.copy()
    method[np.flatnonzero(method != gold)[:4]] = gold[np.flatnonzero(method != gold)[:4]]
    result = paired_bootstrap([method, method], [baseline], gold, metrics.accuracy)
    assert result["difference"] == pytest.approx(0.02)
    assert 0 <= result["low"] < result["high"] <= 0.05
    # two seeds of one side are averaged: a second, worse seed halves the gain
    result = paired_bootstrap([method, baseline], [baseline], gold, metrics.accuracy)
    assert result["difference"] == pytest.approx(0.01)


def test_the_bootstrap_needs_one_prediction_per_example():
    with pytest.raises(ValueError, match="one prediction for each of the 3 examples"):
        paired_bootstrap([np.zeros(2)], [np.zeros(3)], np.zeros(3), metrics.accuracy)


def test_the_seed_interval_is_where_one_more_run_would_fall():
    # mean 2, sd 1, t_{0.975, 2} = 4.302653: 2 ± 4.302653 * sqrt(1 + 1/3)
    low, high = seed_interval(2.0, sample_std([1.0, 2.0, 3.0]), 3)
    assert (low, high) == pytest.approx((2 - 4.302653 * math.sqrt(4 / 3), 2 + 4.302653 * math.sqrt(4 / 3)))
    assert all(math.isnan(v) for v in seed_interval(2.0, math.nan, 1))


@pytest.mark.parametrize("p, low, high, expected", [(0.01, 0.1, 0.5, "*†"), (0.2, -0.1, 0.5, ""),
                                                     (0.01, -0.1, 0.5, "*"), (math.nan, -0.5, -0.1, "†")])
def test_marks(p, low, high, expected):
    assert marks(p, low, high) == expected

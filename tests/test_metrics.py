"""Every metric against values computed by hand."""

import math

import numpy as np
import pytest
from scipy import stats

from kdflow.core import metrics


def test_accuracy_and_micro_f1():
    pred, gold = np.array([0, 1, 2, 2]), np.array([0, 1, 1, 2])
    assert metrics.accuracy(pred, gold) == 0.75
    assert metrics.f1_micro(pred, gold) == 0.75


def test_f1_of_positive_class():
    # tp=2 (idx 0, 3), fp=1 (idx 1), fn=1 (idx 4): F1 = 2*2 / (2*2 + 1 + 1) = 2/3
    pred, gold = np.array([1, 1, 0, 1, 0]), np.array([1, 0, 0, 1, 1])
    assert metrics.f1_binary(pred, gold) == pytest.approx(2 / 3)
    assert metrics.f1_binary(np.zeros(3), np.zeros(3)) == 0.0  # no positives anywhere


def test_mcc_by_hand():
    # tp=2, tn=1, fp=1, fn=1: (2*1 - 1*1) / sqrt(3*3*2*2) = 1/6
    pred, gold = np.array([1, 1, 0, 0, 1]), np.array([1, 0, 0, 1, 1])
    assert metrics.mcc(pred, gold) == pytest.approx(1 / 6)
    assert metrics.mcc(gold, gold) == pytest.approx(1.0)
    assert metrics.mcc(1 - gold, gold) == pytest.approx(-1.0)
    assert metrics.mcc(np.ones(5), gold) == 0.0  # a constant predictor (CoLA's majority class) scores 0


def test_pearson_by_hand():
    # x = [1, 2, 3], y = [1, 2, 4]: centred x = [-1, 0, 1], y = [-4/3, -1/3, 5/3]
    # r = (4/3 + 5/3) / sqrt(2 * (16 + 1 + 25) / 9) = 3 / sqrt(84/9)
    assert metrics.pearson(np.array([1, 2, 3]), np.array([1, 2, 4])) == pytest.approx(3 / math.sqrt(84 / 9))
    assert metrics.pearson(np.array([1.0, 1.0, 1.0]), np.array([1, 2, 4])) == 0.0


def test_spearman_with_ties_by_hand():
    # ranks of [1, 2, 2, 3] are [1, 2.5, 2.5, 4]; of [10, 20, 30, 40] are [1, 2, 3, 4]
    # centred: [-1.5, 0, 0, 1.5] and [-1.5, -0.5, 0.5, 1.5]; r = 4.5 / sqrt(4.5 * 5)
    value = metrics.spearman(np.array([1, 2, 2, 3]), np.array([10, 20, 30, 40]))
    assert value == pytest.approx(4.5 / math.sqrt(4.5 * 5))
    assert metrics.spearman(np.array([3, 1, 2]), np.array([30, 10, 20])) == pytest.approx(1.0)


def test_score_logits_uses_argmax_or_the_regression_output():
    logits = np.array([[2.0, 1.0], [0.0, 3.0], [1.0, 0.5]])
    assert metrics.score_logits(["accuracy"], logits, np.array([0, 1, 1]), regression=False) == {
        "accuracy": pytest.approx(2 / 3)
    }
    scores = metrics.score_logits(["pearson"], np.array([[1.0], [2.0], [3.0]]), np.array([2.0, 4.0, 6.0]), True)
    assert scores["pearson"] == pytest.approx(1.0)


def test_compute_rejects_mismatched_or_empty_inputs():
    with pytest.raises(ValueError, match="3 predictions for 2 gold"):
        metrics.compute(["accuracy"], np.zeros(3), np.zeros(2))
    with pytest.raises(ValueError, match="empty"):
        metrics.compute(["accuracy"], np.zeros(0), np.zeros(0))


def test_spearman_agrees_with_scipy_on_ties():
    rng = np.random.default_rng(0)
    pred, gold = rng.integers(0, 5, 50).astype(float), rng.integers(0, 8, 50).astype(float)  # many ties
    assert metrics.spearman(pred, gold) == pytest.approx(stats.spearmanr(pred, gold).statistic, abs=1e-12)


def test_nan_predictions_score_nan_not_a_perfect_correlation():
    gold = np.array([0.0, 1.0, 2.5, 4.0])
    all_nan = np.full((4, 1), np.nan)  # an STS-B student whose training diverged
    assert all(math.isnan(v) for v in metrics.score_logits(["pearson", "spearman"], all_nan, gold, True).values())
    one_nan = np.array([0.1, np.nan, 2.0, 3.0])
    assert math.isnan(metrics.spearman(one_nan, gold)) and math.isnan(metrics.pearson(one_nan, gold))
    assert math.isnan(metrics.compute(["pearson"], np.array([0.1, np.inf, 2.0, 3.0]), gold)["pearson"])


def test_a_non_finite_logit_makes_classification_metrics_nan():
    logits = np.array([[2.0, 1.0], [0.0, 3.0], [np.nan, 0.5]])  # argmax of the last row would be class 0
    scores = metrics.score_logits(["accuracy", "mcc"], logits, np.array([0, 1, 0]), regression=False)
    assert math.isnan(scores["accuracy"]) and math.isnan(scores["mcc"])


@pytest.mark.parametrize("name", sorted(metrics.METRICS))
def test_a_stack_of_runs_scores_row_by_row_as_each_run_alone(name):
    """The test over seeds and examples scores all its resamples in one call (kdflow.core.statistics): every metric
    takes a stack of runs along the last axis, degenerate rows (one class, a constant vector) and NaN rows included."""
    rng = np.random.default_rng(0)
    gold = rng.integers(0, 2, size=(5, 40))
    pred = rng.integers(0, 2, size=(5, 40)).astype(np.float64)
    pred[1], gold[2] = 1, 0  # a constant prediction, a single gold class
    pred[3, 7] = np.nan
    metric = metrics.METRICS[name]
    stacked = metric(pred, gold)
    alone = [metric(p, g) for p, g in zip(pred, gold)]
    assert stacked.shape == (5,) and isinstance(alone[0], float)
    np.testing.assert_array_equal(stacked, alone)

"""The official GLUE metrics and Sara's micro-F1, on plain arrays.

Scores are fractions in [0, 1] (or [-1, 1] for correlations); tables multiply by 100 where the papers do.
Degenerate inputs follow the usual conventions: MCC is 0 when a confusion-matrix margin is empty (as in
scikit-learn), a correlation of a constant vector is 0 rather than NaN so that model selection still works.

Non-finite outputs are not degenerate but broken: a prediction or logit that is NaN or infinite makes every metric
of the split NaN (:func:`compute`, :func:`score_logits`), as NaN propagates through scipy's correlations. Without
this, the argmax of NaN logits would be class 0 and rank averaging would rank NaN above every number, so a
student predicting only NaN would score a Spearman of 1 on STS-B; a NaN score instead marks the run as diverged and
model selection passes it over (:func:`kdflow.distillation.selection.select`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd


def accuracy(pred: np.ndarray, gold: np.ndarray) -> float:
    return _value(np.mean(np.asarray(pred) == np.asarray(gold), axis=-1))


def f1_binary(pred: np.ndarray, gold: np.ndarray, positive: int = 1) -> float:
    """F1 of the positive class (MRPC: 'equivalent', QQP: 'duplicate'; both have id 1)."""
    pred, gold = np.asarray(pred) == positive, np.asarray(gold) == positive
    tp = np.sum(pred & gold, axis=-1)
    return _ratio(2.0 * tp, np.sum(pred, axis=-1) + np.sum(gold, axis=-1))


def f1_micro(pred: np.ndarray, gold: np.ndarray) -> float:
    """Micro-averaged F1 over classes; for single-label classification it equals accuracy (thesis §3.1.3)."""
    return accuracy(pred, gold)


def mcc(pred: np.ndarray, gold: np.ndarray) -> float:
    """Matthews correlation coefficient of binary predictions (CoLA's metric)."""
    pred, gold = np.asarray(pred).astype(bool), np.asarray(gold).astype(bool)
    tp = np.sum(pred & gold, axis=-1, dtype=np.float64)
    tn = np.sum(~pred & ~gold, axis=-1, dtype=np.float64)
    fp = np.sum(pred & ~gold, axis=-1, dtype=np.float64)
    fn = np.sum(~pred & gold, axis=-1, dtype=np.float64)
    return _ratio(tp * tn - fp * fn, np.sqrt((tp + fp) * (tp + fn) * (tn + fp) * (tn + fn)))


def pearson(pred: np.ndarray, gold: np.ndarray) -> float:
    pred, gold = np.asarray(pred, dtype=np.float64), np.asarray(gold, dtype=np.float64)
    pred, gold = pred - pred.mean(axis=-1, keepdims=True), gold - gold.mean(axis=-1, keepdims=True)
    return _ratio(np.sum(pred * gold, axis=-1), np.sqrt(np.sum(pred**2, axis=-1) * np.sum(gold**2, axis=-1)))


def spearman(pred: np.ndarray, gold: np.ndarray) -> float:
    """Pearson correlation of the ranks, ties sharing their average rank (through :func:`pearson`, so that a
    constant vector scores 0 as there). Ranked by pandas, which every job imports anyway: scipy.stats would add
    about a second to the start-up of every job that scores predictions."""
    return pearson(_ranks(pred), _ranks(gold))


def _ranks(values: np.ndarray) -> np.ndarray:
    values = np.asarray(values, dtype=np.float64)
    if values.ndim == 1:
        return pd.Series(values).rank(method="average").to_numpy()
    return pd.DataFrame(values.reshape(-1, values.shape[-1])).rank(axis=1, method="average").to_numpy().reshape(values.shape)


# Every metric scores along the last axis: one score for one run, or one per row for a stack of runs (or of
# bootstrap resamples: kdflow.core.statistics.seed_example_test scores 1,000 of them in one call).


def _ratio(numerator, denominator):
    """numerator / denominator, 0 where the denominator is 0 (a degenerate margin or a constant vector); NaN
    propagates."""
    numerator, denominator = np.asarray(numerator, dtype=np.float64), np.asarray(denominator, dtype=np.float64)
    safe = np.where(denominator == 0, 1.0, denominator)
    return _value(np.where(denominator == 0, 0.0, numerator / safe))


def _value(scores):
    """A float for one run, the array for a stack."""
    return float(scores) if np.ndim(scores) == 0 else scores


METRICS: dict[str, Callable[[np.ndarray, np.ndarray], float]] = {
    "accuracy": accuracy,
    "f1": f1_binary,
    "f1_micro": f1_micro,
    "mcc": mcc,
    "pearson": pearson,
    "spearman": spearman,
}


# The metrics that are a mean of one score per example, and that score: their sampling variance has a closed form
# (kdflow.core.statistics.seed_example_test).
PER_EXAMPLE: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "accuracy": lambda pred, gold: (np.asarray(pred) == np.asarray(gold)).astype(np.float64),
}


def compute(metric_names: Sequence[str], pred: np.ndarray, gold: np.ndarray) -> dict[str, float]:
    """Score predictions (class ids, or real values for regression) against gold labels."""
    if len(pred) != len(gold):
        raise ValueError(f"{len(pred)} predictions for {len(gold)} gold labels")
    if len(gold) == 0:
        raise ValueError("cannot score an empty split")
    if not np.isfinite(np.asarray(pred, dtype=np.float64)).all():
        return nan_scores(metric_names)
    return {name: METRICS[name](pred, gold) for name in metric_names}


def nan_scores(metric_names: Sequence[str]) -> dict[str, float]:
    """The scores of a model whose outputs are not finite, or whose training diverged."""
    return dict.fromkeys(metric_names, float("nan"))


def predictions(logits: np.ndarray, regression: bool) -> np.ndarray:
    """Class ids (argmax) or, for regression, the single output."""
    return logits[:, 0] if regression else logits.argmax(-1)


def score_logits(metric_names: Sequence[str], logits: np.ndarray, gold: np.ndarray, regression: bool) -> dict[str, float]:
    """Score logits; a non-finite logit anywhere scores NaN, although the argmax of its row exists."""
    if not np.isfinite(logits).all():
        return compute(metric_names, np.full(len(logits), np.nan), gold)
    return compute(metric_names, predictions(logits, regression), gold)

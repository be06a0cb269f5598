"""The statistics of kdflow's tables: the spread over seeds and whether a difference is real, through scipy.

One convention across the package: the spread of a score over seeds is the **sample** standard deviation (n - 1
in the denominator), undefined (NaN) for a single seed. Two tests say whether a method differs from a baseline:

- :func:`paired_seed_test`: a paired t-test over the seeds both ran (the same seed gives both the same data order
  and initialisation of shared parts), which asks whether the difference would hold for another seed;
- :func:`paired_bootstrap`: a percentile interval of the difference of the seed-averaged scores, resampling the
  evaluation examples with replacement, the same resample for both (Koehn 2004; Dror et al. 2018), which asks
  whether it would hold on other examples of the task.

:func:`seed_interval` is the range in which one more run of a setting would fall (a prediction interval): a paper's
single run outside it differs from kdflow's by more than kdflow's seed spread.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

CONFIDENCE = 0.95
RESAMPLES = 1000
SIGNIFICANCE = 0.05


def _stats():
    """scipy.stats, imported where a test needs it: it costs about a second, and jobs that only take a sample std
    (e.g. transfer-set statistics) need not pay it at start-up."""
    from scipy import stats

    return stats


def sample_std(values: Sequence[float]) -> float:
    """The sample standard deviation (ddof=1); NaN below two values."""
    values = np.asarray(values, dtype=np.float64)
    return float(np.std(values, ddof=1)) if len(values) > 1 else math.nan


def paired_seed_test(scores: dict, baseline: dict) -> dict:
    """Paired t-test (scipy.stats.ttest_rel, two-sided) of ``scores`` against ``baseline`` ({seed: score}) over
    their common seeds: the mean difference, the number of pairs and the p-value. The p-value is NaN where the
    test is undefined: fewer than two common seeds, or every difference zero. Differences that are all equal and
    not zero have p = 0 (scipy's limit)."""
    seeds = sorted(set(scores) & set(baseline), key=str)
    a = np.array([scores[s] for s in seeds], dtype=np.float64)
    b = np.array([baseline[s] for s in seeds], dtype=np.float64)
    difference = float(np.mean(a - b)) if seeds else math.nan
    p = math.nan
    if len(seeds) > 1 and np.isfinite(a - b).all() and np.any(a != b):
        p = float(_stats().ttest_rel(a, b).pvalue)
    return {"difference": difference, "pairs": len(seeds), "p_seeds": p}


def paired_bootstrap(predictions: Sequence[np.ndarray], baseline: Sequence[np.ndarray], gold: np.ndarray,
                     metric: Callable[[np.ndarray, np.ndarray], float], *, resamples: int = RESAMPLES,
                     confidence: float = CONFIDENCE, seed: int = 0) -> dict:
    """The difference ``mean_s metric(predictions[s]) - mean_s metric(baseline[s])`` on ``gold``, with its
    percentile interval (scipy.stats.bootstrap, ``paired``: every resample draws the same examples for every run
    of both sides, so that their pairing by example is kept). Each side is a list of runs (seeds) with one
    prediction per example, in the order of ``gold``."""
    gold = np.asarray(gold)
    runs = [np.asarray(p) for p in (*predictions, *baseline)]
    if any(len(run) != len(gold) for run in runs):
        raise ValueError(f"every run needs one prediction for each of the {len(gold)} examples")
    if not predictions or not baseline:
        raise ValueError("the bootstrap needs at least one run on each side")
    k = len(predictions)

    def difference(gold, *runs, axis=-1):
        # Called on every resample at once (vectorized): each array holds one resample per row, and every metric
        # of kdflow.core.metrics scores along the last axis.
        ours = np.mean([metric(run, gold) for run in runs[:k]], axis=0)
        theirs = np.mean([metric(run, gold) for run in runs[k:]], axis=0)
        return ours - theirs

    observed = float(difference(gold, *runs))
    if not math.isfinite(observed):
        return {"difference": observed, "low": math.nan, "high": math.nan}
    result = _stats().bootstrap((gold, *runs), difference, paired=True, vectorized=True, n_resamples=resamples,
                             confidence_level=confidence, method="percentile", rng=np.random.default_rng(seed))
    interval = result.confidence_interval
    return {"difference": observed, "low": float(interval.low), "high": float(interval.high)}


def compare(scores: dict, baseline: dict, metric: Callable[[np.ndarray, np.ndarray], float],
            predictions: Sequence[np.ndarray] | None = None, baseline_predictions: Sequence[np.ndarray] | None = None,
            gold: np.ndarray | None = None) -> dict:
    """One side's runs against another's ({seed: score} each): the difference of their means over all their seeds,
    the paired t-test over the seeds both ran and, given each side's per-example predictions (by seed) and the gold
    labels, the paired-bootstrap interval of the difference (NaN without them)."""
    seeds = paired_seed_test(scores, baseline)
    low = high = math.nan
    if predictions is not None and baseline_predictions is not None and gold is not None:
        interval = paired_bootstrap(predictions, baseline_predictions, gold, metric)
        low, high = interval["low"], interval["high"]
    return {"difference": float(np.mean(list(scores.values())) - np.mean(list(baseline.values()))),
            "pairs": seeds["pairs"], "p_seeds": seeds["p_seeds"], "low": low, "high": high}


def seed_interval(mean: float, std: float, n: int, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """Where one more run would fall with probability ``confidence``, from the mean, sample std and number of
    runs of a setting (a normal prediction interval: mean ± t_{n-1} s sqrt(1 + 1/n)); (NaN, NaN) below two runs."""
    if n < 2 or not (math.isfinite(mean) and math.isfinite(std)):
        return math.nan, math.nan
    half = _stats().t.ppf((1 + confidence) / 2, n - 1) * std * math.sqrt(1 + 1 / n)
    return float(mean - half), float(mean + half)


def marks(p_seeds: float, low: float, high: float) -> str:
    """The marks a table puts beside a difference: ``*`` for p < 0.05 over seeds, ``†`` for a bootstrap interval
    over examples that excludes zero."""
    seed_mark = "*" if math.isfinite(p_seeds) and p_seeds < SIGNIFICANCE else ""
    example_mark = "†" if math.isfinite(low) and math.isfinite(high) and (low > 0 or high < 0) else ""
    return seed_mark + example_mark


LEGEND = (f"* p < {SIGNIFICANCE} in a paired t-test over the seeds both ran; † the {CONFIDENCE:.0%} paired-bootstrap "
          f"interval over the dev examples ({RESAMPLES} resamples) excludes zero.")

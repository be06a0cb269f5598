"""The statistics of kdflow's tables: the spread over seeds, whether a difference is real, what the data can detect
and how many seeds would detect more, through scipy and statsmodels.

One convention across the package: the spread of a score over seeds is the **sample** standard deviation (n - 1
in the denominator), undefined (NaN) for a single seed.

**A difference between two configurations** (:func:`seed_example_test`) is tested over both sources of chance at
once: the seeds (data order, initialisation) and the evaluation examples (which dev set the task happened to
have). Two runs of one configuration differ by seed alone, so a test that resamples the examples but holds the
trained models fixed calls them different far too often (it did, on 17 of 150 SST-2 pairs of one configuration);
a test over seeds alone holds the dev set fixed. The variance of the seed-averaged difference D over n paired
seeds and N examples, in the crossed random-effects model d(s, i) = mu + a_i + b_s + g_si (example, seed and their
interaction), is ``Var(D) = s_b^2 / n + s_a^2 / N + s_g^2 / (n N)``. It is estimated from the data:

- the spread of the per-seed differences, ``var_s(d_s) / n``: the seed effect and each seed's own example noise;
- the part of the example noise that every seed shares, ``s_a^2 / N``: from a paired bootstrap over the examples
  (the same resample for every run; Koehn 2004, Dror et al. 2018) of both each seed's difference (variance V_s)
  and the seed-averaged one (V), as ``(n V - mean_s V_s) / (n - 1)``. Adding the plain bootstrap variance V instead
  would count the interaction twice, as resampling seeds and examples independently does (Owen 2007's pigeonhole
  bootstrap is conservative for that reason). For a metric that is a mean over examples (accuracy: ``per_example``)
  the bootstrap's variances have a closed form, the examples' population variance over N (``V_s = var(d_s.) / N``,
  ``V = var(mean_s d_s.) / N``), which is what 1,000 resamples estimate with a noise of their own (on Universal-KD's
  KD > no KD they printed a dev-set floor of 0.11 where the exact one is 0.26): kdflow takes the closed form there.
  For the other metrics (correlations, F1, Matthews) of a dev set of at most :data:`JACKKNIFE_EXAMPLES` examples, the
  jackknife's variances instead (each run scored with each example left out in turn, ``(N - 1) / N`` times the sum
  of squared deviations): no draws, so no noise of their own and nothing a rerun could change, consistent for these
  smooth functions of means (Efron and Stein 1981), and for a mean the closed form's times ``N / (N - 1)``. Larger
  dev sets keep the seeded bootstrap, whose N resamples the jackknife's N x N scores would exceed.

The statistic ``D / sqrt(Var)`` is referred to a t distribution with the seed level's n - 1 degrees of freedom:
with 3-5 seeds a bootstrap over seeds has no t tails and is too narrow, and Welch-Satterthwaite's larger degrees of
freedom, which count the example part as exact, rejected 8% of 400 simulated same-configuration pairs with 3 seeds
at the nominal 5% (an example part estimated near zero lends degrees of freedom it does not have); with n - 1 the
test is slightly conservative where the example part is large. tests/test_statistics.py shows on simulated runs
with a known truth that it keeps its nominal error rate and has the power :func:`power` predicts. This follows
Bouthillier et al. (2021) in randomising every source of variation the runs have, rather than fixing all but the
seed; kdflow reports the difference of means, not their P(A > B), because the papers' claims are about means.

**What the data can detect.** :func:`detectable_difference` is the smallest true difference the test finds with
80% power given the observed variance; :func:`seeds_needed` (the seeds planner) how many paired seeds would bring
it down to a given gain (the example part does not shrink with seeds: past some gain no number of seeds helps on
this dev set). Without example variance both reduce to the paired t-test's power in closed form (the noncentral t,
as statsmodels' ``TTestPower``). :func:`equivalence_p` is the two one-sided tests (TOST; Schuirmann 1987) of
"the difference is smaller than a margin", and :func:`holm` adjusts a family's p-values (statsmodels).

:func:`seed_interval` is the range in which one more run of a setting would fall (a prediction interval): a paper's
single run outside it differs from kdflow's by more than kdflow's seed spread.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence

import numpy as np

CONFIDENCE = 0.95
RESAMPLES = 1000
JACKKNIFE_EXAMPLES = 5000  # the most dev examples whose example variance the jackknife gives (N x N scores)
SIGNIFICANCE = 0.05
POWER = 0.8
MAX_PLANNED_SEEDS = 100
# The difference an experiment's table sizes its seeds for when it knows no paper's gain: one point on the papers'
# x100 scale, the size of most gains the three works report between neighbouring methods.
PLANNED_GAIN = 0.01


def _stats():
    """scipy.stats, imported where a test needs it: it costs about a second, and jobs that only take a sample std
    (e.g. transfer-set statistics) need not pay it at start-up."""
    from scipy import stats

    return stats


def sample_std(values: Sequence[float]) -> float:
    """The sample standard deviation (ddof=1); NaN below two values."""
    values = np.asarray(values, dtype=np.float64)
    return float(np.std(values, ddof=1)) if len(values) > 1 else math.nan


def seed_example_test(predictions: Mapping, baseline: Mapping, gold: np.ndarray,
                      metric: Callable[[np.ndarray, np.ndarray], float], *, resamples: int | None = None,
                      seed: int = 0, per_example: Callable[[np.ndarray, np.ndarray], np.ndarray] | None = None
                      ) -> dict:
    """The difference of ``predictions`` and ``baseline`` ({seed: one prediction per example of ``gold``}) over
    the seeds both ran, tested over seeds and examples together (the module's model). Returns the mean difference,
    the number of pairs, the two variance parts (``seed_variance`` = var_s(d_s), per seed; ``example_variance`` =
    the shared example part of Var(D)), the standard error, degrees of freedom, the two-sided p-value and the
    ``CONFIDENCE`` interval. Below two pairs everything but the difference is NaN: a single seed's luck cannot be
    told from the configuration; without a common seed the difference is NaN too (the test pairs runs by seed).
    ``per_example``: the metric's score of each example (the metric is their mean, as accuracy is), which gives the
    example part in closed form; without it, the jackknife gives it on a dev set of at most
    :data:`JACKKNIFE_EXAMPLES` examples, a bootstrap of ``resamples`` (:data:`RESAMPLES`) draws on a larger one or
    where ``resamples`` is given. ``example_method`` says which, ``resamples`` how many draws (None but for the
    bootstrap)."""
    seeds = sorted(set(predictions) & set(baseline), key=str)
    if not seeds:
        return untested()
    gold = np.asarray(gold)
    runs = [np.asarray(side[s]) for s in seeds for side in (predictions, baseline)]
    if any(len(run) != len(gold) for run in runs):
        raise ValueError(f"every run needs one prediction for each of the {len(gold)} examples")
    per_seed = np.array([metric(runs[2 * k], gold) - metric(runs[2 * k + 1], gold) for k in range(len(seeds))])
    result = {"difference": float(np.mean(per_seed)), "pairs": len(seeds)}
    if len(seeds) < 2 or not np.isfinite(per_seed).all():
        return untested(result["difference"], len(seeds))
    n = len(seeds)
    method = ("closed form" if per_example is not None else
              "jackknife" if resamples is None and len(gold) <= JACKKNIFE_EXAMPLES else "bootstrap")
    if method == "closed form":  # the bootstrap's variances in closed form (the module)
        differences = np.stack([per_example(runs[2 * k], gold) - per_example(runs[2 * k + 1], gold)
                                for k in range(n)])  # seeds x examples
        each_seed = float(np.mean(np.var(differences, axis=1))) / len(gold)
        averaged = float(np.var(differences.mean(axis=0))) / len(gold)
    elif method == "jackknife":
        left_out = np.stack([leave_one_out(metric, runs[2 * k], gold) - leave_one_out(metric, runs[2 * k + 1], gold)
                             for k in range(n)])  # seeds x examples: each seed's difference without each example
        each_seed = float(np.mean([_jackknife_variance(row) for row in left_out]))
        averaged = _jackknife_variance(left_out.mean(axis=0))
    else:
        resamples = resamples or RESAMPLES
        # A paired bootstrap over the examples: one resample of example indices for every run (hand-written, as
        # scipy.stats.bootstrap returns an interval of one statistic, not the per-seed resampled differences).
        rng = np.random.default_rng(seed)
        index = rng.integers(0, len(gold), size=(resamples, len(gold)))
        resampled_gold = gold[index]
        resampled = np.stack([metric(runs[2 * k][index], resampled_gold)
                              - metric(runs[2 * k + 1][index], resampled_gold) for k in range(n)])  # seeds x resamples
        each_seed = float(np.mean(np.var(resampled, axis=1, ddof=1)))
        averaged = float(np.var(resampled.mean(axis=0), ddof=1))
    example_variance = max(0.0, (n * averaged - each_seed) / (n - 1))
    seed_variance = float(np.var(per_seed, ddof=1))
    return result | {"seed_variance": seed_variance, "example_variance": example_variance, "example_method": method,
                     "resamples": resamples if method == "bootstrap" else None,
                     **_t_test(result["difference"], seed_variance, example_variance, n)}


def leave_one_out(metric: Callable[[np.ndarray, np.ndarray], float], run: np.ndarray, gold: np.ndarray,
                  chunk: int = 256) -> np.ndarray:
    """``metric`` of ``run`` against ``gold`` with each example left out in turn [N]: the metric scores a stack of
    rows in one call (kdflow.core.metrics), ``chunk`` rows of N - 1 examples at a time."""
    n = len(gold)
    scores = []
    for start in range(0, n, chunk):
        rows = np.arange(start, min(start + chunk, n))
        index = np.arange(n - 1)[None, :] + (np.arange(n - 1)[None, :] >= rows[:, None])  # 0..N-1 without the row's
        scores.append(np.asarray(metric(run[index], gold[index]), dtype=np.float64))
    return np.concatenate(scores)


def _jackknife_variance(left_out: np.ndarray) -> float:
    """The jackknife's variance of a statistic from its N leave-one-out values."""
    n = len(left_out)
    return float((n - 1) / n * np.sum((left_out - left_out.mean()) ** 2))


def untested(difference: float = math.nan, pairs: int = 0) -> dict:
    """:func:`seed_example_test`'s result where the test cannot be made: too few common seeds, or a diverged run."""
    return {"difference": difference, "pairs": pairs, **dict.fromkeys(
        ("seed_variance", "example_variance", "standard_error", "df", "p", "low", "high"), math.nan)}


def _standard_error(seed_variance: float, example_variance: float, n: int) -> tuple[float, float]:
    """The standard error of the seed-averaged difference over n seeds, and its degrees of freedom, the seed
    level's n - 1 (the module says why not Welch-Satterthwaite's)."""
    return math.sqrt(seed_variance / n + example_variance), n - 1


def _t_test(difference: float, seed_variance: float, example_variance: float, n: int) -> dict:
    error, df = _standard_error(seed_variance, example_variance, n)
    t = _stats().t
    if error == 0:
        p = math.nan if difference == 0 else 0.0  # scipy's limit for equal non-zero differences
        return {"standard_error": 0.0, "df": df, "p": p, "low": difference, "high": difference}
    half = float(t.ppf((1 + CONFIDENCE) / 2, df)) * error
    return {"standard_error": error, "df": df, "p": float(2 * t.sf(abs(difference) / error, df)),
            "low": difference - half, "high": difference + half}


def power(difference: float, seed_variance: float, example_variance: float, n: int,
          alpha: float = SIGNIFICANCE) -> float:
    """The probability that :func:`seed_example_test` over n paired seeds rejects "no difference" (two-sided, at
    ``alpha``) when the true difference is ``difference``: the noncentral t of the paired t-test, with the standard
    error of the two variance parts and n - 1 degrees of freedom."""
    error, df = _standard_error(seed_variance, example_variance, n)
    stats = _stats()
    critical = stats.t.ppf(1 - alpha / 2, df)
    shift = abs(difference) / error
    # the far tail (rejecting with the wrong sign) is negligible where scipy's noncentral t returns NaN for it
    return float(stats.nct.sf(critical, df, shift) + np.nan_to_num(stats.nct.cdf(-critical, df, shift)))


def detectable_difference(seed_variance: float, example_variance: float, n: int, alpha: float = SIGNIFICANCE,
                          target: float = POWER) -> float:
    """The smallest true difference that :func:`seed_example_test` over n paired seeds detects with probability
    ``target`` (80%): the minimum detectable effect, in the units of the scores. NaN without a variance estimate."""
    if n < 2 or not (math.isfinite(seed_variance) and math.isfinite(example_variance)):
        return math.nan
    error, _ = _standard_error(seed_variance, example_variance, n)
    if error == 0:
        return 0.0
    # power rises with the difference; at alpha 0.05 and df >= 1 it passes 98% by 30 standard errors, and a small
    # alpha (a family's share) at df 1 needs more: the bracket widens until it holds the target
    def short(d: float) -> float:
        return power(d, seed_variance, example_variance, n, alpha) - target

    upper = 60 * error
    while short(upper) < 0:
        upper *= 4
    return float(_optimize().brentq(short, 0.0, upper, xtol=1e-12 * error))


def dev_set_floor(example_variance: float, alpha: float = SIGNIFICANCE, target: float = POWER) -> float:
    """The smallest difference any number of seeds could detect with probability ``target`` on this dev set: the
    limit of :func:`detectable_difference` as the seed part vanishes, (z_{1-alpha/2} + z_target) times the root of
    the shared example part."""
    if not math.isfinite(example_variance):
        return math.nan
    z = _stats().norm.ppf
    return float((z(1 - alpha / 2) + z(target)) * math.sqrt(example_variance))


def seeds_needed(gain: float, seed_variance: float, example_variance: float, alpha: float = SIGNIFICANCE,
                 target: float = POWER, most: int = MAX_PLANNED_SEEDS) -> int | None:
    """The seeds planner: the fewest paired seeds (at least 2) with which :func:`seed_example_test` detects a true
    difference of ``gain`` with probability ``target``, given the variance parts observed so far; None where even
    ``most`` seeds do not (the shared example part alone is then too large: the dev set, not the seeds, limits)."""
    if not (math.isfinite(gain) and math.isfinite(seed_variance) and math.isfinite(example_variance)) or gain == 0:
        return None
    for n in range(2, most + 1):
        if power(gain, seed_variance, example_variance, n, alpha) >= target:
            return n
    return None


def sensitivity(gain: float, seed_variance: float, example_variance: float, pairs: int,
                alpha: float = SIGNIFICANCE) -> dict:
    """What a test of ``pairs`` paired seeds with these variance parts can see at ``alpha``: the difference it
    detects with 80% power (:func:`detectable_difference`), and the paired seeds that would detect ``gain``
    (:func:`seeds_needed`)."""
    return {"detectable": detectable_difference(seed_variance, example_variance, pairs, alpha),
            "seeds_needed": seeds_needed(abs(gain), seed_variance, example_variance, alpha)}



def pooled_seed_variance(seed_variances: Sequence[float], pairs: Sequence[int]) -> tuple[float, int]:
    """The seed variance of several comparisons pooled, each weighted by its degrees of freedom (pairs - 1), and the
    pooled degrees of freedom: an estimate with 3 or 4 degrees of freedom per link is itself noisy, and the links of
    one claim on one task (one student, teacher, task and seeds) share its source. Comparisons without an estimate
    (fewer than two pairs) add nothing; NaN and 0 degrees of freedom where none has one."""
    usable = [(v, n - 1) for v, n in zip(seed_variances, pairs) if n >= 2 and math.isfinite(v)]
    df = sum(d for _, d in usable)
    return (sum(v * d for v, d in usable) / df if df else math.nan), df

def t_quantile(probability: float, df: float) -> float:
    """Student's t quantile (an interval's half-width in standard errors); NaN without degrees of freedom."""
    return float(_stats().t.ppf(probability, df)) if math.isfinite(df) and df > 0 else math.nan


def equivalence_p(difference: float, standard_error: float, df: float, margin: float) -> float:
    """Two one-sided tests (TOST) of "the true difference lies within ±``margin``": the larger of the p-values of
    H0: difference <= -margin and H0: difference >= +margin, each a one-sided t-test with the standard error and
    degrees of freedom of :func:`seed_example_test`. Below ``SIGNIFICANCE``: no difference as large as the margin."""
    if not (math.isfinite(standard_error) and math.isfinite(margin)) or margin <= 0:
        return math.nan
    if standard_error == 0:
        return 0.0 if abs(difference) < margin else 1.0
    t = _stats().t
    lower = t.sf((difference + margin) / standard_error, df)
    upper = t.cdf((difference - margin) / standard_error, df)
    return float(max(lower, upper))


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjustment of a family of p-values (statsmodels' ``multipletests``), in their order; NaN
    entries (tests that could not be made) stay NaN and do not count in the family."""
    values = np.asarray(p_values, dtype=np.float64)
    adjusted = np.full(len(values), np.nan)
    finite = np.isfinite(values)
    if finite.any():
        from statsmodels.stats.multitest import multipletests

        adjusted[finite] = multipletests(values[finite], alpha=SIGNIFICANCE, method="holm")[1]
    return adjusted.tolist()


def _optimize():
    from scipy import optimize

    return optimize


def seed_interval(mean: float, std: float, n: int, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """Where one more run would fall with probability ``confidence``, from the mean, sample std and number of
    runs of a setting (a normal prediction interval: mean ± t_{n-1} s sqrt(1 + 1/n)); (NaN, NaN) below two runs."""
    if n < 2 or not (math.isfinite(mean) and math.isfinite(std)):
        return math.nan, math.nan
    half = _stats().t.ppf((1 + confidence) / 2, n - 1) * std * math.sqrt(1 + 1 / n)
    return float(mean - half), float(mean + half)


def marks(p_holm: float) -> str:
    """The mark a table puts beside a difference: ``*`` where the test over seeds and examples rejects "no
    difference" after Holm's adjustment across the table's comparisons."""
    return "*" if math.isfinite(p_holm) and p_holm < SIGNIFICANCE else ""


LEGEND = (f"* p < {SIGNIFICANCE} after Holm's adjustment across the table's comparisons, in a test over the held-out "
          "seeds both ran and the dev examples together (seeds that chose a grid point are never in it).")

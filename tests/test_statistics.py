"""The statistics behind kdflow's tables: against values computed by hand, the closed forms of the paired t-test,
and simulated runs whose truth is known."""

import math
import warnings

import numpy as np
import pytest
from scipy import stats

from kdflow.core import metrics
from kdflow.core.statistics import (
    JACKKNIFE_EXAMPLES,
    _t_test,
    detectable_difference,
    dev_set_floor,
    equivalence_p,
    holm,
    leave_one_out,
    marks,
    power,
    sample_std,
    seed_example_test,
    seed_interval,
    seeds_needed,
    sensitivity,
)


def mean_prediction(predictions, gold):
    """A metric that is the mean of the predictions: a per-seed shift of every prediction moves it exactly."""
    return np.mean(predictions, axis=-1)


def test_the_spread_over_seeds_is_the_sample_standard_deviation():
    assert sample_std([1.0, 2.0, 3.0, 4.0]) == pytest.approx(math.sqrt(5 / 3))  # squares 2.25+0.25+0.25+2.25, / 3
    assert math.isnan(sample_std([0.8]))


def test_without_example_noise_the_test_is_the_paired_t_test_over_common_seeds():
    # Each seed's runs differ by the same shift on every example, 0.02, 0.03, 0.04 (seed 4 and 5 are not common):
    # no resample of the examples changes a difference, so the example part is 0 and the test is the paired
    # t-test: mean 0.03, sd 0.01, t = sqrt 27 on 2 dof, two-sided p = 1 - t / sqrt(2 + t^2) (t with 2 dof).
    base = np.linspace(0.0, 1.0, 50)
    ours = {1: base + 0.52, 2: base + 0.53, 3: base + 0.54, 4: base}
    theirs = {1: base + 0.50, 2: base + 0.50, 3: base + 0.50, 5: base}
    result = seed_example_test(ours, theirs, np.zeros(50), mean_prediction)
    assert result["pairs"] == 3 and result["difference"] == pytest.approx(0.03)
    assert result["example_variance"] == pytest.approx(0.0, abs=1e-20)
    assert result["seed_variance"] == pytest.approx(1e-4) and result["df"] == 2
    assert result["p"] == pytest.approx(1 - math.sqrt(27 / 29))
    half = stats.t.ppf(0.975, 2) * 0.01 / math.sqrt(3)
    assert (result["low"], result["high"]) == pytest.approx((0.03 - half, 0.03 + half))


@pytest.mark.parametrize("shift, seed_variance", [(0.0, 0.0), (0.5, 0.125)], ids=["seeds-agree", "seed-shift"])
def test_the_example_part_is_the_variance_every_seed_shares(shift, seed_variance):
    # Both seeds are better by the same per-example amounts x, seed 2 by a further `shift` on every example: the
    # seed part is var(0, shift) (0 where the seeds agree), and the difference's example part is which examples the
    # dev set holds, unchanged by the shift: var(x) / N (the variance of a resampled mean).
    rng = np.random.default_rng(0)
    x = rng.normal(0.1, 1.0, 400)
    base = rng.normal(0, 1, 400)
    result = seed_example_test({1: base + x, 2: base + x + shift}, {1: base, 2: base}, np.zeros(400), mean_prediction,
                               resamples=4000)
    assert result["seed_variance"] == pytest.approx(seed_variance, rel=1e-6, abs=1e-20)
    assert result["example_variance"] == pytest.approx(np.var(x) / 400, rel=0.1)
    assert result["standard_error"] == pytest.approx(math.sqrt(seed_variance / 2 + result["example_variance"]))


def test_the_interaction_of_seeds_and_examples_is_counted_once():
    # Two seeds with independent per-example noise: resampling the examples of each seed's difference sees that
    # noise (V_s), the seed average sees half of it (V = V_s / 2), and the shared part (2 V - V_s) / 1 is about 0:
    # the per-seed differences' own spread already carries it.
    rng = np.random.default_rng(1)
    noise = {seed: rng.normal(0, 1, 2000) for seed in (1, 2, 3, 4)}
    result = seed_example_test({s: noise[s] for s in (1, 2)}, {1: noise[3] * 0, 2: noise[4] * 0}, np.zeros(2000),
                               mean_prediction, resamples=4000)
    assert result["example_variance"] < 0.1 * np.var(noise[1]) / 2000


@pytest.mark.parametrize("ours, theirs", [({1: [1, 0]}, {1: [0, 0]}), ({1: [1, 0], 2: [np.nan, 0]},
                                                                          {1: [0, 0], 2: [0, 0]})],
                         ids=["one-pair", "diverged"])
def test_the_test_is_undefined_for_one_seed_or_a_diverged_run(ours, theirs):
    result = seed_example_test({s: np.array(v) for s, v in ours.items()}, {s: np.array(v) for s, v in theirs.items()},
                               np.array([1, 0]), mean_prediction)
    assert math.isfinite(result["difference"]) or result["pairs"] == 2
    assert all(math.isnan(result[key]) for key in ("p", "low", "high", "standard_error"))


def test_bad_input_is_a_clear_error():
    with pytest.raises(ValueError, match="one prediction for each of the 3 examples"):
        seed_example_test({1: np.zeros(2)}, {1: np.zeros(3)}, np.zeros(3), metrics.accuracy)


def test_sides_without_a_common_seed_are_untested_not_compared_unpaired():
    result = seed_example_test({1: np.ones(3)}, {2: np.zeros(3)}, np.zeros(3), metrics.accuracy)
    assert result["pairs"] == 0 and all(math.isnan(value) for key, value in result.items() if key != "pairs")


def simulated_runs(rng, seeds, examples, gain=0.0, same_configuration=True):
    """Dev predictions of two configurations on a freshly drawn dev set of a binary task: an example is right when
    its configuration's level, the seed's luck, the example's difficulty, the configuration's own way with that
    example and each run's noise add up above 0 (seed luck sd 0.15; a configuration's example effects sd 0.5)."""
    gold = rng.integers(0, 2, examples)
    difficulty = rng.normal(0, 1.5, examples)
    own = rng.normal(0, 0.5, examples)
    other = own if same_configuration else rng.normal(0, 0.5, examples)

    def runs(effect, level):
        right = [level + rng.normal(0, 0.15) + difficulty + effect + rng.normal(0, 1, examples) > 0
                 for _ in range(seeds)]
        return {seed: np.where(r, gold, 1 - gold) for seed, r in enumerate(right)}

    return runs(own, 1.5 + gain), runs(other, 1.5), gold


@pytest.mark.parametrize("same_configuration", [True, False], ids=["same-configuration", "equal-on-average"])
def test_on_simulated_runs_that_differ_by_chance_the_test_keeps_its_error_rate(same_configuration):
    # 1,000 pairs of 5 seeds each on 300 dev examples: two runs of one configuration (the models differ by seed
    # alone), or two configurations equally good on the task but right on different examples (the dev set decides).
    rng = np.random.default_rng(2)
    rejected = sum(seed_example_test(*simulated_runs(rng, 5, 300, same_configuration=same_configuration),
                                     metrics.accuracy, resamples=100, seed=k)["p"] < 0.05 for k in range(1000))
    assert rejected / 1000 <= 0.065  # 5% and two binomial standard errors of 1,000 draws (0.7%)
    assert rejected / 1000 >= 0.02  # and not vacuous: 3.6% and 3.4% when written


def test_on_simulated_runs_with_a_known_gain_the_test_has_the_power_it_predicts():
    rng = np.random.default_rng(3)
    results = [seed_example_test(*simulated_runs(rng, 5, 300, gain=0.35), metrics.accuracy, resamples=100, seed=k)
               for k in range(600)]
    rejected = np.mean([r["p"] < 0.05 and r["difference"] > 0 for r in results])
    # the power the planner predicts from the average variance parts and the true gain (the mean difference)
    predicted = power(np.mean([r["difference"] for r in results]), np.mean([r["seed_variance"] for r in results]),
                      np.mean([r["example_variance"] for r in results]), 5)
    assert 0.3 < rejected < 0.95
    assert rejected == pytest.approx(predicted, abs=0.07)


def test_holm_on_a_hand_computed_family():
    # sorted 0.005, 0.01, 0.03, 0.04 times 4, 3, 2, 1: 0.02, 0.03, 0.06, 0.04 -> running maximum 0.02, 0.03, 0.06, 0.06
    assert holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    adjusted = holm([0.01, math.nan, 0.02])  # a test that could not be made is not in the family
    assert adjusted[0] == pytest.approx(0.02) and math.isnan(adjusted[1]) and adjusted[2] == pytest.approx(0.02)
    assert holm([0.6, 0.7]) == pytest.approx([1.0, 1.0])


def test_the_equivalence_test_on_a_hand_computed_case():
    # difference 0.5, standard error 0.5, 4 dof, margin 2: the two one-sided statistics are (0.5 + 2) / 0.5 = 5
    # and (0.5 - 2) / 0.5 = -3; p is the larger tail, P(T_4 > 3). With 4 dof, F(t) = 1/2 + 3/4 (x - x^3 / 3) for
    # x = t / sqrt(4 + t^2).
    x = 3 / math.sqrt(13)
    assert equivalence_p(0.5, 0.5, 4, 2.0) == pytest.approx(0.5 - 0.75 * (x - x ** 3 / 3))
    assert equivalence_p(0.5, 0.5, 4, 2.0) < 0.05 < equivalence_p(0.5, 0.5, 4, 1.0)
    assert math.isnan(equivalence_p(0.5, 0.5, 4, math.nan))


@pytest.mark.parametrize("effect, seeds", [(1.0, 10), (0.5, 34), (0.8, 15)])
def test_the_seeds_planner_matches_the_paired_t_tests_closed_form(effect, seeds):
    # Without example noise the planner is the paired t-test's sample size for 80% power at alpha 0.05, two-sided
    # (the noncentral t; G*Power's table: d = 1 -> 10 pairs, d = 0.5 -> 34, d = 0.8 -> 15).
    assert seeds_needed(effect * 2.0, 4.0, 0.0) == seeds
    # the tables' pair of them, for a gain of either sign
    assert sensitivity(-effect * 2.0, 4.0, 0.0, seeds) == {"detectable": detectable_difference(4.0, 0.0, seeds),
                                                           "seeds_needed": seeds}
    # and the detectable difference at that many seeds is at most the effect, at one fewer above it
    assert detectable_difference(4.0, 0.0, seeds) <= effect * 2.0 < detectable_difference(4.0, 0.0, seeds - 1)
    # statsmodels' TTestPower, the same closed form
    from statsmodels.stats.power import TTestPower

    assert detectable_difference(4.0, 0.0, seeds) == pytest.approx(
        2.0 * TTestPower().solve_power(nobs=seeds, alpha=0.05, power=0.8), rel=1e-5)  # its solver's tolerance


def test_the_planner_knows_when_seeds_cannot_help():
    # the example part does not shrink with seeds: a gain below what the dev set alone can resolve needs more than
    # any number of seeds, and example noise never lowers the seeds needed. The dev set's floor with example
    # variance 1 is z_0.975 + z_0.8 = 1.959964 + 0.841621; a gain of 1.0 is below it.
    assert dev_set_floor(1.0) == pytest.approx(2.801585, abs=1e-6)
    assert detectable_difference(4.0, 1.0, 10 ** 6) == pytest.approx(dev_set_floor(1.0), rel=1e-3)
    assert seeds_needed(1.0, 4.0, 1.0) is None and seeds_needed(3.0, 4.0, 1.0) is not None
    assert seeds_needed(2.0, 4.0, 0.1) >= seeds_needed(2.0, 4.0, 0.0)
    assert seeds_needed(math.nan, 4.0, 0.0) is None


def test_the_seed_interval_is_where_one_more_run_would_fall():
    # mean 2, sd 1, t_{0.975, 2} = 4.302653: 2 ± 4.302653 * sqrt(1 + 1/3)
    low, high = seed_interval(2.0, sample_std([1.0, 2.0, 3.0]), 3)
    assert (low, high) == pytest.approx((2 - 4.302653 * math.sqrt(4 / 3), 2 + 4.302653 * math.sqrt(4 / 3)))
    assert all(math.isnan(v) for v in seed_interval(2.0, math.nan, 1))


@pytest.mark.parametrize("p, expected", [(0.01, "*"), (0.2, ""), (math.nan, "")])
def test_marks(p, expected):
    assert marks(p) == expected


# Boundaries and degenerate cases: each found by a planted change (benchmarks/mutation_score.py) that the tests
# above let through.

def test_one_value_has_no_spread_and_no_warning():
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # numpy's "degrees of freedom <= 0" would say the spread was computed
        assert math.isnan(sample_std([0.8])) and math.isnan(sample_std([]))
    assert sample_std([1, 3]) == pytest.approx(math.sqrt(2))


def test_runs_that_agree_on_every_seed_and_example_differ_exactly():
    # no variance of either kind: the difference is known, p is 0 (or undefined for no difference), and the
    # interval is the point
    assert _t_test(0.5, 0.0, 0.0, 3) == {"standard_error": 0.0, "df": 2, "p": 0.0, "low": 0.5, "high": 0.5}
    same = _t_test(0.0, 0.0, 0.0, 4)
    assert math.isnan(same.pop("p")) and same == {"standard_error": 0.0, "df": 3, "low": 0.0, "high": 0.0}
    assert detectable_difference(0.0, 0.0, 5) == 0.0


def test_one_common_seed_keeps_its_difference_and_names_every_untested_field():
    result = seed_example_test({1: np.array([1, 1, 0, 0]), 2: np.zeros(4)}, {1: np.array([1, 0, 0, 0])},
                               np.array([1, 1, 0, 0]), metrics.accuracy)
    assert result.pop("difference") == pytest.approx(0.25) and result.pop("pairs") == 1
    assert set(result) == {"seed_variance", "example_variance", "standard_error", "df", "p", "low", "high"}
    assert all(math.isnan(value) for value in result.values())


def test_the_bootstrap_is_seeded_and_resamples_every_example():
    # Every seed's baseline is wrong on example 0 alone (of 10), ours on none: the seeds agree, so only the examples
    # vary, and the example part is the variance of the share of example 0 in a resample, 0.1 * 0.9 / 10.
    gold = np.zeros(10, dtype=int)
    ours = {seed: np.zeros(10, dtype=int) for seed in (1, 2, 3)}
    theirs = {seed: (np.arange(10) == 0).astype(int) for seed in (1, 2, 3)}
    first = seed_example_test(ours, theirs, gold, metrics.accuracy, resamples=4000)
    assert first["difference"] == pytest.approx(0.1) and first["example_variance"] == pytest.approx(0.009, rel=0.1)
    assert seed_example_test(ours, theirs, gold, metrics.accuracy, resamples=4000) == first


def test_each_seeds_runs_are_resampled_as_a_pair():
    # Each seed's baseline is wrong on examples 0-4 and on five of its own (10-14, 15-19 or 20-24, of 30); our run
    # of that seed fixes 0-4 alone. Paired by seed, every seed's difference is the share of examples 0-4 in a
    # resample, so the example part is (5/30)(25/30)/30; pairing one seed's run with another seed's baseline would
    # see the two seeds' own examples too, and shrink the shared part to nothing.
    gold = np.zeros(30, dtype=int)
    own = {seed: (np.arange(30) >= 5 + 5 * seed) & (np.arange(30) < 10 + 5 * seed) for seed in (1, 2, 3)}
    theirs = {seed: ((np.arange(30) < 5) | own[seed]).astype(int) for seed in (1, 2, 3)}
    ours = {seed: own[seed].astype(int) for seed in (1, 2, 3)}
    result = seed_example_test(ours, theirs, gold, metrics.accuracy, resamples=4000)
    assert result["difference"] == pytest.approx(5 / 30) and result["seed_variance"] == 0.0
    assert result["example_variance"] == pytest.approx(5 / 30 * 25 / 30 / 30, rel=0.15)


def test_power_at_no_difference_is_the_significance_level():
    # both tails of the two-sided test count: at a true difference of 0 the test rejects 5% of the time
    assert power(0.0, 1.0, 0.0, 5) == pytest.approx(0.05, abs=1e-12)
    assert power(0.0, 1.0, 0.0, 5, alpha=0.01) == pytest.approx(0.01, abs=1e-12)


def test_the_detectable_difference_is_exact_at_any_scale_and_follows_alpha():
    # the root of power(d) = 80% to float precision, even where the scores' variance is tiny
    tiny = detectable_difference(1e-12, 0.0, 5)
    assert power(tiny, 1e-12, 0.0, 5) == pytest.approx(0.8, abs=1e-9)
    from statsmodels.stats.power import TTestPower

    for alpha in (0.05, 0.01):
        assert detectable_difference(4.0, 0.0, 10, alpha=alpha) == pytest.approx(
            2.0 * TTestPower().solve_power(nobs=10, alpha=alpha, power=0.8), rel=1e-5)


@pytest.mark.parametrize("seed_variance, example_variance, pairs", [
    (1.0, 0.0, 1), (math.nan, 0.0, 5), (1.0, math.nan, 5), (math.inf, 0.0, 5)])
def test_without_two_pairs_or_finite_variances_nothing_is_detectable(seed_variance, example_variance, pairs):
    assert math.isnan(detectable_difference(seed_variance, example_variance, pairs))


def test_two_pairs_are_enough_to_size_a_test():
    # t_{0.975, 1} = 12.706: two pairs detect only a difference many standard errors wide, but one they do
    from statsmodels.stats.power import TTestPower

    assert detectable_difference(1.0, 0.0, 2) == pytest.approx(
        TTestPower().solve_power(nobs=2, alpha=0.05, power=0.8), rel=1e-5)
    assert seeds_needed(100.0, 1.0, 0.0) == 2
    assert seed_interval(1.0, 1.0, 2) == pytest.approx((1 - 12.706205 * math.sqrt(1.5), 1 + 12.706205 * math.sqrt(1.5)))


def test_the_planner_counts_up_to_its_limit_and_follows_alpha():
    # effect 1 needs 10 pairs at alpha 0.05 (G*Power), 16 at alpha 0.01 (statsmodels' TTestPower: 15.08)
    assert seeds_needed(2.0, 4.0, 0.0, most=10) == 10 and seeds_needed(2.0, 4.0, 0.0, most=9) is None
    assert seeds_needed(2.0, 4.0, 0.0, alpha=0.01) == 16


def test_the_seed_interval_scales_with_the_spread():
    low, high = seed_interval(2.0, 2.0, 3)
    assert (low, high) == pytest.approx((2 - 4.302653 * 2 * math.sqrt(4 / 3), 2 + 4.302653 * 2 * math.sqrt(4 / 3)))
    assert all(math.isnan(v) for v in seed_interval(math.inf, 1.0, 3))  # a diverged mean has no interval


def test_the_dev_set_floor_grows_with_the_root_of_the_example_part():
    assert dev_set_floor(4.0) == pytest.approx(2 * 2.801585, abs=1e-6)


def test_the_equivalence_test_without_variance_or_margin():
    # no standard error: the difference is exact, so it is within the margin or not (at the margin: not within)
    assert equivalence_p(0.3, 0.0, 4, 0.5) == 0.0
    assert equivalence_p(0.5, 0.0, 4, 0.5) == 1.0 and equivalence_p(-0.6, 0.0, 4, 0.5) == 1.0
    # no margin, or no finite standard error: no test
    assert math.isnan(equivalence_p(0.0, 0.5, 4, 0.0)) and math.isnan(equivalence_p(0.0, math.inf, 4, 1.0))


def test_holm_takes_tests_that_could_not_be_made_as_none_too():
    adjusted = holm([0.01, None, 0.02])  # a p-value read back from JSON
    assert adjusted[0] == pytest.approx(0.02) and math.isnan(adjusted[1]) and adjusted[2] == pytest.approx(0.02)


def test_a_mark_needs_p_below_the_significance_level():
    assert marks(0.05) == "" and marks(0.0499) == "*"


def test_accuracys_example_part_in_closed_form_is_what_the_bootstrap_estimates():
    """For a mean over examples the bootstrap's variances are var(d) / N: the closed form equals a large bootstrap's
    estimate within its own noise, and is the same number on every call (no resampling)."""
    rng = np.random.default_rng(3)
    gold = rng.integers(0, 2, 800)
    ours = {s: np.where(rng.random(800) < 0.8, gold, 1 - gold) for s in range(1, 5)}
    theirs = {s: np.where(rng.random(800) < 0.75, gold, 1 - gold) for s in range(1, 5)}
    exact = seed_example_test(ours, theirs, gold, metrics.accuracy, per_example=metrics.PER_EXAMPLE["accuracy"])
    sampled = seed_example_test(ours, theirs, gold, metrics.accuracy, resamples=20_000)
    assert exact["difference"] == sampled["difference"] and exact["seed_variance"] == sampled["seed_variance"]
    assert exact["example_variance"] == pytest.approx(sampled["example_variance"], rel=0.1)
    # by hand: the per-example differences' population variance over N, averaged over seeds and of the seed mean
    d = np.stack([(ours[s] == gold).astype(float) - (theirs[s] == gold) for s in range(1, 5)])
    each, averaged = np.mean(np.var(d, axis=1)) / 800, np.var(d.mean(axis=0)) / 800
    assert exact["example_variance"] == pytest.approx(max(0.0, (4 * averaged - each) / 3))


def test_pooled_seed_variance_weights_each_estimate_by_its_degrees_of_freedom_and_skips_those_without_one():
    from kdflow.core.statistics import pooled_seed_variance

    # 4 pairs (3 df) at 2.0 and 2 pairs (1 df) at 6.0: (3 x 2 + 1 x 6) / 4 = 3.0
    assert pooled_seed_variance([2.0, 6.0, math.nan, 9.0], [4, 2, 5, 1]) == (3.0, 4)
    pooled, df = pooled_seed_variance([math.nan], [1])
    assert math.isnan(pooled) and df == 0


def test_the_jackknife_of_a_mean_is_its_closed_form_times_n_over_n_minus_1_and_draws_nothing():
    rng = np.random.default_rng(5)
    gold = rng.integers(0, 2, 300)
    ours = {s: np.where(rng.random(300) < 0.8, gold, 1 - gold) for s in range(1, 4)}
    theirs = {s: np.where(rng.random(300) < 0.7, gold, 1 - gold) for s in range(1, 4)}
    exact = seed_example_test(ours, theirs, gold, metrics.accuracy, per_example=metrics.PER_EXAMPLE["accuracy"])
    jackknifed = seed_example_test(ours, theirs, gold, metrics.accuracy)  # no per-example form given
    assert (jackknifed["example_method"], jackknifed["resamples"]) == ("jackknife", None)
    assert jackknifed["example_variance"] == pytest.approx(exact["example_variance"] * 300 / 299, rel=1e-9)
    assert seed_example_test(ours, theirs, gold, metrics.accuracy, seed=7) == jackknifed  # no draws to seed


def test_the_jackknife_of_a_correlation_is_what_a_large_bootstrap_estimates():
    """STS-B's Pearson correlation on simulated scores: the jackknife's example part agrees with 20,000 resamples'
    within the bootstrap's own noise; a dev set larger than JACKKNIFE_EXAMPLES keeps the bootstrap."""
    rng = np.random.default_rng(11)
    gold = rng.uniform(0, 5, 400)
    own, other = rng.normal(0, 0.8, 400), rng.normal(0, 0.8, 400)  # each configuration's way with each example
    ours = {s: gold + own + rng.normal(0, 0.3, 400) for s in range(1, 5)}
    theirs = {s: gold + other + rng.normal(0, 0.3, 400) for s in range(1, 5)}
    jackknifed = seed_example_test(ours, theirs, gold, metrics.pearson)
    sampled = seed_example_test(ours, theirs, gold, metrics.pearson, resamples=20_000)
    assert jackknifed["example_method"] == "jackknife" and sampled["example_method"] == "bootstrap"
    assert jackknifed["example_variance"] == pytest.approx(sampled["example_variance"], rel=0.05)
    big = rng.uniform(0, 5, JACKKNIFE_EXAMPLES + 1)
    assert seed_example_test({1: big, 2: big + 1}, {1: big, 2: big}, big, metrics.pearson)["example_method"] == \
        "bootstrap"


def test_leave_one_out_scores_the_metric_without_each_example_in_turn():
    rng = np.random.default_rng(2)
    gold, run = rng.normal(size=9), rng.normal(size=9)
    expected = [metrics.spearman(np.delete(run, i), np.delete(gold, i)) for i in range(9)]
    np.testing.assert_allclose(leave_one_out(metrics.spearman, run, gold, chunk=4), expected, rtol=1e-12)

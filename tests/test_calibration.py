"""The cost plan calibrated on the jobs that ran (kdflow.reporting.calibration, issue 34): the fit against
hand-computed factors, the prior's pull, the pooling of a rule family, the hours per paper table and their interval,
and the page."""

import math
import re

import numpy as np
import pandas as pd
import pytest
from conftest import REPO

from kdflow.reporting import calibration
from kdflow.reporting.calibration import (
    benchmarks_state, calibrate, finished_benchmarks, fit_factors, measured_seconds)
from kdflow.reporting.plan_pages import calibrated_document
from kdflow.workflow import results_paths as paths
from kdflow.workflow.dag_jobs import built_dag


def test_exact_data_give_back_the_factors_that_made_them():
    """Measured = 2 x start-up + 0.5 x floor + 4 x compute on jobs of varied parts: over 400 jobs, the prior's
    three pseudo-jobs hardly pull the fit."""
    rng = np.random.default_rng(0)
    np.testing.assert_allclose(fit_factors(many := rng.uniform(1, 10, size=(400, 3)), many @ [2.0, 0.5, 4.0]),
                               [2.0, 0.5, 4.0], rtol=0.05)


def test_the_fit_is_least_squares_with_one_pseudo_job_per_part():
    """Two jobs of start-up and compute (no floor: not fitted), measured 8 and 14 s. Rows (start-up, compute) ->
    seconds: (2, 2) -> 8, (2, 4) -> 14 and the pseudo-jobs at the mean sizes, (2, 0) -> 2, (0, 3) -> 3. Normal
    equations [[12, 12], [12, 29]] (a, c) = (48, 81), by hand: a = 35/17, c = 33/17 (both > 0: no bound active)."""
    np.testing.assert_allclose(fit_factors([[2.0, 0.0, 2.0], [2.0, 0.0, 4.0]], [8.0, 14.0]), [35 / 17, 1.0, 33 / 17],
                               rtol=1e-9)


def test_one_job_of_start_up_alone_meets_the_prior_halfway():
    """A single job planned at 2 s of start-up measured 4 s: one job against one pseudo-job at factor 1 of the same
    size, least squares gives (4 + 2) / (2 + 2) = 1.5; the parts it does not have keep factor 1."""
    np.testing.assert_allclose(fit_factors([[2.0, 0.0, 0.0]], [4.0]), [1.5, 1.0, 1.0])
    np.testing.assert_allclose(fit_factors([[2.0, 0.0, 0.0]], [4.0], prior_factors=(3.0, 1.0, 1.0)),
                               [(2 * 4 + 2 * 6) / 8, 1.0, 1.0])  # the prior at factor 3: (8 + 12) / 8


def test_a_part_too_small_to_measure_keeps_the_prior():
    """Start-up-bound jobs (compute 1% of their planned time) measured at 2x: the start-up takes it all, the compute
    factor stays the prior's instead of being fitted to noise (a FLOP rate of zero or infinity)."""
    parts = np.array([[5.0, 0.0, 0.05], [6.0, 0.0, 0.06], [4.0, 0.0, 0.04]])
    measured = 2 * parts[:, 0] + parts[:, 2]
    factors = fit_factors(parts, measured)
    assert factors[1:] == pytest.approx([1.0, 1.0]) and factors[0] == pytest.approx(2.0, rel=0.15)
    assert calibration.MIN_SHARE > 0.01


def jobs_frame(rows):
    """Plan jobs (results/plan_jobs.csv's columns) from (section, rule, family, device, start-up, floor, compute)."""
    frame = pd.DataFrame(rows, columns=["section", "rule", "family", "device", "startup_seconds", "floor_seconds",
                                        "compute_seconds"])
    return frame.assign(task="sst2", layers=1, precision=np.where(frame.device == "cpu", "fp32", "bf16"), gpu_share=1.0,
                        seconds=frame[["startup_seconds", "floor_seconds", "compute_seconds"]].sum(axis=1),
                        benchmark=[paths.benchmark(f"job{i}") for i in range(len(frame))])


def test_paper_tables_get_hours_spent_and_left_and_an_unmeasured_family_borrows_its_rule_familys_factors():
    """Two GPU training groups (transformer, LSTM) and a CPU table job. Four transformer students of table A ran at
    3x their plan. The rule family's pooled fit on the GPU is the prior of the transformer group's fit; the LSTM
    group, none of whose jobs ran, is priced at the pooled factors; the CPU table job, none of whose rule family
    ran, at the plan's."""
    rows = [("a", "distill_student", "transformer", "H100", 10.0, 0.0, 50.0 + i) for i in range(6)]
    rows += [("b", "distill_student", "lstm", "H100", 10.0, 0.0, 20.0) for _ in range(3)]
    rows += [("b", "paper_table", "none", "cpu", 2.0, 0.0, 0.0)]
    jobs = jobs_frame(rows)
    measured = pd.Series([3 * jobs.seconds[i] if i < 4 else math.nan for i in range(len(jobs))])
    per_job, figures, progress = calibrate(jobs, measured, {"Table A": ["a"], "Table B": ["b"]})
    # By hand. Start-up is 40 of the 246 planned seconds of the jobs that ran (16% < MIN_SHARE): it keeps factor
    # 1, as does the absent floor. The compute factor c fits compute x c = measured - 10 = 20 + 3 compute (compute
    # 50-53) and the prior's pseudo-job, the mean compute 51.5 at the prior's factor p:
    # c = (sum compute (20 + 3 compute) + 51.5^2 p) / (sum compute^2 + 51.5^2) = (35962 + 2652.25 p) / 13266.25.
    # The pooled fit (p = 1) is the prior of the transformer group's.
    pooled = (35962 + 2652.25) / 13266.25
    transformer = (35962 + 2652.25 * pooled) / 13266.25
    assert (pooled, transformer) == pytest.approx((2.91071, 3.29271), abs=1e-5)
    np.testing.assert_allclose(per_job.calibrated_seconds, [*(10 + (50 + i) * transformer for i in range(6)),
                                                            *[10 + 20 * pooled] * 3, 2.0], rtol=1e-9)
    factors = figures.set_index("family")
    assert factors.startup_factor["transformer"] == factors.floor_factor["transformer"] == 1.0
    assert factors.flop_rate_factor["transformer"] == pytest.approx(1 / transformer)
    table_a, table_b, everything = (progress.set_index("paper_table").loc[name] for name in
                                    ("Table A", "Table B", "all jobs"))
    assert (table_a.done, table_a.jobs, table_b.done, everything.done, everything.jobs) == (4, 6, 0, 4, 10)
    assert table_a.gpu_hours_spent == pytest.approx(measured[:4].sum() / 3600)
    assert table_a.gpu_hours_left == pytest.approx(per_job.calibrated_seconds[4:6].sum() / 3600)
    assert table_b.gpu_hours_left == pytest.approx(per_job.calibrated_seconds[6:9].sum() / 3600)
    assert table_b.cpu_hours_left == pytest.approx(2 / 3600) and everything.cpu_hours_spent == 0
    assert table_a.gpu_hours_left_low <= table_a.gpu_hours_left <= table_a.gpu_hours_left_high
    sources = figures.set_index("family").figures
    assert sources["transformer"] == "fitted on 4 jobs"
    assert sources["lstm"] == "its rule family's on H100 (4 jobs)" and sources["none"] == "plan"
    page = calibrated_document(progress, figures).markdown()
    assert "4 of 10 jobs have run" in page and "nan" not in page.lower(), page
    assert re.search(r"\| lstm \|.*\| – \| its rule family's", page), page  # measured over planned: none ran


def test_the_interval_widens_with_the_spread_of_the_jobs_that_ran_and_holds_the_point():
    rows = [("a", "distill_student", "transformer", "cpu", 5.0, 0.0, 10.0) for _ in range(40)]
    jobs = jobs_frame(rows)
    rng = np.random.default_rng(1)
    for spread in (0.05, 0.3):
        measured = pd.Series([15.0 * rng.lognormal(0, spread) if i < 20 else math.nan for i in range(40)])
        _, _, progress = calibrate(jobs, measured, {"A": ["a"]})
        row = progress.iloc[0]
        assert row.cpu_hours_left_low < row.cpu_hours_left < row.cpu_hours_left_high
        width = (row.cpu_hours_left_high - row.cpu_hours_left_low) / row.cpu_hours_left
        assert width < 0.1 if spread == 0.05 else width > 0.15, (spread, width)


def test_before_any_job_ran_the_plan_is_the_calibrated_plan(tmp_path):
    jobs = jobs_frame([("a", "distill_student", "transformer", "H100", 3.0, 1.0, 8.0)])
    measured = measured_seconds(jobs, root=tmp_path)
    assert measured.isna().all()
    per_job, figures, progress = calibrate(jobs, measured, {"A": ["a"]})
    assert per_job.calibrated_seconds.tolist() == [12.0] and figures.figures.tolist() == ["plan"]
    assert progress.iloc[0].gpu_hours_left_low == progress.iloc[0].gpu_hours_left_high == pytest.approx(12 / 3600)
    assert "No job of the plan has run yet" in calibrated_document(progress, figures).markdown()


def test_benchmark_files_give_cpu_time_to_cpu_jobs_and_the_wall_clock_to_gpu_jobs(tmp_path):
    jobs = jobs_frame([("a", "distill_student", "transformer", "cpu", 1.0, 0.0, 0.0),
                       ("a", "distill_student", "transformer", "H100", 1.0, 0.0, 0.0)])
    header = "s\th:m:s\tmax_rss\tmax_vms\tmax_uss\tmax_pss\tio_in\tio_out\tmean_load\tcpu_time\n"
    for path in jobs.benchmark:
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(header + "8.0\t0:00:08\t100\t100\t100\t100\t0\t0\t50\t5.0\n")
    (tmp_path / paths.benchmark("plan")).write_text(header)
    assert measured_seconds(jobs, root=tmp_path).tolist() == [5.0, 8.0]
    assert finished_benchmarks(tmp_path) == sorted(jobs.benchmark)  # the plan's own file is no input
    state = benchmarks_state(tmp_path)
    (tmp_path / paths.benchmark("plan")).write_text(header * 2)
    assert benchmarks_state(tmp_path) == state
    (tmp_path / jobs.benchmark[0]).unlink()
    assert benchmarks_state(tmp_path) != state


@pytest.mark.slow  # it builds a DAG through Snakemake (about 15 s)
def test_the_calibrated_plan_builds_beside_another_configs_finished_jobs(tmp_path):
    """`make plan` after `make demo` in one folder: a demo job's benchmark file (a transfer set config.yaml does not
    define) once made Snakemake build that job under config.yaml, and its input function failed (KeyError)."""
    for name in ("demo", "reference"):
        (tmp_path / name).symlink_to(REPO / name)
    demo_job = tmp_path / paths.benchmark("build_transfer_set/sst2/unlabelled_augmented")
    demo_job.parent.mkdir(parents=True)
    demo_job.write_text("s\n1.0\n")
    with built_dag([REPO / "config.yaml"], targets=[paths.PLAN_CALIBRATED_CSV], directory=tmp_path) as workflow:
        assert {job.rule.name for job in workflow.dag.jobs} == {"plan", "plan_calibrated"}

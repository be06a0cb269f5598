"""The cost plan calibrated on the jobs that ran (issue 34): the plan's figures refit from Snakemake's benchmark files,
the remaining jobs priced with them, with an interval.

The plan (:mod:`kdflow.workflow.cost_plan`) prices a job as three parts: its rule's start-up, a per-layer floor per
batch, and its FLOPs at a model family's rate. Here each part gets a factor, fitted per group of jobs that share
how they run: the rule family (:data:`RULE_FAMILIES`: training, inference, sampling, probing, tables and figures),
the model family (transformer, LSTM, CNN, ...) and the device and precision. A job's calibrated seconds are
``a * startup + b * floor + c * compute``; ``a`` scales the start-ups, ``b`` the per-layer floor and ``1 / c`` the
FLOP rate, so the factors are the refit figures. They are fitted by non-negative least squares
(scipy.optimize.nnls) on the group's measured jobs: CPU seconds for a CPU job (the plan prices a CPU job as one
thread alone on its core), the wall clock for a GPU job.

The prior counts as one job per figure: each part present in the group adds a row that asks for factor 1 at the
part's mean size. A group with many measured jobs is priced by them; one with a few is pulled towards the plan; a
group with none takes its rule family's on the device, or keeps the plan's. The interval of the hours left is a
predictive bootstrap (:func:`resampled_left`): the fit's uncertainty and the spread of single jobs about it. It
cannot hold what the jobs that ran do not show: a rule family or device no job of which has run is priced by the
plan alone.
"""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd

from kdflow.reporting.runtime_table import read_benchmark
from kdflow.workflow.cost_plan import charged_share
from kdflow.workflow.job_work import SECTIONS
from kdflow.workflow.results_paths import BENCHMARKS

RULE_FAMILIES = {
    **dict.fromkeys(["finetune_teacher", "train_pseudo_heads", "finetune_generator", "distill_student"], "training"),
    **dict.fromkeys(["evaluate_teacher", "evaluate_pseudo_heads", "compute_teacher_signals", "evaluate_generator",
                     "compute_assistant_signals", "encode_probing_tasks", "measure_inference"], "inference"),
    "sample_transfer_shard": "sampling",
    "probe_model": "probing",
}
OTHER_RULES = "tables and figures"  # every other rule: its start-up alone
PLAN_RULES = {rule for rule, section in SECTIONS.items() if section == "plan"}  # neither fitted nor counted
PARTS = ("startup_seconds", "floor_seconds", "compute_seconds")
GROUP = ["rule_family", "family", "device", "precision"]
POOLED = ["rule_family", "device", "precision"]
MIN_SHARE = 0.2  # the least share of the measured jobs' planned seconds a part needs to be fitted
RESAMPLES = 200
CONFIDENCE = 0.9


def finished_benchmarks(root=".") -> list[str]:
    """The benchmark files under ``root`` of the jobs that have run, but the cost plan's own."""
    found = Path(root, BENCHMARKS).rglob("*.tsv")
    return sorted(str(path.relative_to(root)) for path in found if path.stem not in PLAN_RULES)


def benchmarks_state(root=".") -> str:
    """A digest of :func:`finished_benchmarks` and their modification times: rule plan_calibrated's param, taken
    when the DAG is built, so that a job finished since (a new file, or a newer one) builds the page again. A param,
    not inputs: as inputs Snakemake would build the job behind each file under the current config, and a file of
    another config's job (the demo's, in the same folder) names wildcards this config cannot resolve."""
    state = [(path, Path(root, path).stat().st_mtime_ns) for path in finished_benchmarks(root)]
    return hashlib.sha256(json.dumps(state).encode()).hexdigest()[:16]


def measured_seconds(jobs: pd.DataFrame, root=".") -> pd.Series:
    """Per job of the plan (results/plan_jobs.csv), the seconds its benchmark file measured, NaN for a job that has
    not run: CPU seconds for a CPU job, the wall clock for a GPU job. The plan's own jobs (:data:`PLAN_RULES`) count
    as not run: building the DAG is not a start-up the other jobs share."""
    values = []
    for job in jobs.itertuples(index=False):
        path = Path(root) / job.benchmark
        if job.rule in PLAN_RULES or not path.exists():
            values.append(math.nan)
            continue
        measured = read_benchmark(path)
        values.append(measured["cpu_seconds"] if job.device == "cpu" else measured["seconds"])
    return pd.Series(values, index=jobs.index, dtype=float)


def fit_factors(parts: np.ndarray, measured: np.ndarray, prior_factors=(1.0, 1.0, 1.0)) -> np.ndarray:
    """The factors of the three parts (start-up, floor, compute) that best turn ``parts`` (jobs x 3 seconds, as the
    plan prices them) into ``measured`` (seconds), non-negative, with ``prior_factors`` (the plan's: 1) as one
    pseudo-job per part fitted.
    A part that makes less than :data:`MIN_SHARE` of the jobs' planned seconds keeps factor 1: the jobs cannot
    tell its cost from the noise of the larger parts (the demo's start-up-bound jobs would price a GPU's FLOPs
    at nothing)."""
    from scipy.optimize import nnls  # imported here: the plan's other jobs need no scipy at start-up

    parts = np.asarray(parts, dtype=np.float64).reshape(-1, len(PARTS))
    measured = np.asarray(measured, dtype=np.float64)
    share = parts.sum(axis=0) / max(parts.sum(), 1e-12)
    fitted = share >= MIN_SHARE
    factors = np.array(prior_factors, dtype=np.float64)
    if not fitted.any():
        return factors
    columns = parts[:, fitted]
    prior = np.diag(columns.mean(axis=0))  # one pseudo-job per part: its mean size, at the prior's figure
    system = np.vstack([columns, prior])
    target = np.concatenate([measured - parts[:, ~fitted] @ factors[~fitted], prior.diagonal() * factors[fitted]])
    factors[fitted] = nnls(system, target)[0]
    return factors


class Groups:
    """The plan's jobs by group (:data:`GROUP`) and pooled group (:data:`POOLED`), as integer codes: the fit runs
    once for the point estimate and once per bootstrap resample."""

    def __init__(self, jobs: pd.DataFrame):
        codes, self.keys = pd.factorize(pd.Series(list(jobs[GROUP].itertuples(index=False, name=None))))
        self.code = np.asarray(codes)
        pooled, self.pooled_keys = pd.factorize(pd.Series([pooled_key(key) for key in self.keys]))
        self.pooled_of = np.asarray(pooled)
        self.parts = jobs[list(PARTS)].to_numpy(dtype=np.float64)

    def factors(self, rows: np.ndarray, measured: np.ndarray) -> np.ndarray:
        """(groups x 3) factors fitted on the jobs at positions ``rows`` with their ``measured`` seconds: per group,
        on its own jobs with its pooled group's fit as the prior; the pooled fit alone for a group without measured
        jobs (its jobs start and run on the device as their rule family's others do); the plan's (1) where its
        pooled group has no measured job either."""
        groups, pooled = self.code[rows], self.pooled_of[self.code[rows]]
        pooled_fit = {p: fit_factors(self.parts[rows[pooled == p]], measured[pooled == p]) for p in np.unique(pooled)}
        factors = np.ones((len(self.keys), len(PARTS)))
        for g in range(len(self.keys)):
            prior = pooled_fit.get(self.pooled_of[g])
            if prior is not None:
                mine = groups == g
                factors[g] = fit_factors(self.parts[rows[mine]], measured[mine], prior) if mine.any() else prior
        return factors

    def seconds(self, factors: np.ndarray) -> np.ndarray:
        """Each job's seconds with its group's factors."""
        return (self.parts * factors[self.code]).sum(axis=1)


def pooled_key(key: tuple) -> tuple:
    return tuple(value for name, value in zip(GROUP, key) if name in POOLED)


def with_groups(jobs: pd.DataFrame) -> pd.DataFrame:
    return jobs.assign(rule_family=jobs.rule.map(RULE_FAMILIES).fillna(OTHER_RULES))


def calibrate(jobs: pd.DataFrame, measured: pd.Series, sections: dict[str, list[str]], seed: int = 0
              ) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """The plan's jobs (``jobs``: results/plan_jobs.csv) calibrated on the ``measured`` seconds of those that ran
    (:func:`measured_seconds`): (per job, its calibrated seconds; per group, its figures; per paper table
    (``sections``: its experiments, :func:`kdflow.workflow.cost_plan.paper_table_experiments`) and the whole plan,
    the jobs done, hours spent, hours left and their interval)."""
    jobs = with_groups(jobs.reset_index(drop=True))
    measured = pd.Series(np.asarray(measured, dtype=np.float64), index=jobs.index)
    groups = Groups(jobs)
    ran = np.flatnonzero(measured.notna().to_numpy())
    factors = groups.factors(ran, measured.to_numpy()[ran])
    per_job = jobs.assign(measured_seconds=measured, calibrated_seconds=groups.seconds(factors))
    rows = progress_rows(jobs, sections)
    samples = resampled_left(groups, jobs, measured, rows, factors, seed)
    return per_job, figures(jobs, measured, groups, factors), progress(per_job, rows, samples)


def figures(jobs: pd.DataFrame, measured: pd.Series, groups: Groups, factors: np.ndarray) -> pd.DataFrame:
    """Per group of the plan, the jobs measured and the refit figures as factors of the plan's: start-up x a,
    per-layer floor x b, FLOP rate / c; the measured over planned seconds of its jobs that ran, and where its
    figures come from (fitted on its jobs, its rule family's on the device, or the plan's)."""
    ran = measured.notna().to_numpy()
    rows = []
    for g, key in enumerate(groups.keys):
        mine = groups.code == g
        family_ran = int(((groups.pooled_of[groups.code] == groups.pooled_of[g]) & ran).sum())
        measured_jobs = int((mine & ran).sum())
        a, b, c = factors[g]
        rows.append({**dict(zip(GROUP, key)), "jobs": int(mine.sum()), "measured_jobs": measured_jobs,
                     "startup_factor": a, "floor_factor": b, "flop_rate_factor": 1 / c if c > 0 else math.inf,
                     "measured_over_planned": (measured[mine & ran].sum() / jobs.seconds[mine & ran].sum()
                                               if measured_jobs else math.nan),
                     "figures": (f"fitted on {measured_jobs} jobs" if measured_jobs else
                                 f"its rule family's on {key[2]} ({family_ran} jobs)" if family_ran else "plan")})
    return pd.DataFrame(rows)


def progress_rows(jobs: pd.DataFrame, sections: dict[str, list[str]]) -> dict[str, np.ndarray]:
    """The rows of :func:`progress`: each paper table's jobs (``sections``: its experiments), and all jobs."""
    return {**{name: jobs.section.isin(experiments).to_numpy() for name, experiments in sections.items()},
            "all jobs": np.ones(len(jobs), dtype=bool)}


def left_hours(rows: dict[str, np.ndarray], left: np.ndarray, on_gpu: np.ndarray, seconds: np.ndarray) -> np.ndarray:
    """(rows x {GPU, CPU}) hours of the jobs ``left``, priced at ``seconds`` (charged:
    :func:`kdflow.workflow.cost_plan.charged_share`)."""
    hours = np.where(left, seconds, 0.0) / 3600
    return np.array([[hours[row & on_gpu].sum(), hours[row & ~on_gpu].sum()] for row in rows.values()])


def resampled_left(groups: Groups, jobs: pd.DataFrame, measured: pd.Series, rows: dict[str, np.ndarray],
                   factors: np.ndarray, seed: int) -> np.ndarray:
    """(resamples x rows x {GPU, CPU}) hours left, a predictive bootstrap: in each resample the factors are refit
    on a stratified resample of the jobs that ran, and each remaining job's seconds are scaled by a ratio
    (measured over calibrated, over its mean) drawn from the jobs that ran in its rule family on its device, so
    that the interval holds the spread of single jobs as well as that of the fit. scipy.stats.bootstrap has no
    stratified resampling, hence the loop: within each group, as many jobs as it has, drawn with replacement."""
    rng = np.random.default_rng(seed)
    values = measured.to_numpy()
    done = ~np.isnan(values)
    if not done.any():
        return np.empty((0, len(rows), 2))
    ran = np.flatnonzero(done)
    members = [ran[groups.code[ran] == g] for g in np.unique(groups.code[ran])]
    ratios = values / groups.seconds(factors)
    pooled_ran = groups.pooled_of[groups.code[ran]]
    # Ratios about their mean: their spread, not the pull of the prior that the point estimate keeps.
    pools = {p: ratios[ran[pooled_ran == p]] / ratios[ran[pooled_ran == p]].mean() for p in np.unique(pooled_ran)}
    left = np.flatnonzero(~done)
    left_pools = [pools.get(groups.pooled_of[groups.code[job]], np.ones(1)) for job in left]
    on_gpu = (jobs.device != "cpu").to_numpy()
    samples = []
    for _ in range(RESAMPLES):
        drawn = np.concatenate([rng.choice(rows_, len(rows_)) for rows_ in members])
        seconds = groups.seconds(groups.factors(drawn, values[drawn]))
        seconds[left] *= [rng.choice(pool) for pool in left_pools]
        samples.append(left_hours(rows, ~done, on_gpu, seconds * charged_share(jobs)))
    return np.array(samples)


def progress(per_job: pd.DataFrame, rows: dict[str, np.ndarray], samples: np.ndarray) -> pd.DataFrame:
    """Per paper table and for the whole plan (``all jobs``): jobs, jobs done, GPU- and CPU-hours spent (measured),
    left (calibrated) and the interval of the hours left (:data:`CONFIDENCE`, percentiles of the bootstrap; the
    point where nothing ran yet)."""
    done = per_job.measured_seconds.notna().to_numpy()
    on_gpu = (per_job.device != "cpu").to_numpy()
    left = left_hours(rows, ~done, on_gpu, per_job.calibrated_seconds.to_numpy() * charged_share(per_job))
    tail = (1 - CONFIDENCE) / 2
    low, high = ((np.quantile(samples, tail, axis=0), np.quantile(samples, 1 - tail, axis=0)) if len(samples)
                 else (left, left))
    spent = np.nan_to_num(per_job.measured_seconds.to_numpy()) * charged_share(per_job) / 3600
    table = []
    for i, (name, row) in enumerate(rows.items()):
        table.append({"paper_table": name, "jobs": int(row.sum()), "done": int((row & done).sum()),
                      "gpu_hours_spent": spent[row & on_gpu].sum(), "gpu_hours_left": left[i, 0],
                      "gpu_hours_left_low": low[i, 0], "gpu_hours_left_high": high[i, 0],
                      "cpu_hours_spent": spent[row & ~on_gpu].sum(), "cpu_hours_left": left[i, 1],
                      "cpu_hours_left_low": low[i, 1], "cpu_hours_left_high": high[i, 1]})
    return pd.DataFrame(table)

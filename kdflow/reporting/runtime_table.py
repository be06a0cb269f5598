"""Thesis Table 4.5 (Sučík 2020, §4.4): the runtime of every step of the pipeline that leads to the thesis's
students, kdflow's measured beside the thesis's.

kdflow's numbers are the wall-clock seconds of Snakemake's benchmark files (column ``s``; ``max_rss`` is the peak
resident memory in MB) of the step's jobs, as :func:`kdflow.workflow.runtime_jobs.runtime_jobs` lists them. A step's
hours are summed over its jobs (a task's sampling shards run in parallel: their sum is GPU-hours, the longest shard
the wall-clock time of a fully parallel run) and, per run, divided by its runs: a student's grid points and seeds,
each a repetition of the one run the thesis timed.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path

import pandas as pd

from kdflow.core.documents import Document, Heading, Paragraph, Table
from kdflow.reporting.paper_tables import _latex
from kdflow.workflow.results_paths import BENCHMARKS, job_usage
from kdflow.workflow.runtime_jobs import PIPELINE_STEPS

TITLE = "Sučík (2020) Table 4.5: runtimes of the pipeline's steps (hours)"
COLUMNS = ["step", "task", "kdflow_rule", "kdflow_jobs", "kdflow_runs", "kdflow_hours", "kdflow_hours_per_run",
           "kdflow_longest_job_hours", "kdflow_peak_rss_gb", "thesis_hours", "thesis_hardware", "thesis_note"]


def read_benchmark(path) -> dict:
    """The wall-clock seconds, peak memory (MB) and CPU seconds (user and system, of the job's processes) of one
    Snakemake benchmark file; with ``repeat`` several rows, the mean seconds and the largest peak. Snakemake writes
    ``-`` where it measured no memory (a job shorter than its first sample). The CPU seconds are the job's own
    measure where its script left one (:func:`kdflow.workflow.results_paths.job_usage`; ``cpu_measured``
    "job"), Snakemake's sampled lower bound otherwise ("sampled")."""
    frame = pd.read_csv(path, sep="\t", na_values=["-"])
    measured = {"seconds": float(frame["s"].mean()), "max_rss_mb": float(frame["max_rss"].max()),
                "cpu_seconds": float(frame["cpu_time"].mean()), "cpu_measured": "sampled"}
    usage = job_usage(path)
    if usage.exists() and len(frame) == 1:
        measured.update(cpu_seconds=json.loads(usage.read_text())["cpu_seconds"], cpu_measured="job")
    return measured


def runtime_table(reference: pd.DataFrame, jobs: Sequence[Mapping], benchmarks: Sequence[Mapping]) -> pd.DataFrame:
    """One row per step and task, of kdflow's ``jobs`` (:func:`kdflow.workflow.runtime_jobs.runtime_jobs`, each with
    its :func:`read_benchmark` in ``benchmarks``) or of the thesis's ``reference`` (reference/thesis_runtimes.csv:
    step, task, runtime_hours, hardware, note), steps in :func:`step_order` and tasks in the reference's order; a
    side without the row has NaN there."""
    if len(jobs) != len(benchmarks):
        raise ValueError(f"{len(jobs)} jobs but {len(benchmarks)} benchmarks")
    measured = pd.DataFrame(list(jobs), columns=["step", "task", "rule", "run"]).join(
        pd.DataFrame(list(benchmarks), columns=["seconds", "max_rss_mb"]))
    kdflow = measured.groupby(["step", "task"], sort=False).agg(
        kdflow_rule=("rule", "first"), kdflow_jobs=("rule", "size"), kdflow_runs=("run", "nunique"),
        seconds=("seconds", "sum"), longest=("seconds", "max"), max_rss_mb=("max_rss_mb", "max"))
    hours = kdflow.seconds / 3600
    kdflow = kdflow.assign(kdflow_hours=hours, kdflow_hours_per_run=hours / kdflow.kdflow_runs,
                           kdflow_longest_job_hours=kdflow.longest / 3600, kdflow_peak_rss_gb=kdflow.max_rss_mb / 1024)
    thesis = reference.rename(columns={"runtime_hours": "thesis_hours", "hardware": "thesis_hardware",
                                       "note": "thesis_note"}).set_index(["step", "task"])
    table = kdflow.join(thesis, how="outer")
    tasks = list(dict.fromkeys([*reference.task, *measured.task]))
    table = table.loc[sorted(table.index, key=lambda key: (step_order(key[0], reference), tasks.index(key[1])))]
    table = table.reset_index()
    table[["kdflow_jobs", "kdflow_runs"]] = table[["kdflow_jobs", "kdflow_runs"]].astype("Int64")
    return table[COLUMNS].reset_index(drop=True)


def step_order(step: str, reference: pd.DataFrame) -> tuple:
    """Where a step's rows go: the pipeline's steps as data flows (kdflow.workflow.runtime_jobs.PIPELINE_STEPS), then
    the reference's other steps (its student training) in its order, then any other step by name."""
    reference_steps = list(dict.fromkeys(reference.step))
    if step in PIPELINE_STEPS:
        return 0, PIPELINE_STEPS.index(step), step
    if step in reference_steps:
        return 1, reference_steps.index(step), step
    return 2, 0, step


def _hours(value) -> str:
    return "—" if pd.isna(value) else f"{value:.3g}"


def runtime_cells(table: pd.DataFrame) -> pd.DataFrame:
    """One row per step, one column per task: "kdflow (thesis)" hours per run, after the step's kdflow rule and
    the thesis's hardware; the thesis's tasks first, in its order."""
    tasks = list(dict.fromkeys([*table.task[table.thesis_hours.notna()], *table.task]))
    rows = []
    for step, group in table.groupby("step", sort=False):
        cells = {row.task: f"{_hours(row.kdflow_hours_per_run)} ({_hours(row.thesis_hours)})"
                 for row in group.itertuples()}
        rule, hardware = group.kdflow_rule.dropna(), group.thesis_hardware.dropna()
        rows.append([step, rule.iloc[0] if len(rule) else "—", hardware.iloc[0] if len(hardware) else "—",
                     *(cells.get(task, "") for task in tasks)])
    return pd.DataFrame(rows, columns=["step", "kdflow rule", "thesis hardware", *tasks])


def runtime_document(table: pd.DataFrame) -> Document:
    details = table.drop(columns=["thesis_hardware"]).copy()
    hours = [column for column in details.columns if column.endswith(("_hours", "_per_run", "_gb"))]
    details[hours] = details[hours].map(_hours)
    return Document(TITLE, [
        Paragraph("Each cell: kdflow (thesis), the wall-clock hours of one run of the step: kdflow's summed over "
                  "the step's jobs (a task's sampling shards, which run in parallel) and divided by its runs (a "
                  "student's grid points and seeds; the thesis timed one run). — : no value. kdflow's hours are "
                  f"from Snakemake's benchmark files ({BENCHMARKS}/), on the hardware the jobs ran on; kdflow's "
                  "own steps (data preparation, pseudo-heads, transfer-set assembly) have no thesis time."),
        Table(runtime_cells(table)),
        Heading("Per step and task"),
        Paragraph("kdflow_hours: the sum over the step's jobs (GPU-hours for GPU jobs); kdflow_longest_job_hours: "
                  "its longest job, the wall-clock time when all of them run at once; kdflow_peak_rss_gb: the "
                  "largest peak resident memory of a job. A job resumed from a checkpoint counts its last attempt."),
        Table(details),
    ])


def write_runtime_table(table: pd.DataFrame, csv_path, markdown_path, latex_path, html_path=None) -> None:
    table.to_csv(csv_path, index=False, float_format="%.6g")
    runtime_document(table).write(markdown_path, html_path)
    Path(latex_path).write_text(_latex(runtime_cells(table), TITLE))

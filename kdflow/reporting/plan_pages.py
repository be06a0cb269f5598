"""The cost plan as pages: totals, hours per paper table, and per section (an experiment, or a stage) and rule the
jobs, the work and the estimated hours, with where each throughput comes from (kdflow.workflow.cost_plan)."""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd

from kdflow.core.documents import Bullets, Document, Heading, Paragraph, Table
from kdflow.reporting.runtime_table import read_benchmark
from kdflow.workflow.cost_plan import START_UP_ONLY

TITLE = "Cost plan: the jobs of the config and their estimated hours, before the run"


def hours(value: float) -> str:
    return f"{value:,.0f}" if value >= 100 else f"{value:.3g}"


def short_list(names: str, most: int = 4) -> str:
    """A comma-separated list of names, or their count and common prefix when there are many (the exploration's)."""
    items = names.split(", ")
    return names if len(items) <= most else f"{len(items)} experiments {os.path.commonprefix(items)}*"


def totals(table: pd.DataFrame) -> dict[str, float]:
    """GPU-hours and jobs on a GPU, CPU-hours and jobs on the CPU."""
    gpu = table.device != "cpu"
    return {"gpu_hours": float(table.hours[gpu].sum()), "gpu_jobs": int(table.jobs[gpu].sum()),
            "cpu_hours": float(table.hours[~gpu].sum()), "cpu_jobs": int(table.jobs[~gpu].sum())}


def plan_document(table: pd.DataFrame, per_paper_table: pd.DataFrame, sizes: str) -> Document:
    """``table``: :func:`kdflow.workflow.cost_plan.plan_table`; ``per_paper_table``:
    :func:`kdflow.workflow.cost_plan.paper_table_hours`; ``sizes``: where the split sizes come from."""
    total = totals(table)
    gpus = sorted({f"{row.device} {row.precision}" for row in table.itertuples() if row.device != "cpu"})
    shown = table.assign(hours=table.hours.map(hours)).rename(columns={"hours": "hours (GPU-hours on a GPU)"})
    sources = sorted(set("; ".join(table.source).split("; ")) - {START_UP_ONLY})
    on_cpu = f"{hours(total['cpu_hours'])} CPU-hours (one thread, fp32)"
    summary = (f"{total['gpu_jobs'] + total['cpu_jobs']} jobs: {hours(total['gpu_hours'])} GPU-hours "
               f"({', '.join(gpus)}) for the {total['gpu_jobs']} jobs that ask for a GPU and {on_cpu} for the "
               f"{total['cpu_jobs']} others." if gpus else
               f"{total['cpu_jobs']} jobs, all on the CPU (the config's device): {on_cpu}.")
    return Document(TITLE, [
        Paragraph(f"{summary} Estimates, not measurements: see how they are made below."),
        Heading("Per paper table"),
        Paragraph("The hours of each paper table's experiments (config paper_tables; the thesis's exploration is "
                  "its own row). The teachers, transfer sets and probing they share are not included; tables of the "
                  "same experiments count them each."),
        Table(per_paper_table.assign(experiments=per_paper_table.experiments.map(short_list),
                                     gpu_hours=per_paper_table.gpu_hours.map(hours),
                                     cpu_hours=per_paper_table.cpu_hours.map(hours))),
        Heading("Per section and rule"),
        Paragraph("A section is an experiment or a stage of the pipeline. examples_x_epochs: training examples times "
                  "epochs; inferred: examples through a forward pass (dev evaluations, predictions, signals, "
                  "encodings); sampled_tokens: tokens generated; probe_examples_x_epochs: the SentEval probes' "
                  "examples times epochs over every layer."),
        Table(shown),
        Heading("How the estimate is made"),
        Bullets([
            "Jobs: the workflow's DAG under this config, as Snakemake builds it (kdflow/workflow/dag_jobs.py), each "
            "priced from its wildcards and params (kdflow/workflow/cost_plan.py).",
            f"Split sizes: {sizes}. Tokens per example: reference/task_sizes.csv (the mean padded length of a "
            "batch of 32; tools/make_task_sizes.py).",
            "Seconds of a job: its rule's start-up (reference/startup.csv), plus per kind of work its batches times "
            "a per-layer floor and its FLOPs (6 x non-embedding parameters x tokens to train, 2 x to infer) at the "
            "model family's achieved rate (reference/throughput.csv, benchmarks/plan_throughput.py).",
            *[f"Throughput: {source}" for source in sources],
        ]),
    ])


def write_plan(table: pd.DataFrame, per_paper_table: pd.DataFrame, sizes: str, csv_path, markdown_path,
               html_path=None) -> Document:
    table.to_csv(csv_path, index=False, float_format="%.6g")
    document = plan_document(table, per_paper_table, sizes)
    document.write(markdown_path, html_path)
    return document


def calibration(table: pd.DataFrame, benchmarks) -> pd.DataFrame:
    """Per rule, the plan's estimate (``table``: results/plan.csv) beside what the run took, summed over its jobs'
    Snakemake benchmark files under ``benchmarks`` (results/benchmarks/<rule>/...): wall-clock seconds and CPU
    seconds, and the ratio of each to the estimate. The plan estimates a job alone on its core; on a shared machine
    the wall clock also counts the waits for a core, CPU time does not. Rules without benchmark files (not run
    yet) are left out."""
    measured = {}
    for path in Path(benchmarks).rglob("*.tsv"):
        rule = path.relative_to(benchmarks).parts[0].removesuffix(".tsv")
        measured.setdefault(rule, []).append(read_benchmark(path))
    estimated = table.groupby("rule", sort=False).agg(jobs=("jobs", "sum"), hours=("hours", "sum"))
    rows = [{"rule": rule, "jobs": int(row.jobs), "measured_jobs": len(measured[rule]),
             "estimated_seconds": row.hours * 3600,
             "measured_seconds": sum(run["seconds"] for run in measured[rule]),
             "measured_cpu_seconds": sum(run["cpu_seconds"] for run in measured[rule])}
            for rule, row in estimated.iterrows() if rule in measured]
    frame = pd.DataFrame(rows, columns=["rule", "jobs", "measured_jobs", "estimated_seconds", "measured_seconds",
                                        "measured_cpu_seconds"])
    return frame.assign(wall_ratio=frame.measured_seconds / frame.estimated_seconds,
                        cpu_ratio=frame.measured_cpu_seconds / frame.estimated_seconds)

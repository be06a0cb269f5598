"""The cost plan as pages: totals, hours per paper table, and per section (an experiment, or a stage) and rule the
jobs, the work and the estimated hours, with where each throughput comes from (kdflow.workflow.cost_plan)."""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd

from kdflow.core.documents import Bullets, Code, Document, Heading, Paragraph, Table
from kdflow.reporting.runtime_table import read_benchmark
from kdflow.workflow.cost_plan import START_UP_ONLY
from kdflow.workflow.results_paths import BENCHMARKS, PILOT_CSV, PLAN_CALIBRATED_MD, PLAN_CSV, PLAN_MD

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


def plan_document(table: pd.DataFrame, per_paper_table: pd.DataFrame, sizes: str, pilot: str = "",
                  sharing: dict[str, int] | None = None) -> Document:
    """``table``: :func:`kdflow.workflow.cost_plan.plan_table`; ``per_paper_table``:
    :func:`kdflow.workflow.cost_plan.paper_table_hours`; ``sizes``: where the split sizes come from; ``pilot``:
    :func:`kdflow.reporting.pilot.pilot_summary`; ``sharing``: the config's ``gpu_sharing``."""
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
        *([Paragraph([f"{pilot} Its jobs are in ", Code(PILOT_CSV), "; ", Code("make pilot"),
                      " runs them, then refits this plan on them (", Code(PLAN_CALIBRATED_MD), ")."])]
          if pilot else []),
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
            *([f"Shared GPUs: the students of the families "
               f"{', '.join(f'{family} (K = {k})' for family, k in sharing.items())} run K jobs at once on one "
               "GPU (config gpu_sharing; python -m kdflow.workflow.gpu_packs submits them in packs), and each is "
               "charged its GPU time over the speedup measured for K such jobs against one alone "
               "(reference/gpu_sharing.csv, benchmarks/gpu_sharing.py), or a K-th of it where none was measured."]
              if sharing and any(k > 1 for k in sharing.values()) else []),
        ]),
    ])


def write_plan(table: pd.DataFrame, per_paper_table: pd.DataFrame, sizes: str, csv_path, markdown_path,
               html_path=None, pilot: str = "", sharing: dict[str, int] | None = None) -> Document:
    table.to_csv(csv_path, index=False, float_format="%.6g")
    document = plan_document(table, per_paper_table, sizes, pilot, sharing)
    document.write(markdown_path, html_path)
    return document


# results/plan_jobs.csv: each job's estimate and its parts, the benchmark file it writes when it runs.
JOB_COLUMNS = ["section", "rule", "task", "family", "layers", "device", "precision", "gpu_share", "seconds",
               "startup_seconds", "floor_seconds", "compute_seconds", "benchmark"]
MEASURED_TITLE = "Cost plan against the run: planned and measured hours of the jobs that ran"


def plan_jobs(estimated: pd.DataFrame) -> pd.DataFrame:
    """The plan's jobs one by one (:func:`kdflow.workflow.cost_plan.cost_plan`), with the benchmark file each job
    writes when it runs: what :func:`measured_against_plan` compares the run with."""
    return estimated[JOB_COLUMNS]


def measured_against_plan(jobs: pd.DataFrame, root=".") -> pd.DataFrame:
    """Per section and rule of the plan (``jobs``: :func:`plan_jobs`), its planned jobs and hours, and of the jobs
    that ran (their Snakemake benchmark file exists under ``root``): their planned hours, the wall-clock and CPU
    hours they took, and ``ratio``, measured over planned. The plan estimates a CPU job as one thread alone on its
    core, so a CPU job's ratio takes its CPU time (a shared machine's waits for a core are not the plan's to
    predict); a GPU job's, its wall clock (GPU-hours)."""
    rows = []
    for job in jobs.itertuples(index=False):
        path = Path(root) / job.benchmark
        measured = read_benchmark(path) if path.exists() else None
        rows.append({"section": job.section, "rule": job.rule, "device": job.device,
                     "planned_hours": job.seconds / 3600,
                     "ran": measured is not None,
                     "ran_planned_hours": job.seconds / 3600 if measured else 0.0,
                     "wall_hours": measured["seconds"] / 3600 if measured else 0.0,
                     "cpu_hours": measured["cpu_seconds"] / 3600 if measured else 0.0})
    per_job = pd.DataFrame(rows, columns=["section", "rule", "device", "planned_hours", "ran", "ran_planned_hours",
                                          "wall_hours", "cpu_hours"])
    per_job["compared_hours"] = per_job.cpu_hours.where(per_job.device == "cpu", per_job.wall_hours)
    table = per_job.groupby(["section", "rule", "device"], sort=False).agg(
        jobs=("rule", "size"), planned_hours=("planned_hours", "sum"), ran=("ran", "sum"),
        ran_planned_hours=("ran_planned_hours", "sum"), wall_hours=("wall_hours", "sum"),
        cpu_hours=("cpu_hours", "sum"), compared_hours=("compared_hours", "sum")).reset_index()
    ratio = table.compared_hours / table.ran_planned_hours
    return table.assign(ratio=ratio.where(table.ran > 0)).drop(columns="compared_hours")


def measured_document(table: pd.DataFrame) -> Document:
    """``table``: :func:`measured_against_plan`."""
    ran = table[table.ran > 0]
    cpu, gpu = ran[ran.device == "cpu"], ran[ran.device != "cpu"]

    def total(rows: pd.DataFrame, measured: str) -> str:
        return (f"{hours(rows.ran_planned_hours.sum())} planned, {hours(rows[measured].sum())} measured "
                f"({rows[measured].sum() / rows.ran_planned_hours.sum():.2f}x)")

    summary = [f"{int(table.ran.sum())} of {int(table.jobs.sum())} planned jobs have run (their benchmark file "
               "exists)."]
    if len(cpu):
        summary.append(f"CPU jobs: {total(cpu, 'cpu_hours')} CPU-hours.")
    if len(gpu):
        summary.append(f"GPU jobs: {total(gpu, 'wall_hours')} GPU-hours.")
    shown = table.assign(**{name: table[name].map(hours) for name in
                            ("planned_hours", "ran_planned_hours", "wall_hours", "cpu_hours")},
                         ratio=table.ratio.map(lambda value: "—" if pd.isna(value) else f"{value:.2f}"),
                         ran=table.ran.astype(int))
    return Document(MEASURED_TITLE, [
        Paragraph(" ".join(summary)),
        Paragraph(f"Per section and rule: the plan's jobs and hours ({PLAN_CSV}, made before the run), and of "
                  "the jobs that ran, their planned hours beside what they measured: the wall clock of "
                  f"Snakemake's benchmark files ({BENCHMARKS}/) and the CPU time (user and system) each job's "
                  "script measured of itself, or where it left none, Snakemake's sampled CPU time. "
                  "ratio: measured over planned, CPU time for a CPU job (the plan estimates one thread alone on its "
                  "core; waiting for a core on a shared machine is not in it) and the wall clock for a GPU job. A job "
                  "counts as run if its benchmark file exists, also from an earlier run of the same job."),
        Table(shown),
    ])


CALIBRATED_TITLE = "Cost plan calibrated on the jobs that ran: hours spent, hours left and the figures refit"


def calibrated_document(progress: pd.DataFrame, figures: pd.DataFrame) -> Document:
    """``progress`` and ``figures``: :func:`kdflow.reporting.calibration.calibrate`'s."""
    total = progress.iloc[-1]

    def left(row, device: str) -> str:
        point, low, high = (row[f"{device}_hours_left{end}"] for end in ("", "_low", "_high"))
        return f"{hours(point)} ({hours(low)}–{hours(high)})" if high > low else hours(point)

    shown = pd.DataFrame({
        "paper table": progress.paper_table.map(lambda name: name if name == "all jobs" else short_list(name)),
        "jobs done": [f"{row.done} of {row.jobs}" for row in progress.itertuples()],
        "GPU-hours spent": progress.gpu_hours_spent.map(hours),
        "GPU-hours left (90%)": [left(row, "gpu") for _, row in progress.iterrows()],
        "CPU-hours spent": progress.cpu_hours_spent.map(hours),
        "CPU-hours left (90%)": [left(row, "cpu") for _, row in progress.iterrows()],
    })
    fitted = figures[figures.measured_jobs > 0]
    # a group none of whose jobs ran has no measured over planned: a dash, not "nan"
    factors = figures.assign(**{name: figures[name].map(lambda value: "–" if pd.isna(value) else f"{value:.2f}")
                                for name in ("startup_factor", "floor_factor", "flop_rate_factor",
                                             "measured_over_planned")})
    summary = (f"{int(total.done)} of {int(total.jobs)} jobs have run (their benchmark file exists). Left: "
               f"{left(total, 'gpu')} GPU-hours and {left(total, 'cpu')} CPU-hours, with the figures refit on "
               f"them for {len(fitted)} of {len(figures)} groups of jobs." if total.done else
               f"No job of the plan has run yet: the {int(total.jobs)} jobs are priced by the plan's figures "
               f"({PLAN_MD}). Run the pilot (make pilot: {PILOT_CSV}), or a few jobs of each kind, and "
               "build this page again.")
    return Document(CALIBRATED_TITLE, [
        Paragraph(summary),
        Heading("Per paper table"),
        Paragraph("Jobs done and hours spent, measured by Snakemake's benchmark files (CPU time for a CPU job, the "
                  "wall clock for a GPU job); hours left, the plan's estimate of the remaining jobs with the refit "
                  "figures, and in brackets a 90% interval (a bootstrap over the jobs that ran: the fit and the "
                  "spread of single jobs). Shared teachers, transfer sets and probing count only in all jobs."),
        Table(shown),
        Heading("The figures, refit"),
        Paragraph("Per group of jobs (rule family, model family, device, precision): how many ran, and the factors "
                  "of the plan's figures that fit them: start-up x startup_factor, per-layer floor x floor_factor, "
                  "FLOP rate x flop_rate_factor. A part that makes less than a fifth of the measured jobs' planned "
                  "time keeps its factor of 1 (the plan's). A group none of whose jobs has run takes its rule "
                  "family's factors on the same device; where none of those has run either, the plan's figures "
                  f"(scaled or measured on a CPU: {PLAN_MD}) still hold."),
        Table(factors),
    ])

"""The cost plan of a config, before anything runs (issue 16): every job of the DAG, the work it does, and the
seconds that work takes on a named GPU (or on the CPU), from a table of measured and scaled throughputs.

Jobs come from Snakemake's own DAG (:mod:`kdflow.workflow.dag_jobs`), with their wildcards, params and resources:
the plan lists no job itself. The work of a job (``train``, ``infer``, ``decode``, ``probe``) is counted in what
its model computes (:mod:`kdflow.workflow.job_work`), for models sized by :mod:`kdflow.workflow.model_sizes`, over
split sizes from :mod:`kdflow.workflow.split_sizes`.

Seconds (:func:`estimate`): a job's start-up (importing its script's modules and, for a job that runs a model,
loading one; measured per rule: reference/startup.csv) plus, per kind of work, its batches times a per-batch floor (the Python and dispatch work of
a step, which grows with the model's layers and is all a tiny model costs) and its FLOPs (6 x parameters x tokens
to train, 2 x to infer: Kaplan et al. 2020's estimate; attention's quadratic term left out) at the achieved FLOP/s
of its model family. Both come from reference/throughput.csv (benchmarks/plan_throughput.py): measured on a CPU,
and scaled to GPUs, where the floor is an assumed host time per layer (eager PyTorch dispatches every kernel from
Python) and the FLOP/s an assumed fraction of the GPU's peak, or measured there (benchmarks/gpu_check.py). On a CPU
the two add up: the host does the arithmetic too. On a GPU a step costs the larger of the two: kdflow's training
step never waits for the device (kdflow.training.loop), so the host launches the next kernels while the device
computes, and a step is as long as whichever of them is busy longer. No rate counts above its GPU's peak
(:data:`PEAK_FLOPS`): a fitted one that does is capped there.
"""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd

from kdflow.workflow.exploration import exploration_experiments
from kdflow.workflow.job_settings import teacher_jobs
from kdflow.workflow.job_work import KINDS, SECTIONS, WORK, planned_jobs
from kdflow.workflow.split_sizes import TASK_SIZES, task_sizes

THROUGHPUT = "reference/throughput.csv"
STARTUP = "reference/startup.csv"
SHARING = "reference/gpu_sharing.csv"
START_UP_ONLY = "start-up only"
ASSUMED_START_UP = "start-up assumed (no row in reference/startup.csv): the median of the tables' and figures'"  # the source of a job that runs no model
GPU_START_SECONDS = 3.0  # assumed: creating a job's CUDA context and moving its model to the GPU
FLOPS_PER_PARAMETER = {"train": 6, "infer": 2, "decode": 2, "probe": 6}
# Dense peak FLOP/s of the GPUs the plan prices (NVIDIA's datasheets, SXM parts): bf16 on the tensor cores, fp32 on
# the CUDA cores, not TF32's (kdflow.core.precision's fp32 turns TF32 off). The H200 computes as the H100.
PEAK_FLOPS = {("H200", "bf16"): 989e12, ("H200", "fp32"): 67e12, ("H100", "bf16"): 989e12, ("H100", "fp32"): 67e12,
              ("A100", "bf16"): 312e12, ("A100", "fp32"): 19.5e12}


def config_digest(config: dict) -> str:
    """A fingerprint of the whole config, whatever its key order: the plan rule's param, so that any edit of the
    config reruns the plan (and the dry run names the change without printing the config)."""
    return hashlib.sha256(json.dumps(config, sort_keys=True, default=str).encode()).hexdigest()


# Seconds, and the plan per section and rule.


def read_throughput(path=THROUGHPUT) -> pd.DataFrame:
    """reference/throughput.csv: per model family, kind of work, device and precision, the per-batch floor per
    layer (seconds) and the achieved FLOP/s, and where they come from (``source``: measured or scaled)."""
    return pd.read_csv(path).set_index(["family", "kind", "device", "precision"]).sort_index()


def read_startup(path=STARTUP) -> dict[str, float]:
    """reference/startup.csv: per rule, the seconds its script takes to start (interpreter, imports)."""
    table = pd.read_csv(path)
    return dict(zip(table.rule, table.seconds))


def read_sharing(path=SHARING) -> dict[tuple[str, int], float]:
    """reference/gpu_sharing.csv: per student type and K, the measured examples/s of K of its jobs sharing one GPU
    over one job's alone (benchmarks/gpu_sharing.py); none where the file does not exist."""
    path = Path(path)
    if not path.exists():
        return {}
    table = pd.read_csv(path)
    return {(row.student_type, int(row.k)): float(row.speedup) for row in table.itertuples()}


def accelerator_of(config: dict, gpu: str) -> tuple[str, str]:
    """(device, precision) of the jobs that ask for a GPU, as the config's ``device`` and ``precision`` resolve
    (kdflow.core.precision): on ``gpu`` unless the config runs on the CPU; ``auto`` is bf16 on a GPU (every GPU of
    reference/throughput.csv has it) and fp32 on a CPU; fp16 runs at bf16's rate; on a CPU only fp32 is measured."""
    if config["device"] == "cpu":
        return "cpu", "fp32"
    return gpu, "fp32" if config["precision"] == "fp32" else "bf16"


def cost_plan(dag: list[dict], config: dict, task_table: pd.DataFrame, throughput: pd.DataFrame,
              startup: dict[str, float], catalog: dict, probing_files: dict[str, str], gpu: str,
              sharing_speedups: dict[tuple[str, int], float] | None = None) -> pd.DataFrame:
    """Every job of the DAG with its work and estimated seconds (:func:`kdflow.workflow.job_work.planned_jobs`,
    :func:`estimate`). ``sharing_speedups``: :func:`read_sharing`."""
    jobs = pd.DataFrame(planned_jobs(dag, config, task_sizes(config, task_table), catalog, probing_files,
                                     sharing_speedups))
    return estimate(jobs, throughput, startup, accelerator_of(config, gpu))


def estimate(jobs: pd.DataFrame, throughput: pd.DataFrame, startup: dict[str, float],
             accelerator: tuple[str, str]) -> pd.DataFrame:
    """``jobs`` (:func:`kdflow.workflow.job_work.planned_jobs`, as a frame) with the ``device``, ``precision``,
    ``seconds`` and ``source`` of each: start-up, then per kind of work its batches' floor and its FLOPs at the
    family's rate (at most the GPU's peak), added up on a CPU, the larger of them on a GPU. The parts that count are
    also given apart (``startup_seconds``, ``floor_seconds``, ``compute_seconds``, summing to ``seconds``: on a GPU
    each kind of work's larger part alone; what :mod:`kdflow.reporting.calibration` refits from the jobs that ran),
    and ``charged_seconds``, the seconds of device time it is charged (:func:`charged_share`).
    ``accelerator``: (device, precision) of the jobs that ask for a GPU; the others run on the CPU in fp32. A GPU
    job also starts CUDA (:data:`GPU_START_SECONDS`)."""
    rows = []
    assumed_startup = assumed_start_up(startup)
    for job in jobs.itertuples(index=False):
        device, precision = accelerator if job.accelerator else ("cpu", "fp32")
        start = startup.get(job.rule, assumed_startup) + (GPU_START_SECONDS if device != "cpu" else 0.0)
        floor = compute = 0.0
        sources = set() if job.rule in startup else {ASSUMED_START_UP}
        for kind in KINDS:
            examples, batches = getattr(job, f"{kind}_examples"), getattr(job, f"{kind}_batches")
            if not examples or job.family == "none":
                continue
            rate = throughput.loc[(job.family, kind, device, precision)]
            flops_per_second = min(rate.flops_per_second, PEAK_FLOPS.get((device, precision), math.inf))
            host = batches * rate.floor_seconds_per_layer * max(job.layers, 1)
            arithmetic = FLOPS_PER_PARAMETER[kind] * job.parameters * job.tokens * examples / flops_per_second
            if device == "cpu":
                floor, compute = floor + host, compute + arithmetic
            elif host >= arithmetic:  # the host's launches are the step: the device waits
                floor += host
            else:  # the device's arithmetic is: the launches hide behind it
                compute += arithmetic
            sources.add(rate.source)
        rows.append({"device": device, "precision": precision, "seconds": start + floor + compute,
                     "startup_seconds": start, "floor_seconds": floor, "compute_seconds": compute,
                     "source": "; ".join(sorted(sources)) or START_UP_ONLY})
    estimated = pd.concat([jobs.reset_index(drop=True), pd.DataFrame(rows)], axis=1)
    return estimated.assign(charged_seconds=estimated.seconds * charged_share(estimated))


def assumed_start_up(startup: dict[str, float]) -> float:
    """The start-up of a rule reference/startup.csv has no row for: the median of the measured start-ups of the rules
    whose jobs run no model (tables and figures), which a new rule of that kind is like. A rule that runs a model
    has a work function (job_work.WORK) and should be measured: ``benchmarks/plan_throughput.py --startup RULE
    --write``."""
    measured = [seconds for rule, seconds in startup.items() if rule not in WORK]
    return float(np.median(measured)) if measured else 0.0


def charged_share(jobs: pd.DataFrame) -> np.ndarray:
    """The share of its seconds each job of the plan is charged: its ``gpu_share`` on a GPU (for a family of the
    config's ``gpu_sharing``, K small students at once on one GPU: one over the measured speedup of K jobs over one,
    else 1/K, as if they did not slow each other down), all of them on the CPU."""
    return np.where(jobs.device != "cpu", jobs.gpu_share, 1.0)


def plan_table(estimated: pd.DataFrame, section_order: list[str]) -> pd.DataFrame:
    """One row per section and rule: jobs, examples x epochs trained, examples inferred, tokens sampled, device,
    precision, hours (GPU-hours on a GPU, a shared GPU's by share) and the throughput sources; sections in
    ``section_order``."""
    table = estimated.groupby(["section", "rule", "device", "precision"], sort=False).agg(
        jobs=("rule", "size"), examples_x_epochs=("train_examples", "sum"), inferred=("infer_examples", "sum"),
        sampled_tokens=("decode_examples", "sum"), probe_examples_x_epochs=("probe_examples", "sum"),
        hours=("charged_seconds", lambda seconds: seconds.sum() / 3600),
        source=("source", lambda sources: "; ".join(sorted(set("; ".join(sources).split("; "))))),
    ).reset_index()
    order = {name: i for i, name in enumerate(section_order)}
    table = table.sort_values("section", key=lambda s: s.map(order), kind="stable").reset_index(drop=True)
    return table[["section", "rule", "jobs", "examples_x_epochs", "inferred", "sampled_tokens",
                  "probe_examples_x_epochs", "device", "precision", "hours", "source"]]


def section_order(config: dict) -> list[str]:
    stages = list(dict.fromkeys(SECTIONS.values()))
    before = stages[: stages.index("transfer sets") + 1]
    return [*before, *config.get("experiments", {}), *[s for s in stages if s not in before]]


def paper_table_experiments(config: dict) -> dict[str, list[str]]:
    """Each paper table (config ``paper_tables``) and the thesis's exploration: the experiments it is made of."""
    groups = {name: spec.get("experiments", []) for name, spec in config.get("paper_tables", {}).get("tables", {}).items()}
    exploration = list(exploration_experiments(config))
    if exploration:
        groups["thesis_exploration (Chapter 5, Appendix B)"] = exploration
    return groups


def paper_table_hours(table: pd.DataFrame, config: dict) -> pd.DataFrame:
    """Per paper table (config ``paper_tables``) and the exploration: the jobs of its experiments and their
    GPU-hours and CPU-hours (shared teachers, transfer sets and probing not included; two tables of the same
    experiments count them twice)."""
    rows = []
    for name, experiments in paper_table_experiments(config).items():
        rows_of = table[table.section.isin(experiments)]
        on_gpu = rows_of.device != "cpu"
        rows.append({"paper_table": name, "experiments": ", ".join(experiments), "jobs": int(rows_of.jobs.sum()),
                     "gpu_hours": float(rows_of.hours[on_gpu].sum()), "cpu_hours": float(rows_of.hours[~on_gpu].sum())})
    return pd.DataFrame(rows, columns=["paper_table", "experiments", "jobs", "gpu_hours", "cpu_hours"])


def sizes_note(config: dict, task_table: pd.DataFrame) -> str:
    """Where the plan's split sizes come from, for the tasks the config trains on."""
    sizes = task_sizes(config, task_table)
    tasks = list(dict.fromkeys(task for _, task in teacher_jobs(config)))
    counted = [task for task in tasks if sizes[task]["sizes"] != TASK_SIZES]
    listed = [task for task in tasks if sizes[task]["sizes"] == TASK_SIZES]
    return "; ".join(part for part in (
        counted and f"counted in the raw files the config points at ({', '.join(counted)})",
        listed and f"{TASK_SIZES} ({', '.join(listed)})") if part)

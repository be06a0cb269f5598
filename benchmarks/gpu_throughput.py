"""The GPU check's throughput part (issue 50): the GPU rows of reference/throughput.csv measured, not scaled, and the
cost plan before against after.

    python benchmarks/gpu_throughput.py --device cuda --out DIR        # measure: DIR/throughput_measured.csv
    python benchmarks/gpu_throughput.py --device cpu --tiny --out DIR  # the same code on the CPU, in seconds
    python benchmarks/gpu_throughput.py --adopt DIR/throughput_measured.csv [--write]   # the plan before and after

Measuring needs no Snakemake (benchmarks/gpu_check.py runs it on a lent GPU); the plan does (it lists the DAG's
jobs) and runs here. Per model family and kind of work, the seconds of a batch at two widths of the same depth give
the floor per layer and the rate, as benchmarks/plan_throughput.py solves them on the CPU, in each precision as
kdflow's jobs apply it (kdflow.core.precision: bf16 under autocast, fp32 with TF32 off). On a GPU the narrow width
is the demo's, where the time is the host launching kernels (the floor), and the wide one is 768 wide on batches of
32 x 128 tokens (inference 128 x 128), where arithmetic shows; each time is the fastest of a few passes, after a
warm-up batch, waited for on the GPU.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import platform
import re
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from datetime import date
from functools import partial
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import torch

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "benchmarks")]

from plan_throughput import (  # noqa: E402
    CPU_WORKLOAD, DEMO_ENCODERS, Workload, demo_tokenizer, described, fastest, floor_and_rate, measurements,
    width_pairs)

from kdflow.core.precision import resolve_precision  # noqa: E402
from kdflow.workflow.catalog_cache import load_catalog  # noqa: E402
from kdflow.workflow.config_files import SCHEMA, validate_config, workflow_config  # noqa: E402
from kdflow.workflow.cost_plan import (  # noqa: E402
    PEAK_FLOPS, SHARING, STARTUP, THROUGHPUT, charged_share, cost_plan, paper_table_hours, plan_table, read_sharing,
    read_startup, section_order)
from kdflow.workflow.dag_jobs import workflow_jobs  # noqa: E402
from kdflow.workflow.exploration import with_exploration  # noqa: E402
from kdflow.workflow.split_sizes import TASK_SIZES  # noqa: E402

KEY = ["family", "kind", "device", "precision"]
MEASURED = "throughput_measured.csv"
REPEATS = 3
WIDE = {"model_type": "bert", "num_hidden_layers": 4, "hidden_size": 768, "num_attention_heads": 12,
        "intermediate_size": 3072, "max_position_embeddings": 128}
# The wide models are as wide as the config's students (BERT-base layers, BiLSTM and Gated CNN at their default
# 768): at the demo's tiny batches a GPU would measure only its launch floor at both widths. Twelve demo SST-2
# sentences make one 128-token example.
GPU_WORKLOAD = Workload(
    encoders={
        "transformer": (DEMO_ENCODERS["transformer"], ("4x768", {"architecture": WIDE})),
        "lstm": (DEMO_ENCODERS["lstm"],
                 ("bilstm 3x768", {"type": "bilstm", "layers": 3, "hidden_size": 768, "embeddings": {"dim": 384}})),
        "cnn": (DEMO_ENCODERS["cnn"],
                ("gated_cnn 4x768", {"type": "gated_cnn", "layers": 4, "hidden_size": 768,
                                     "embeddings": {"dim": 384}})),
    },
    generators=(CPU_WORKLOAD.generators[0], ("2x768", 768, 12)),
    probe_widths=CPU_WORKLOAD.probe_widths,
    train=(32, 8), infer=(128, 3), max_length=128, sentences_per_example=12, decode=(256, 16), probe_examples=2048,
)
# --tiny: the same code paths on a few small batches, one pass each (seconds on a CPU; the numbers mean nothing).
TINY = {"train": (4, 2), "infer": (8, 1), "max_length": 16, "decode": (4, 4), "probe_examples": 128}


def fastest_on_gpu(run, repeats: int) -> float:
    """The least wall-clock seconds of ``repeats`` runs, each waited for on the GPU: kernels run asynchronously, so
    a run ends when its last kernel has."""
    times = []
    for _ in range(repeats):
        torch.cuda.synchronize()
        started = time.perf_counter()
        run()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - started)
    return min(times)


def gpu_short_name(full_name: str) -> str:
    """A GPU as reference/throughput.csv and the config's plan.gpu name it: the model in NVIDIA's name ("NVIDIA
    H100 80GB HBM3": H100; "NVIDIA A100-SXM4-80GB": A100), else the name less its vendor."""
    model = re.search(r"\b[A-Z]{1,2}\d{1,3}[A-Z]?\b", full_name)
    return model.group() if model else full_name.removeprefix("NVIDIA ").strip()


def device_names(device: torch.device) -> tuple[str, str]:
    """(short, full) name of ``device``: its throughput.csv ``device`` and what the source says it was."""
    if device.type != "cuda":
        return "cpu", platform.processor() or platform.machine()
    full_name = torch.cuda.get_device_name(device)
    return gpu_short_name(full_name), full_name


@contextlib.contextmanager
def one_thread():
    """Torch's CPU work on one thread while in the block, as plan_throughput measures (and the demo's jobs run)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def measure(device: str, precisions: list[str], tiny: bool, deadline: float, log=print) -> list[dict]:
    """Rows of reference/throughput.csv measured on ``device`` ("cuda" or "cpu") in each of ``precisions`` (bf16,
    fp32), for every family and kind of work it has: the floor per layer and the rate that the narrow and the wide
    model's seconds per batch give (plan_throughput.floor_and_rate). Timed on a GPU with the wall clock, on a CPU
    in CPU seconds on one thread as plan_throughput is. Stops once ``deadline`` (a time.monotonic() value) has
    passed, with the rows finished by then: a family, kind and precision not measured at both widths gives none."""
    if time.monotonic() >= deadline:
        return []
    torch_device = torch.device(device)
    on_gpu = torch_device.type == "cuda"
    workload = GPU_WORKLOAD if on_gpu else CPU_WORKLOAD
    workload = replace(workload, **TINY) if tiny else workload
    timer = partial(fastest_on_gpu if on_gpu else fastest, repeats=1 if tiny else REPEATS)
    short_name, full_name = device_names(torch_device)
    source = (f"measured-{'gpu' if on_gpu else 'cpu'}: {full_name}, torch {torch.__version__}, {date.today()}: "
              f"benchmarks/gpu_check.py{' --tiny' if tiny else ''}")
    tokenizer, rows = demo_tokenizer(), []
    for name in precisions:
        if time.monotonic() >= deadline:
            break
        precision = resolve_precision(name, torch_device)
        with contextlib.nullcontext() if on_gpu else one_thread():
            measured = until(deadline, measurements(tokenizer, workload, torch_device, precision, timer), log,
                             f"throughput {short_name} {name:<5}")
        rows += fitted_rows(measured, short_name, name, source, on_gpu)
    return rows


def fitted_rows(measured: list[dict], device: str, precision: str, source: str, on_gpu: bool) -> list[dict]:
    """The throughput rows of one device and precision from its narrow and wide measurements: on a CPU the sum
    model's floor and rate (plan_throughput.floor_and_rate), on a GPU the larger-of model's (:func:`gpu_floor_and_rate`),
    as kdflow.workflow.cost_plan prices each."""
    rows = []
    for narrow, wide in width_pairs(measured):
        floor, rate = (gpu_floor_and_rate(narrow, wide, PEAK_FLOPS.get((device, precision), math.inf)) if on_gpu
                       else floor_and_rate(narrow, wide))
        # Where the wide model was no slower, its arithmetic hid under the floor's noise: the rate is a placeholder
        # (the GPU's peak, or compute is free) and the floor is the time.
        unresolved = "; wide no slower: rate unresolved" if wide["seconds"] <= narrow["seconds"] else ""
        rows.append({"family": narrow["family"], "kind": narrow["kind"], "device": device, "precision": precision,
                     "floor_seconds_per_layer": floor, "flops_per_second": rate,
                     "source": f"{source} ({narrow['label']}, {wide['label']}){unresolved}"})
    return rows


def gpu_floor_and_rate(narrow: dict, wide: dict, peak: float) -> tuple[float, float]:
    """The floor per layer and the rate that make a batch cost the larger of ``floor x layers`` and ``FLOPs / rate``
    (kdflow.workflow.cost_plan's GPU model): the narrow model's time is its host's (its arithmetic a few microseconds),
    the wide one's, if it is slower, its device's. A rate at most the GPU's ``peak``: the sum model's fit of the
    2026-11-28 H200, which charged the wide model's floor and arithmetic one after the other, gave fp32 98 TFLOP/s."""
    floor = narrow["seconds"] / narrow["layers"]
    rate = wide["flops"] / wide["seconds"] if wide["seconds"] > narrow["seconds"] else peak
    return floor, min(rate, peak)


# A throughput line of gpu_check's log: "[hh:mm:ss] throughput H200 fp32  transformer train  4x768   22.26 ms/batch
# 695.785 GFLOP/batch  4 layers" (plan_throughput.described)
LOG_LINE = re.compile(r"throughput (\S+) (\w+)\s+(\w+)\s+(\w+)\s+(.+?)\s+([\d.]+) ms/batch\s+([\d.]+) GFLOP/batch\s+(\d+) layers")


def refit_log(log_text: str, source: str) -> list[dict]:
    """The rows of a GPU check's throughput measurements refitted from its log (where it printed every one)."""
    measured: dict[tuple[str, str], list[dict]] = {}
    for device, precision, family, kind, label, ms, gflop, layers in LOG_LINE.findall(log_text):
        measured.setdefault((device, precision), []).append(
            {"family": family, "kind": kind, "label": label.strip(), "seconds": float(ms) / 1e3,
             "flops": float(gflop) * 1e9, "layers": int(layers)})
    return [row for (device, precision), rows in measured.items()
            for row in fitted_rows(rows, device, precision, source, on_gpu=True)]


def until(deadline: float, families: dict[str, Iterator[dict]], log, label: str) -> list[dict]:
    """The measurements of one family after another until ``deadline`` passes, each logged after ``label``. A
    family whose code fails on the device is logged and left: it costs its own rows, not the others'."""
    measured = []
    for family, family_measurements in families.items():
        try:
            for measurement in family_measurements:
                measured.append(measurement)
                log(f"{label} {described(measurement)}")
                if time.monotonic() >= deadline:
                    return measured
        except Exception as error:
            log(f"{label} {family} failed: {type(error).__name__}: {error}")
    return measured


def adopt(measured: pd.DataFrame, throughput: pd.DataFrame) -> pd.DataFrame:
    """``throughput`` (reference/throughput.csv) with each measured GPU row in place of the row of the same family,
    kind, device and precision, or added after its family and kind's rows where that device had none. Its CPU rows
    stay plan_throughput's (one thread, CPU seconds: as the demo's jobs run)."""
    replacements = measured[measured.device != "cpu"].set_index(KEY)
    table = throughput.set_index(KEY)
    table.update(replacements)
    table = pd.concat([table, replacements[~replacements.index.isin(table.index)]]).reset_index()
    works = list(zip(table.family, table.kind))
    order = {work: i for i, work in enumerate(dict.fromkeys(works))}
    return table.iloc[np.argsort([order[work] for work in works], kind="stable")][throughput.columns].reset_index(
        drop=True)


# The plan with either table.


@dataclass(frozen=True)
class PlanInputs:
    """What rule plan reads but the throughput table, read once for both plans: listing config.yaml's jobs costs
    Snakemake about 30 CPU-seconds."""

    dag: list[dict]
    config: dict
    task_table: pd.DataFrame
    startup: dict[str, float]
    probing_files: dict[str, str]
    gpu: str  # the config's plan.gpu


def plan_inputs(configfiles: Sequence[str | Path] = (), config: dict | None = None,
                replace_workflow_config: bool = False) -> PlanInputs:
    """What scripts/plan.py gets for the config Snakemake assembles from config.yaml, ``configfiles``
    (``--configfile``), ``config`` (``--config``) and ``replace_workflow_config`` (``--replace-workflow-config``):
    validated, the exploration's experiments added, as rules/config.smk does; its probing files and GPU from the
    DAG's plan job."""
    settings = SimpleNamespace(configfiles=[REPO / path for path in configfiles], config=dict(config or {}),
                               replace_workflow_config=replace_workflow_config)
    assembled, sources = workflow_config([REPO / "config.yaml"], settings)
    validate_config(assembled, SCHEMA, sources)
    assembled |= with_exploration(assembled)
    dag = workflow_jobs(settings.configfiles, settings.config, replace_workflow_config, directory=REPO)
    plan_job = next(job for job in dag if job["rule"] == "plan")
    return PlanInputs(dag, assembled, pd.read_csv(REPO / TASK_SIZES), read_startup(REPO / STARTUP),
                      plan_job["params"]["probing_files"], plan_job["params"]["gpu"])


# Columns of plan_hours: the charged hours in all and the parts the throughput table sets (the rest is start-up).
PARTS = {"hours": "seconds", "floor_hours": "floor_seconds", "compute_hours": "compute_seconds"}


def plan_hours(throughput: pd.DataFrame, inputs: PlanInputs | None = None, gpu: str | None = None) -> pd.DataFrame:
    """The plan's GPU-hours (a shared GPU's by share, as results/plan.md counts them) per paper table, per section
    and for every GPU job (``group``, ``name``), on ``gpu`` (the config's plan.gpu by default) with ``throughput``
    (reference/throughput.csv's rows): in all, and their per-layer floors and FLOPs at the rates (:data:`PARTS`).
    ``inputs``: config.yaml's by default."""
    inputs = inputs or plan_inputs()
    here = os.getcwd()
    os.chdir(REPO)  # the config's data paths are relative to the workflow's directory (contextlib.chdir: 3.11)
    try:
        jobs = cost_plan(inputs.dag, inputs.config, inputs.task_table, throughput.set_index(KEY).sort_index(),
                         inputs.startup, load_catalog(), inputs.probing_files, gpu or inputs.gpu,
                         read_sharing(REPO / SHARING))
    finally:
        os.chdir(here)
    share, order = charged_share(jobs), section_order(inputs.config)
    return pd.DataFrame({
        column: gpu_hours(plan_table(jobs.assign(charged_seconds=jobs[seconds] * share), order), inputs.config)
        for column, seconds in PARTS.items()}).reset_index()


def gpu_hours(table: pd.DataFrame, config: dict) -> pd.Series:
    """The GPU-hours of a plan table (kdflow.workflow.cost_plan.plan_table) per paper table, per section and in
    all."""
    on_gpu = table[table.device != "cpu"]
    per_paper_table = paper_table_hours(table, config).set_index("paper_table").gpu_hours
    return pd.concat({"paper table": per_paper_table, "section": on_gpu.groupby("section", sort=False).hours.sum(),
                      "all": pd.Series({"every GPU job": on_gpu.hours.sum()})}, names=["group", "name"])


def measured_gpu(old: pd.DataFrame, new: pd.DataFrame) -> str | None:
    """The GPU whose measured rows (benchmarks/gpu_check.py) ``new`` adds to ``old`` or changes, where there is
    one."""
    changed = new.merge(old, how="left", indicator=True)
    changed = changed[(changed["_merge"] == "left_only") & changed.source.str.startswith("measured-gpu")]
    gpus = set(changed.device)
    return gpus.pop() if len(gpus) == 1 else None


def plan_before_after(old: pd.DataFrame, new: pd.DataFrame, inputs: PlanInputs | None = None,
                      gpu: str | None = None) -> pd.DataFrame:
    """:func:`plan_hours` with the ``old`` and the ``new`` throughput table side by side, and the ratio of their
    hours (after / before). On ``gpu``: by default the GPU whose measured rows ``new`` adds or changes (else the
    config's plan.gpu); the old table plans for the config's plan.gpu where it has no rows of that GPU (one measured for
    the first time), or for its first GPU where it has none of that either. ``inputs``: config.yaml's by default."""
    inputs = inputs or plan_inputs()
    gpu = gpu or measured_gpu(old, new) or inputs.gpu
    old_gpus = [name for name in dict.fromkeys(old.device) if name != "cpu"]  # in the table's order
    old_gpu = next(name for name in (gpu, inputs.gpu, *old_gpus) if name in old_gpus)
    before, after = plan_hours(old, inputs, old_gpu), plan_hours(new, inputs, gpu)
    both = before.merge(after, on=["group", "name"], suffixes=("_before", "_after"))
    both = both.assign(gpu_before=old_gpu, gpu_after=gpu, ratio=both.hours_after / both.hours_before)
    return both[["group", "name", "gpu_before", "gpu_after", "hours_before", "hours_after", "ratio",
                 "floor_hours_before", "floor_hours_after", "compute_hours_before", "compute_hours_after"]]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--device", help="measure on this device (cuda or cpu): OUT/" + MEASURED)
    action.add_argument("--adopt", type=Path, help="a measured table: the plan of config.yaml before and after it "
                                                   "replaces the rows of its GPU")
    action.add_argument("--refit-log", type=Path, help="a GPU check's log: its throughput lines refitted as OUT/"
                                                       + MEASURED + ", to --adopt")
    parser.add_argument("--precisions", nargs="+", default=["bf16", "fp32"], help="bf16 first: config.yaml's")
    parser.add_argument("--tiny", action="store_true", help="a few small batches, one pass: the code, not the speed")
    parser.add_argument("--seconds", type=float, default=90, help="stop measuring after this long")
    parser.add_argument("--out", type=Path, default=Path("gpu_check"))
    parser.add_argument("--write", action="store_true", help="with --adopt: rewrite " + THROUGHPUT)
    args = parser.parse_args(argv)
    if args.device:
        rows = pd.DataFrame(measure(args.device, args.precisions, args.tiny, time.monotonic() + args.seconds),
                            columns=[*KEY, "floor_seconds_per_layer", "flops_per_second", "source"])
        args.out.mkdir(parents=True, exist_ok=True)
        rows.to_csv(args.out / MEASURED, index=False, float_format="%.6g")
        print(rows.drop(columns="source").to_string(index=False))
        return
    if args.refit_log:
        source = re.sub(r"(gpu_check\.py)", r"\1, refitted from its log by gpu_throughput.py --refit-log", next(
            (row for row in pd.read_csv(REPO / THROUGHPUT).source if "measured-gpu" in row), "measured-gpu"))
        rows = pd.DataFrame(refit_log(args.refit_log.read_text(), source.split(" (")[0]),
                            columns=[*KEY, "floor_seconds_per_layer", "flops_per_second", "source"])
        args.out.mkdir(parents=True, exist_ok=True)
        rows.to_csv(args.out / MEASURED, index=False, float_format="%.6g")
        print(rows.drop(columns="source").to_string(index=False))
        return
    throughput = pd.read_csv(REPO / THROUGHPUT)
    adopted = adopt(pd.read_csv(args.adopt), throughput)
    comparison = plan_before_after(throughput, adopted)
    print(f"The plan of config.yaml in GPU-hours with {THROUGHPUT} (before) and {args.adopt} adopted (after)")
    print(comparison.to_string(index=False, float_format="{:,.1f}".format, formatters={"ratio": "{:.2f}".format}))
    if args.write:
        adopted.to_csv(REPO / THROUGHPUT, index=False, float_format="%.6g")


if __name__ == "__main__":
    main()

"""How the workflow's dry runs and its plan grow with the number of jobs (issue 51): configs derived from config.yaml
with a share of each experiment's grid and seeds, each measured in CPU seconds, and per measure the exponent k of
cost ~ jobs^k.

    python benchmarks/dag_scale.py                                  # shares 1/8, 1/4, 1/2, 1
    python benchmarks/dag_scale.py --shares 0.125 0.25 --timeout 300 --measures plain plan

The measures:
- ``plain``: ``snakemake -n`` (building the DAG, then the dry run's scheduling of every job);
- ``profile``: ``snakemake --profile slurm -n``, the same with the profile's groups: the scheduler checks a group's
  jobs and their dependencies each time a job finishes, which the dry run simulates;
- ``scheduler``: of the profile's dry run, the CPU seconds inside Snakemake's scheduler (``JobScheduler.schedule``:
  choosing ready jobs, "running" them, updating what is ready after each), the cost a real run's ``snakemake``
  process pays on the login node as its jobs finish;
- ``plan``: what the plan job computes (kdflow.workflow.dag_jobs.workflow_jobs, then the cost plan's prices), in
  the repository (the plan lists every job whatever exists).

Each runs in a fresh interpreter in an empty work directory (no output exists: every job is planned), its CPU time
that of the process and its children. A share keeps the first ceil(share x n) of the n values of each grid
dimension and of each experiment's seeds (at least one); the job counts come from the dry run itself, so the fit
does not rely on the shares being exact. A measure that passes ``--timeout`` is reported as such, and the fit
leaves it out. Every measure also pays a fixed start-up (Snakemake's, and parsing the workflow), about 12 CPU-s,
measured in each share's work directory before the measures, once its caches are warm: the exponents are
printed with and without it, and only shares whose jobs span several-fold tell them apart.
"""

from __future__ import annotations

import argparse
import math
import re
import resource
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from kdflow.workflow.results_paths import DATA  # noqa: E402

MEASURES = ("plain", "profile", "scheduler", "plan")
# What rule plan computes (scripts/plan.py), as benchmarks/gpu_throughput.py reproduces it: the DAG's jobs listed
# through Snakemake's API, then priced.
PLAN_CODE = """
import sys
sys.path.insert(0, "benchmarks")
import pandas as pd
import gpu_throughput
inputs = gpu_throughput.plan_inputs([sys.argv[1]], replace_workflow_config=True)
gpu_throughput.plan_hours(pd.read_csv("reference/throughput.csv"), inputs)
print(f"planned jobs: {len(inputs.dag)}")
"""

# Snakemake's command line, its scheduler's CPU seconds timed (process-wide, as the scheduler's threads share it).
SCHEDULER_TIMED = """
import sys, time
from snakemake.cli import main
from snakemake.scheduling.job_scheduler import JobScheduler

schedule, spent = JobScheduler.schedule, [0.0]


def timed(self):
    started = time.process_time()
    try:
        return schedule(self)
    finally:
        spent[0] += time.process_time() - started


JobScheduler.schedule = timed
sys.argv = ["snakemake", *sys.argv[1:]]
try:
    main()
finally:
    print(f"scheduler cpu seconds: {spent[0]:.3f}", flush=True)
"""


def shared_config(config: dict, share: float) -> dict:
    """``config`` with the first ceil(share x n) of each grid dimension's n values, and of each experiment's seeds
    (tasks stay: the paper tables, models and analyses name them)."""
    def first(values: list) -> list:
        return values[:max(1, math.ceil(share * len(values)))]

    derived = yaml.safe_load(yaml.safe_dump(config))
    for spec in derived["experiments"].values():
        spec["seeds"] = first(spec["seeds"])
        for dimension, values in (spec.get("grid") or {}).items():
            spec["grid"][dimension] = first(values)
    return derived


def cpu_seconds(command: list[str], cwd: Path, timeout: float) -> tuple[float | None, str]:
    """The CPU seconds of ``command`` and its children (None past ``timeout``), and its output."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    try:
        result = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, ""
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if result.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{result.stdout[-2000:]}{result.stderr[-2000:]}")
    return after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, result.stdout + result.stderr


def dry_run_jobs(output: str) -> int:
    """The total of Snakemake's dry-run job table."""
    found = re.search(r"^total\s+(\d+)", output, re.MULTILINE)
    if found is None:
        raise SystemExit(f"no job count in the dry run's output:\n{output[-2000:]}")
    return int(found[1])


def measure(share: float, measures: list[str], timeout: float) -> dict:
    config = shared_config(yaml.safe_load((REPO / "config.yaml").read_text()), share)
    row = {"share": share}
    with tempfile.TemporaryDirectory() as scratch:
        workdir = linked(Path(scratch))
        configfile = workdir / "config.yaml"
        configfile.write_text(yaml.safe_dump(config))
        snakemake = [sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile"), "--directory",
                     str(workdir), "--configfile", str(configfile), "--replace-workflow-config", "-n", "--quiet",
                     "rules"]
        # The start-up every measure pays (Snakemake's, parsing the workflow, validating the config), as the dry
        # run of one job, measured the second time: the first fills the work directory's caches (the catalog of
        # methods and students, which a first run computes in a subprocess importing torch), which no measure below
        # then pays alone.
        for _ in range(2):
            row["start_up_s"], _ = cpu_seconds([*snakemake, "--", DATA.format(task="cola")], REPO, timeout)
        for name in measures:
            if name == "plain":
                row["plain_cpu_s"], output = cpu_seconds(snakemake, REPO, timeout)
                if output:
                    row["jobs"] = dry_run_jobs(output)
            elif name in ("profile", "scheduler"):
                if "profile_cpu_s" in row:
                    continue  # one run measures both
                command = [sys.executable, "-c", SCHEDULER_TIMED, *snakemake[3:], "--profile", str(REPO / "slurm")]
                row["profile_cpu_s"], output = cpu_seconds(command, REPO, timeout)
                scheduler = re.search(r"scheduler cpu seconds: ([\d.]+)", output)
                row["scheduler_cpu_s"] = float(scheduler[1]) if scheduler else None
                if output and "jobs" not in row:
                    row["jobs"] = dry_run_jobs(output)
            else:
                row["plan_cpu_s"], output = cpu_seconds([sys.executable, "-c", PLAN_CODE, str(configfile)], REPO,
                                                        timeout)
                planned = re.search(r"planned jobs: (\d+)", output)
                row["plan_jobs"] = int(planned[1]) if planned else None
    print(", ".join(f"{key} {value}" for key, value in row.items()), flush=True)
    return row


def linked(workdir: Path) -> Path:
    """A work directory that holds no output but sees the repository's files the workflow reads."""
    for inputs in ("reference", "benchmarks"):  # the paper tables' and the evidence's inputs
        (workdir / inputs).symlink_to(REPO / inputs, target_is_directory=True)
    return workdir


def exponents(table: pd.DataFrame, constant: float = 0.0) -> dict[str, float]:
    """Per measure, k of (cost - ``constant``) ~ jobs^k: the least-squares slope of log cost on log jobs, over the
    shares that finished (NaN with fewer than two). The scheduler's CPU holds no start-up: ``constant`` is not
    taken from it."""
    found = {}
    for column in [c for c in table.columns if c.endswith("_cpu_s")]:
        done = table[["jobs", column]].dropna()
        net = done[column] - (0.0 if column == "scheduler_cpu_s" else constant)
        found[column.removesuffix("_cpu_s")] = (float(np.polyfit(np.log(done.jobs), np.log(net), 1)[0])
                                                if len(done) >= 2 and (net > 0).all() else math.nan)
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shares", type=float, nargs="+", default=[0.125, 0.25, 0.5, 1.0])
    parser.add_argument("--measures", nargs="+", choices=MEASURES, default=list(MEASURES))
    parser.add_argument("--timeout", type=float, default=900, help="seconds a measure may take")
    parser.add_argument("--out", type=Path, help="a CSV of the measurements")
    args = parser.parse_args()
    table = pd.DataFrame([measure(share, args.measures, args.timeout) for share in args.shares])
    table["ms_per_job_plain"] = 1e3 * table.get("plain_cpu_s", math.nan) / table.jobs
    table["ms_per_job_scheduler"] = 1e3 * table.get("scheduler_cpu_s", math.nan) / table.jobs
    print(table.to_string(index=False, float_format="%.3f"))
    constant = float(table.start_up_s.median())
    for (name, k), (_, net) in zip(exponents(table).items(), exponents(table, constant).items()):
        print(f"{name}: cost ~ jobs^{k:.2f}; less the {constant:.1f} CPU-s of one job's dry run, ~ jobs^{net:.2f}")
    if args.out:
        table.to_csv(args.out, index=False)


if __name__ == "__main__":
    main()

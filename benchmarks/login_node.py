"""What a real run's ``snakemake`` process costs the login node (issue 51): the demo's whole DAG run through the
SLURM profile on a cluster (a local one will do: docs/development.md), beside the same DAG's dry run, each measured
from inside the ``snakemake`` process: its own CPU seconds (all its threads), the CPU seconds of the commands it ran
(sbatch, sacct, squeue) and its peak memory. A real run pays what its dry run pays (building the DAG, scheduling)
plus submitting each job and following it; the difference per job, with the full config's measured dry run,
gives the login node's cost of a full run.

    python benchmarks/login_node.py                  # the demo on the cluster, then its dry run
    python benchmarks/login_node.py --full-config    # also config.yaml's dry run under the profile (about 3 minutes)

It runs in a scratch copy of the repository set up as tests/slurm_cluster.py sets one up (the demo with GPU jobs, the
profile with the user's default account and the fake GPU model, job states checked every second). The jobs
themselves run under slurmd, outside the measured process; they take about 40 minutes on 2 cores. Checking every
second, where a real run checks every 40 to 180 s, makes the per-job figures upper bounds (docs/clusters.md).
"""

from __future__ import annotations

import argparse
import getpass
import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from conftest import copy_repo  # noqa: E402
from slurm_cluster import write_test_setup  # noqa: E402

# Snakemake's command line, run in this interpreter, then its own and its commands' usage as one JSON line.
MEASURED = """
import json, resource, sys
from snakemake.cli import main
sys.argv = ["snakemake", *sys.argv[1:]]
try:
    main()
finally:
    own, commands = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    print("usage: " + json.dumps({"own_cpu_s": own.ru_utime + own.ru_stime,
                                  "commands_cpu_s": commands.ru_utime + commands.ru_stime,
                                  "peak_mib": own.ru_maxrss / 1024}), flush=True)
"""


def measured(arguments: list[str], cwd: Path, log: Path) -> dict:
    """Run snakemake with ``arguments`` in ``cwd`` (its output in ``log``): its usage, wall seconds and job count."""
    started = time.monotonic()
    with log.open("w") as sink:
        result = subprocess.run([sys.executable, "-c", MEASURED, *arguments], cwd=cwd, stdout=sink,
                                stderr=subprocess.STDOUT)
    output = log.read_text()
    usage = re.search(r"^usage: (\{.*\})$", output, re.MULTILINE)
    if result.returncode != 0 or usage is None:
        raise SystemExit(f"snakemake {' '.join(arguments)} failed (exit {result.returncode}):\n{output[-3000:]}")
    row = json.loads(usage[1]) | {"wall_s": time.monotonic() - started}
    total = re.search(r"^total\s+(\d+)", output, re.MULTILINE)  # the job table printed before a run or dry run
    row["jobs"] = int(total[1]) if total else None
    row["submissions"] = len(re.findall(r"submitted with SLURM jobid", output))
    return row


def node_cores() -> int:
    """The fewest cores of a cluster node: jobs asking for more (measure_inference takes 4 threads) would wait
    forever on a small local cluster, so every job's threads are capped there (Snakemake's --max-threads)."""
    found = subprocess.run(["sinfo", "-h", "-o", "%c"], capture_output=True, text=True, check=True)
    return min(int(cores.rstrip("+")) for cores in found.stdout.split())


def default_account() -> str:
    found = subprocess.run(["sacctmgr", "-n", "-P", "show", "user", getpass.getuser(), "format=DefaultAccount"],
                           capture_output=True, text=True)
    if found.returncode != 0 or not found.stdout.strip():
        raise SystemExit(f"no SLURM account for {getpass.getuser()} (is a cluster up? docs/development.md): "
                         f"{found.stderr.strip()}")
    return found.stdout.strip()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--full-config", action="store_true", help="also measure config.yaml's profile dry run")
    parser.add_argument("--out", type=Path, help="a JSON file of the measurements")
    args = parser.parse_args()
    rows = {}
    with tempfile.TemporaryDirectory() as scratch:
        workdir = copy_repo(Path(scratch) / "kdflow")
        write_test_setup(workdir, default_account())
        profile = ["--profile", "slurm-test", "--max-threads", str(node_cores())]
        rows["demo dry run"] = measured([*profile, "-n"], workdir, workdir / "dry.out")
        rows["demo run"] = measured(profile, workdir, workdir / "run.out")
        if args.full_config:
            (workdir / "config.yaml").write_text((REPO / "config.yaml").read_text())
            rows["config.yaml dry run"] = measured([*profile, "-n", "--quiet", "rules"], workdir, workdir / "full.out")
    for name, row in rows.items():
        print(f"{name}: " + ", ".join(f"{key} {value:.1f}" if isinstance(value, float) else f"{key} {value}"
                                      for key, value in row.items()))
    dry, run = rows["demo dry run"], rows["demo run"]
    extra_own = (run["own_cpu_s"] - dry["own_cpu_s"]) / run["jobs"]
    extra_commands = (run["commands_cpu_s"] - dry["commands_cpu_s"]) / run["jobs"]
    print(f"a real run beyond its dry run, per job: {extra_own:.3f} CPU-s in snakemake, {extra_commands:.3f} CPU-s in "
          f"the commands it runs; peak memory {run['peak_mib'] - dry['peak_mib']:+.0f} MiB over the dry run's")
    if "config.yaml dry run" in rows:
        full = rows["config.yaml dry run"]
        cpu_h = (full["own_cpu_s"] + full["commands_cpu_s"] + full["jobs"] * (extra_own + extra_commands)) / 3600
        print(f"config.yaml ({full['jobs']} jobs): about {cpu_h:.2f} CPU-h and "
              f"{full['peak_mib'] + run['peak_mib'] - dry['peak_mib']:.0f} MiB peak for the whole run's snakemake")
    if args.out:
        args.out.write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()

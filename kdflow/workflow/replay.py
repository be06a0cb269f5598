"""A DAG's jobs run without Snakemake: the rules' own scripts, in the DAG's order, each in a fresh interpreter with
the inputs, outputs, params, wildcards, log, threads, resources and config Snakemake would give it (issue 50).

For a machine that has kdflow's dependencies but no Snakemake and no network: the lent GPU of benchmarks/gpu_check.py,
where Snakemake's wheels and their dependencies would not fit beside the teacher in a 64 MiB carry. The jobs are
listed here, where Snakemake is, and the list travels:

    python -m kdflow.workflow.replay export jobs.json --configfile demo/config.yaml --targets results/...   # here
    python -m kdflow.workflow.replay run jobs.json --directory WORKDIR --jobs 4                         # there
    python -m kdflow.workflow.replay job jobs.json 7      # job 7 alone, in this process, from WORKDIR: to debug it

Each job runs in a process of its own, as under Snakemake, but forked from a server that has imported what the
listed scripts import (torch, transformers, kdflow): the 5-7 CPU-seconds of imports a fresh interpreter spends
before a job starts are paid once, not once a job. The server is started before any CUDA context exists, so a
forked job can use the GPU (a process forked from one that holds a context cannot).

What Snakemake does and this does not: no rerun triggers (a job whose outputs all exist is skipped, as after an
interrupted run; delete them to redo it), no locks, no cluster, no retries, no benchmark files (each job's wall
seconds go to ``replay.jsonl`` instead). The outputs are the same files under the same paths, so a Snakemake
run in the same directory later finds them (and reruns them, having no metadata of its own for them).
"""

from __future__ import annotations

import argparse
import ast
import json
import multiprocessing.forkserver
import os
import runpy
import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from pathlib import Path

from kdflow.workflow.dag_jobs import built_dag, plain
from kdflow.workflow.provenance import rule_scripts

REPO = Path(__file__).resolve().parents[2]


class NamedList(list):
    """Snakemake's ``snakemake.input`` and its kin as a rule script reads them: a list whose items a name may also
    reach (``.data``, ``.get("transfer")``), one item or a slice of several. Written here because Snakemake's
    own (snakemake.io.Namedlist) is what this module runs without."""

    def __init__(self, items: Sequence = (), names: dict[str, list] | None = None):
        super().__init__(items)
        self._names = {name: tuple(span) for name, span in (names or {}).items()}

    def __getattr__(self, name):
        if name.startswith("_") or name not in self._names:
            raise AttributeError(name)
        start, end = self._names[name]
        return self[start] if end is None else NamedList(self[start:end])

    def get(self, name, default=None):
        return getattr(self, name) if name in self._names else default

    def keys(self):
        return self._names.keys()

    def items(self):
        return ((name, getattr(self, name)) for name in self._names)


class Job:
    """The ``snakemake`` object of one job, rebuilt from its exported JSON."""

    def __init__(self, job: dict, config: dict):
        self.rule, self.threads, self.config = job["rule"], job["threads"], config
        for field in ("input", "output", "log", "params", "wildcards", "resources"):
            setattr(self, field, NamedList(job[field]["items"], job[field]["names"]))
        self.bench_iteration, self.scriptdir = None, str(REPO / "scripts")


def named_list(namedlist, value=str) -> dict:
    """Snakemake's Namedlist as JSON: its items (``value`` of each) and each name's span of them."""
    return {"items": [value(item) for item in namedlist],
            "names": {name: list(span) for name, span in namedlist._names.items()}}


def export(configfiles: Sequence[str | Path] = (), config: dict | None = None, targets: Sequence[str] = (),
           replace_workflow_config: bool = True, directory: str | Path = ".") -> dict:
    """The jobs of ``targets`` (every job, as if no output existed) in the work ``directory``, in the order they
    may run: ``level`` 0 needs no other job's output, level n the outputs of levels below n. Paths are relative to
    the work directory, which the replay may find elsewhere."""
    scripts = rule_scripts(REPO / "rules")
    with built_dag(configfiles, config, replace_workflow_config, targets, directory) as workflow:
        jobs = []
        for level, layer in enumerate(workflow.dag.toposorted()):
            for job in sorted(layer, key=lambda job: (job.rule.name, sorted(map(str, job.output)))):
                if job.rule.name not in scripts:
                    if job.output:
                        raise ValueError(f"rule {job.rule.name} writes files but runs no script: it cannot replay")
                    continue  # a target rule such as `all`
                resources = {k: v for k, v in job.resources.items() if k not in ("_cores", "_nodes", "tmpdir")}
                jobs.append({
                    "rule": job.rule.name, "level": level, "script": scripts[job.rule.name],
                    "threads": job.threads, "input": named_list(job.input), "output": named_list(job.output),
                    "log": named_list(job.log), "params": named_list(job.params, plain),
                    "wildcards": {"items": list(job.wildcards_dict.values()),
                                  "names": {name: [i, None] for i, name in enumerate(job.wildcards_dict)}},
                    "resources": {"items": plain(list(resources.values())),
                                  "names": {name: [i, None] for i, name in enumerate(resources)}}})
        return {"config": plain(workflow.config), "jobs": jobs}


def run_job(exported: Path, index: int) -> None:
    """Run job ``index`` of ``exported`` in this process, from the working directory, as Snakemake's ``script:``
    directive would (the script sees a global ``snakemake``)."""
    listing = json.loads(Path(exported).read_text())
    job = listing["jobs"][index]
    for path in [*job["output"]["items"], *job["log"]["items"]]:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
    runpy.run_path(str(REPO / "scripts" / job["script"]), init_globals={"snakemake": Job(job, listing["config"])},
                   run_name="__main__")


def job_process(exported: str, index: int, directory: str, log_path: str) -> None:
    """A forked job: in the work ``directory``, its output and errors appended to ``log_path``, job ``index`` of
    ``exported`` (an exception ends it with status 1, its traceback in the log)."""
    os.chdir(directory)
    log = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    os.dup2(log, 1)
    os.dup2(log, 2)
    run_job(Path(exported), index)


def preloaded_modules(listing: list[dict]) -> list[str]:
    """The modules the listed jobs' scripts import at their top level, and the one a first optimiser step imports
    (torch._dynamo): what the job server imports once for all jobs."""
    modules = {"torch", "torch._dynamo"}
    for script in {job["script"] for job in listing}:
        for node in ast.parse((REPO / "scripts" / script).read_text()).body:
            if isinstance(node, ast.ImportFrom) and node.module and not node.level:
                modules.add(node.module)
            elif isinstance(node, ast.Import):
                modules.update(alias.name for alias in node.names)
    return sorted(modules)


def start_server(jobs: list[dict]) -> None:
    """Start the job server with the modules of the listed ``jobs`` (:func:`preloaded_modules`), if this process
    has none yet, and return while it imports them: a caller with other work starts it early."""
    multiprocessing.set_forkserver_preload(preloaded_modules(jobs))
    multiprocessing.forkserver.ensure_running()


def done(job: dict, directory: Path) -> bool:
    return all((directory / path).exists() for path in job["output"]["items"])


def needed(listing: list[dict], targets: Sequence[str]) -> dict[int, int]:
    """The jobs that write ``targets`` and those that write what they read, recursively: job -> the position of the
    first target that needs it (the order they start in, within a level)."""
    writer = {path: i for i, job in enumerate(listing) for path in job["output"]["items"]}
    found = {}
    for position, target in enumerate(targets):
        stack = [writer[target]]
        while stack:
            i = stack.pop()
            if i not in found:
                found[i] = position
                stack += [writer[path] for path in listing[i]["input"]["items"] if path in writer]
    return found


def run(exported: Path, directory: Path, jobs: int = 1, stop_at: float | None = None,
        log: Callable[[str], None] = print, targets: Sequence[str] | None = None) -> list[dict]:
    """Run every job of ``exported`` (or those ``targets`` need) that has not run in ``directory``, up to ``jobs``
    at a time, each once the jobs of lower levels are done, within a level in the listed order (or that of the
    targets). No job starts after one has failed. With
    ``stop_at`` (a ``time.monotonic()`` value), a job starts only if the longest job of its rule so far would end
    before it, and a job still running then is killed (its checkpoint, if its rule keeps one, lets the next run
    resume it). Returns (and appends to ``directory/replay.jsonl``) one record per job started: rule, level,
    outputs, exit code (negative: killed) and wall seconds; the jobs' own output goes to ``directory/replay.log``."""
    exported, directory = Path(exported).resolve(), Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    listing = json.loads(exported.read_text())["jobs"]
    wanted = needed(listing, targets) if targets is not None else {i: i for i in range(len(listing))}
    pending = [i for i in sorted(wanted, key=lambda i: (wanted[i], i)) if not done(listing[i], directory)]
    records, running, longest, failed = [], {}, {}, False
    # the first server of this process stays for all its runs; a later run's modules are imported in its jobs
    start_server(listing)
    server = multiprocessing.get_context("forkserver")

    def start(i: int) -> dict:
        started = time.monotonic()
        process = server.Process(target=job_process, args=(str(exported), i, str(directory.resolve()),
                                                            str((directory / "replay.log").resolve())))
        process.start()
        process.join(None if stop_at is None else max(stop_at - time.monotonic(), 0))
        if process.exitcode is None:
            process.kill()
            process.join()
        code = process.exitcode
        return {"rule": listing[i]["rule"], "level": listing[i]["level"], "output": listing[i]["output"]["items"],
                "returncode": code, "seconds": round(time.monotonic() - started, 3)}

    def may_start(i: int) -> bool:
        return stop_at is None or time.monotonic() + longest.get(listing[i]["rule"], 0.0) < stop_at

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        while True:
            level = min((listing[i]["level"] for i in [*pending, *running.values()]), default=None)
            for i in [i for i in pending if listing[i]["level"] == level and not failed and may_start(i)]:
                if len(running) == jobs:
                    break
                pending.remove(i)
                running[pool.submit(start, i)] = i
            if not running:
                break
            finished, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in finished:
                del running[future]
                record = future.result()
                records.append(record)
                with open(directory / "replay.jsonl", "a") as out:
                    out.write(json.dumps(record) + "\n")
                failed |= record["returncode"] > 0
                longest[record["rule"]] = max(longest.get(record["rule"], 0.0), record["seconds"])
                state = {0: "done"}.get(record["returncode"], "KILLED" if record["returncode"] < 0 else "FAILED")
                log(f"{state} {record['rule']} {record['output'][0] if record['output'] else ''} "
                    f"in {record['seconds']:.1f} s")
    return records


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    exporting = commands.add_parser("export", help="list the jobs of targets (needs Snakemake)")
    exporting.add_argument("out")
    exporting.add_argument("--configfile", nargs="*", default=[])
    exporting.add_argument("--targets", nargs="*", default=[])
    running = commands.add_parser("run", help="run the listed jobs (needs no Snakemake)")
    running.add_argument("exported")
    running.add_argument("--directory", default=".")
    running.add_argument("--jobs", type=int, default=1)
    one = commands.add_parser("job", help="run one listed job in this process, from the work directory")
    one.add_argument("exported")
    one.add_argument("index", type=int)
    args = parser.parse_args(argv)
    if args.command == "export":
        listing = export(args.configfile, targets=args.targets)
        Path(args.out).write_text(json.dumps(listing))
        print(f"{len(listing['jobs'])} jobs -> {args.out}")
    elif args.command == "run":
        records = run(Path(args.exported), Path(args.directory), args.jobs)
        sys.exit(1 if any(record["returncode"] for record in records) else 0)
    else:
        run_job(Path(args.exported), args.index)


if __name__ == "__main__":
    main()

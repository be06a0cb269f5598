"""The jobs of the workflow's DAG, read from Snakemake itself: the one listing of the jobs (issue 31). The cost plan
prices these jobs; ``python -m kdflow.workflow.dag_jobs CONFIG OUT.jsonl`` writes them, one JSON line each, to diff
two versions of the rules (a refactor that should leave every job as it was).

Snakemake's API builds the DAG without running it but has no public accessor for its jobs, so this reads the
workflow object behind :class:`snakemake.api.DAGApi`: the plan's tests check it against the installed Snakemake's
dry run, and a Snakemake upgrade that moves these internals fails them. Building the full config's DAG takes about
30 CPU-seconds (18,359 jobs); the demo's, about 10.
"""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def plain(value):
    """Params and resources as JSON values (paths and other objects as their strings)."""
    return json.loads(json.dumps(value, default=str, sort_keys=True))


@contextlib.contextmanager
def built_dag(configfiles: Sequence[str | Path] = (), config: Mapping | None = None,
              replace_workflow_config: bool = True, targets: Sequence[str] = (), directory: str | Path = "."):
    """Snakemake's workflow object with the DAG of ``targets`` (the default target when empty) built as if no output
    existed (``--forceall``), with the workflow of this repository, the ``configfiles`` (``--configfile``), the
    ``config`` overrides (``--config``) and ``--replace-workflow-config``, in ``directory``."""
    from snakemake.api import SnakemakeApi
    from snakemake.settings.types import ConfigSettings, DAGSettings, OutputSettings, ResourceSettings

    configfiles = [Path(path).resolve() for path in configfiles]
    with SnakemakeApi(OutputSettings(quiet={"all"})) as api:
        workflow_api = api.workflow(
            resource_settings=ResourceSettings(cores=1), snakefile=REPO / "Snakefile", workdir=Path(directory),
            config_settings=ConfigSettings(configfiles=configfiles, config=dict(config or {}),
                                           replace_workflow_config=replace_workflow_config))
        dag_settings = DAGSettings(targets=set(targets), forceall=True)
        workflow = workflow_api.dag(dag_settings).workflow_api._workflow
        workflow._prepare_dag(forceall=True, ignore_incomplete=True, lock_warn_only=True)
        workflow._build_dag()
        yield workflow


def workflow_jobs(configfiles: Sequence[str | Path] = (), config: Mapping | None = None,
                  replace_workflow_config: bool = True, targets: Sequence[str] = (),
                  directory: str | Path = ".") -> list[dict]:
    """Every job Snakemake would run for ``targets`` if no output existed (:func:`built_dag` says with what). Each
    job: its ``rule``, ``wildcards``, ``params``, ``resources``, ``threads``, ``output``, ``input``, ``log`` and
    ``benchmark``; rules in the order the rule files declare them (the order data flows), each rule's jobs by
    output."""
    with built_dag(configfiles, config, replace_workflow_config, targets, directory) as workflow:
        jobs = [{
            "rule": job.rule.name, "wildcards": dict(job.wildcards_dict), "params": plain(dict(job.params.items())),
            "resources": plain({k: v for k, v in job.resources.items() if k not in ("_cores", "_nodes", "tmpdir")}),
            "threads": job.threads, "output": sorted(map(str, job.output)), "input": sorted(map(str, job.input)),
            "log": sorted(map(str, job.log)), "benchmark": None if job.benchmark is None else str(job.benchmark)}
            for job in workflow.dag.jobs]
        declared = {rule.name: i for i, rule in enumerate(workflow.rules)}
    return sorted(jobs, key=lambda job: (declared[job["rule"]], job["output"]))


def main(configfile: str, out: str) -> None:
    jobs = workflow_jobs([configfile])
    Path(out).write_text("".join(json.dumps(job, sort_keys=True) + "\n" for job in jobs))
    print(f"{len(jobs)} jobs -> {out}")


if __name__ == "__main__":
    main(*sys.argv[1:3])

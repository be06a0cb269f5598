"""Every job of the workflow's DAG for a config, one JSON line each (rule, inputs, outputs, params, resources, log,
benchmark), sorted, through Snakemake's API. Diff two dumps to check that a change of the rule files or of the
helpers they call leaves the jobs as they were: `python tools/dump_dag.py demo/config.yaml before.jsonl`.
The full config takes about 30 CPU-seconds (18,358 jobs)."""

import json
import sys
from pathlib import Path

from snakemake.api import SnakemakeApi
from snakemake.settings.types import ConfigSettings, DAGSettings, OutputSettings, ResourceSettings


def plain(value):
    return json.loads(json.dumps(value, default=str, sort_keys=True))


def main(configfile: str, out: str) -> None:
    with SnakemakeApi(OutputSettings()) as api:
        workflow_api = api.workflow(
            resource_settings=ResourceSettings(cores=1), snakefile=Path("Snakefile"),
            config_settings=ConfigSettings(configfiles=[Path(configfile)], replace_workflow_config=True))
        workflow = workflow_api.dag(DAGSettings(forceall=True)).workflow_api._workflow  # no public handle on jobs
        workflow._prepare_dag(forceall=True, ignore_incomplete=True, lock_warn_only=True)
        workflow._build_dag()
        rows = [json.dumps({
            "rule": job.rule.name, "output": sorted(map(str, job.output)), "input": sorted(map(str, job.input)),
            "params": plain(dict(job.params.items())),
            "resources": plain({k: v for k, v in job.resources.items() if k not in ("_cores", "_nodes", "tmpdir")}),
            "log": sorted(map(str, job.log)), "benchmark": str(job.benchmark)}, sort_keys=True)
            for job in workflow.dag.jobs]
    Path(out).write_text("\n".join(sorted(rows)) + "\n")
    print(f"{len(rows)} jobs -> {out}")


if __name__ == "__main__":
    main(*sys.argv[1:3])

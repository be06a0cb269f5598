"""Rule prepare_task: raw task files (or the hub) -> results/data/{task}/{split}.parquet + meta.json."""

from kdflow.core.data import prepare_task
from kdflow.core.job_setup import log, rule_job
from kdflow.core.tasks import get_task

with rule_job(snakemake):
    source = snakemake.params.source_dir
    meta = prepare_task(get_task(snakemake.wildcards.task), source, snakemake.output[0])
    log.info("prepared %s from %s: %s", meta["task"], source or "the hub", meta["splits"])

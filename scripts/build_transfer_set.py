"""Rule build_transfer_set: train + the set's sources (generated shards, unlabelled text), with hygiene."""

from kdflow.core.data import TaskData
from kdflow.core.job_setup import rule_job
from kdflow.transfer.augmentation import build_transfer_set
from kdflow.transfer.unlabelled import read_unlabelled

with rule_job(snakemake):
    task = TaskData.load(snakemake.input.data)
    hygiene = snakemake.params.hygiene
    unlabelled = snakemake.input.get("unlabelled")
    build_transfer_set(
        task,
        snakemake.output.transfer,
        snakemake.output.hygiene,
        shard_paths=snakemake.input.get("shards", []),
        generated_hygiene=hygiene.get("generated"),
        unlabelled=read_unlabelled(unlabelled, task.meta["pair"]) if unlabelled else None,
        unlabelled_hygiene=hygiene.get("unlabelled"),
    )

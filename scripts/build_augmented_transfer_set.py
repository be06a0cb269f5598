"""Rule build_augmented_transfer_set: train + generated shards, with hygiene."""

from kdflow.data import TaskData
from kdflow.runtime import rule_job
from kdflow.transfer import build_augmented

with rule_job(snakemake):
    build_augmented(
        TaskData.load(snakemake.input.data),
        snakemake.input.shards,
        snakemake.params.keep_unfinished,
        snakemake.output.transfer,
        snakemake.output.hygiene,
    )

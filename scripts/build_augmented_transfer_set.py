"""Rule build_augmented_transfer_set: train + generated shards, with hygiene."""

from kdflow.core.data import TaskData
from kdflow.core.runtime import rule_job
from kdflow.transfer.augmentation import build_augmented

with rule_job(snakemake):
    build_augmented(
        TaskData.load(snakemake.input.data),
        snakemake.input.shards,
        snakemake.output.transfer,
        snakemake.output.hygiene,
        **snakemake.params.hygiene,
    )

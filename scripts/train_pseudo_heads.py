"""Rule train_pseudo_heads: one classifier per layer of a frozen fine-tuned teacher."""

from pathlib import Path

from kdflow.checkpoint import job_checkpoint
from kdflow.data import TaskData
from kdflow.pseudo_heads import train_pseudo_heads
from kdflow.runtime import rule_job, select_device

with rule_job(snakemake):
    checkpoint = job_checkpoint(snakemake)
    train_pseudo_heads(
        TaskData.load(snakemake.input.data),
        Path(snakemake.input.model).parent,
        snakemake.params.settings,
        Path(snakemake.output.metrics).parent,
        select_device(snakemake.params.device),
        checkpoint,
    )
    checkpoint.remove()

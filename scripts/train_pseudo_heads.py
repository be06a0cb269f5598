"""Rule train_pseudo_heads: one classifier per layer of a frozen fine-tuned teacher (their dev scores are
evaluate_pseudo_heads')."""

from pathlib import Path

from kdflow.core.data import TaskData
from kdflow.core.devices import select_device
from kdflow.core.job_setup import rule_job
from kdflow.core.precision import resolve_precision
from kdflow.teachers.pseudo_heads import train_pseudo_heads
from kdflow.training.checkpoint import job_checkpoint
from kdflow.training.curves import tensorboard_for_job

with rule_job(snakemake):
    checkpoint = job_checkpoint(snakemake)
    tensorboard_for_job(snakemake)
    device = select_device(snakemake.params.device)
    train_pseudo_heads(
        TaskData.load(snakemake.input.data),
        Path(snakemake.input.model).parent,
        snakemake.params.settings,
        Path(snakemake.output.heads).parent,
        device,
        checkpoint,
        resolve_precision(snakemake.params.precision, device),
    )
    checkpoint.remove()

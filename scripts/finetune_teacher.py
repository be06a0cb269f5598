"""Rule finetune_teacher: fine-tune one teacher on one task."""

from pathlib import Path

from kdflow.checkpoint import job_checkpoint
from kdflow.data import TaskData
from kdflow.runtime import rule_job, select_device
from kdflow.teacher import finetune
from kdflow.training import Hyperparameters

with rule_job(snakemake):
    checkpoint = job_checkpoint(snakemake)
    settings = snakemake.params.settings
    finetune(
        TaskData.load(snakemake.input.data),
        settings["spec"],
        Hyperparameters.from_dict(settings["hyperparameters"]),
        Path(snakemake.output.metrics).parent,
        select_device(snakemake.params.device),
        checkpoint,
    )
    checkpoint.remove()

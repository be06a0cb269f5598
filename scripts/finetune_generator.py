"""Rule finetune_generator: fine-tune the transfer-set generator on one task's training sentences."""

from pathlib import Path

from kdflow.core.data import TaskData
from kdflow.core.devices import select_device
from kdflow.core.hyperparameters import Hyperparameters
from kdflow.core.job_setup import rule_job
from kdflow.core.precision import resolve_precision
from kdflow.training.checkpoint import job_checkpoint
from kdflow.training.curves import tensorboard_for_job
from kdflow.transfer.generation import finetune_generator

with rule_job(snakemake):
    checkpoint = job_checkpoint(snakemake)
    tensorboard_for_job(snakemake)
    settings = snakemake.params.settings
    device = select_device(snakemake.params.device)
    finetune_generator(
        TaskData.load(snakemake.input.data),
        settings["spec"],
        Hyperparameters.from_dict(settings["hyperparameters"]),
        Path(snakemake.output.model).parent,
        device,
        checkpoint,
        resolve_precision(snakemake.params.precision, device),
    )
    checkpoint.remove()

"""Rule distill_student: one student, one method, one grid point, one seed."""

from pathlib import Path

from kdflow.core.data import TaskData
from kdflow.core.devices import select_device
from kdflow.core.hyperparameters import Hyperparameters
from kdflow.core.precision import resolve_precision
from kdflow.core.runtime import rule_job
from kdflow.distillation.distill import distill
from kdflow.training.checkpoint import job_checkpoint
from kdflow.training.loop import step_compiler
from kdflow.training.curves import tensorboard_for_job

with rule_job(snakemake):
    checkpoint = job_checkpoint(snakemake)
    tensorboard_for_job(snakemake)
    settings = snakemake.params.settings
    device = select_device(snakemake.params.device)
    distill(
        TaskData.load(snakemake.input.data),
        snakemake.input.get("transfer"),
        Path(snakemake.input.teacher).parent,
        snakemake.input.signals,
        settings["student"],
        settings["method"],
        settings["method_options"],
        settings["stages"],
        Hyperparameters.from_dict(settings["hyperparameters"]),
        Path(snakemake.output.metrics).parent,
        device,
        checkpoint,
        resolve_precision(snakemake.params.precision, device),
        step_compiler(snakemake.params.compile_step, device),
    )
    checkpoint.remove()

"""Rule distill_student: one student, one method, one grid point, one seed (or, where a pack trained it, its files
taken from the pack's folder)."""

from pathlib import Path

from kdflow.core.data import TaskData
from kdflow.core.devices import select_device
from kdflow.core.hyperparameters import Hyperparameters
from kdflow.core.io import link_or_copy
from kdflow.core.job_setup import rule_job
from kdflow.core.precision import resolve_precision
from kdflow.distillation.distill import distill
from kdflow.training.checkpoint import job_checkpoint
from kdflow.training.curves import tensorboard_for_job
from kdflow.training.loop import step_compiler

with rule_job(snakemake):
    if snakemake.input.get("pack"):
        member = Path(snakemake.input.pack) / snakemake.params.pack_member  # the run's folder in its pack's
        for output in snakemake.output:
            link_or_copy(member / Path(output).name, Path(output))
    else:
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

"""Rule finetune_teacher: fine-tune one teacher on one task, data-parallel over the job's GPUs if it has several."""

from pathlib import Path

from kdflow.core.data import TaskData
from kdflow.core.devices import select_device
from kdflow.core.hyperparameters import Hyperparameters
from kdflow.core.precision import resolve_precision
from kdflow.core.runtime import rule_job
from kdflow.teachers.finetune import finetune
from kdflow.training.checkpoint import job_checkpoint
from kdflow.training.curves import tensorboard_for_job
from kdflow.training.parallel import process_count, run_processes

with rule_job(snakemake):
    checkpoint = job_checkpoint(snakemake)
    tensorboard_for_job(snakemake)
    settings = snakemake.params.settings
    device = select_device(snakemake.params.device)
    precision = resolve_precision(snakemake.params.precision, device)
    run_processes(
        finetune,
        dict(
            task=TaskData.load(snakemake.input.data),
            spec=settings["spec"],
            hp=Hyperparameters.from_dict(settings["hyperparameters"]),
            out_dir=Path(snakemake.output.model).parent,
            checkpoint=checkpoint,
            precision=precision,
        ),
        process_count(device, snakemake.resources.gpu),
        device,
        log_path=snakemake.log[0],
        threads=snakemake.threads,
    )
    checkpoint.remove()

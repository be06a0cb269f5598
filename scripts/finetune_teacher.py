"""Rule finetune_teacher: fine-tune one teacher on one task, data-parallel over the job's GPUs if it has several."""

from pathlib import Path

from kdflow.core.data import TaskData
from kdflow.core.devices import select_device
from kdflow.core.hyperparameters import Hyperparameters
from kdflow.core.intermediates import read_training_record
from kdflow.core.job_setup import rule_job
from kdflow.core.precision import resolve_precision
from kdflow.teachers.finetune import check_divergence, finetune
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
    teacher, task = snakemake.wildcards.teacher, snakemake.wildcards.task
    # Read from the config, not params: keeping a divergence reruns nothing; after the error, the rerun that keeps
    # it restores the diverged run from its checkpoint instead of training again.
    check_divergence(read_training_record(Path(snakemake.output.model), "teacher"), teacher, task,
                     snakemake.config["teachers"][teacher].get("keep_diverged", False))
    checkpoint.remove()

"""Rule distill_pack: a pack of students of one type and method, trained as one computation, each into its folder."""

from pathlib import Path

from kdflow.core.data import TaskData
from kdflow.core.devices import select_device
from kdflow.core.hyperparameters import Hyperparameters
from kdflow.core.job_setup import rule_job
from kdflow.core.precision import resolve_precision
from kdflow.distillation.distill import distill_pack
from kdflow.training.checkpoint import job_checkpoint
from kdflow.training.curves import tensorboard_for_job

with rule_job(snakemake):
    checkpoint = job_checkpoint(snakemake)
    tensorboard_for_job(snakemake)
    members = snakemake.params.members
    settings = members[0]["settings"]  # every member's but its hyperparameters and loss weights
    device = select_device(snakemake.params.device)
    distill_pack(
        TaskData.load(snakemake.input.data),
        snakemake.input.get("transfer"),
        Path(snakemake.input.teacher).parent,
        snakemake.input.signals,
        settings["student"],
        settings["method"],
        [member["settings"]["method_options"] for member in members],
        settings["stages"],
        [Hyperparameters.from_dict(member["settings"]["hyperparameters"]) for member in members],
        [Path(snakemake.output[0]) / member["folder"] for member in members],
        device,
        checkpoint,
        resolve_precision(snakemake.params.precision, device),
    )
    checkpoint.remove()

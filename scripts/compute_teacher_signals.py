"""Rule compute_teacher_signals: the frozen teacher's outputs on the transfer set, once."""

from pathlib import Path

from kdflow.core.data import TaskData
from kdflow.core.devices import select_device
from kdflow.core.job_setup import rule_job
from kdflow.core.precision import resolve_precision
from kdflow.training.checkpoint import job_checkpoint
from kdflow.transfer.frames import transfer_frame
from kdflow.transfer.labelling import compute_signals

with rule_job(snakemake):
    checkpoint = job_checkpoint(snakemake)
    hyperparameters = snakemake.params.settings["hyperparameters"]
    device = select_device(snakemake.params.device)
    compute_signals(
        transfer_frame(TaskData.load(snakemake.input.data), snakemake.input.get("transfer")),
        snakemake.wildcards.transfer,
        Path(snakemake.input.model).parent,
        snakemake.input.heads,
        snakemake.params.needed_signals,
        hyperparameters["max_seq_length"],
        hyperparameters["eval_batch_size"],
        device,
        snakemake.output[0],
        checkpoint,
        resolve_precision(snakemake.params.precision, device),
    )
    checkpoint.remove()

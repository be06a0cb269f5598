"""Rule compute_teacher_signals: the frozen teacher's outputs on the transfer set, once."""

from pathlib import Path

from kdflow.checkpoint import job_checkpoint
from kdflow.data import TaskData
from kdflow.runtime import rule_job, select_device
from kdflow.signals import compute_signals
from kdflow.transfer import transfer_frame

with rule_job(snakemake):
    checkpoint = job_checkpoint(snakemake)
    hyperparameters = snakemake.params.settings["hyperparameters"]
    compute_signals(
        transfer_frame(TaskData.load(snakemake.input.data), snakemake.input.get("transfer")),
        snakemake.wildcards.transfer,
        Path(snakemake.input.model).parent,
        snakemake.input.heads,
        snakemake.params.include_layers,
        hyperparameters["max_seq_length"],
        hyperparameters["eval_batch_size"],
        select_device(snakemake.params.device),
        snakemake.output[0],
        checkpoint,
    )
    checkpoint.remove()

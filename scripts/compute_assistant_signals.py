"""Rule compute_assistant_signals: a distilled teacher assistant's logits on the transfer set (TAKD)."""

from pathlib import Path

from kdflow.core.data import TaskData
from kdflow.core.devices import select_device
from kdflow.core.job_setup import rule_job
from kdflow.core.precision import resolve_precision
from kdflow.distillation.assistant import compute_assistant_signals
from kdflow.transfer.frames import transfer_frame

with rule_job(snakemake):
    task = TaskData.load(snakemake.input.data)
    settings = snakemake.params.settings
    device = select_device(snakemake.params.device)
    compute_assistant_signals(
        transfer_frame(task, snakemake.input.get("transfer")),
        settings["transfer"],
        task.num_labels,
        Path(snakemake.input.metrics).parent,
        Path(snakemake.input.teacher).parent,
        settings["hyperparameters"]["max_seq_length"],
        settings["hyperparameters"]["eval_batch_size"],
        device,
        snakemake.output[0],
        resolve_precision(snakemake.params.precision, device),
    )

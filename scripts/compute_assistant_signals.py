"""Rule compute_assistant_signals: a distilled teacher assistant's logits on the transfer set (TAKD)."""

from pathlib import Path

from kdflow.data import TaskData
from kdflow.runtime import rule_job, select_device
from kdflow.signals import compute_assistant_signals

with rule_job(snakemake):
    hyperparameters = snakemake.params.settings["hyperparameters"]
    compute_assistant_signals(
        TaskData.load(snakemake.input.data),
        "train",
        Path(snakemake.input.metrics).parent,
        Path(snakemake.input.teacher).parent,
        hyperparameters["max_seq_length"],
        hyperparameters["eval_batch_size"],
        select_device(snakemake.params.device),
        snakemake.output[0],
    )

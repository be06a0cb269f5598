"""Rule evaluate_generator: a fine-tuned generator's dev perplexity, with its training record and learning curves."""

from pathlib import Path

from kdflow.core.data import TaskData
from kdflow.core.devices import select_device
from kdflow.core.job_setup import rule_job
from kdflow.core.precision import resolve_precision
from kdflow.transfer.generation import evaluate_generator

with rule_job(snakemake):
    device = select_device(snakemake.params.device)
    evaluate_generator(
        TaskData.load(snakemake.input.data),
        Path(snakemake.input.model),
        Path(snakemake.output.metrics).parent,
        device,
        resolve_precision(snakemake.params.precision, device),
    )

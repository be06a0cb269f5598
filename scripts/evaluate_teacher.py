"""Rule evaluate_teacher: a fine-tuned teacher's scores, dev logits and test predictions, with its training record."""

from pathlib import Path

from kdflow.core.data import TaskData
from kdflow.core.devices import select_device
from kdflow.core.job_setup import rule_job
from kdflow.core.precision import resolve_precision
from kdflow.teachers.finetune import evaluate_teacher

with rule_job(snakemake):
    device = select_device(snakemake.params.device)
    evaluate_teacher(
        TaskData.load(snakemake.input.data),
        Path(snakemake.input.model),
        Path(snakemake.output.metrics).parent,
        device,
        resolve_precision(snakemake.params.precision, device),
    )

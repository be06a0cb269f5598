"""Rule evaluate_pseudo_heads: the dev scores of a teacher's pseudo-heads, layer by layer, and their training record."""

from pathlib import Path

from kdflow.core.data import TaskData
from kdflow.core.devices import select_device
from kdflow.core.job_setup import rule_job
from kdflow.core.precision import resolve_precision
from kdflow.teachers.pseudo_heads import evaluate_pseudo_heads

with rule_job(snakemake):
    device = select_device(snakemake.params.device)
    evaluate_pseudo_heads(
        TaskData.load(snakemake.input.data),
        Path(snakemake.input.model).parent,
        snakemake.input.heads,
        Path(snakemake.output.metrics).parent,
        device,
        resolve_precision(snakemake.params.precision, device),
    )

"""Rule select_students: per task, student and method, the best grid point on dev (mean over the selection seeds),
recorded with the whole grid."""

import json
from pathlib import Path

from kdflow.core.job_setup import rule_job
from kdflow.distillation.selection import select_experiment

with rule_job(snakemake):
    runs = snakemake.params.runs
    selection = select_experiment(runs["runs"], list(snakemake.input.metrics), runs["main_metrics"], runs["compare_to"],
                                  list(snakemake.input.get("predictions", [])) or None, runs["selection_seeds"])
    Path(snakemake.output[0]).write_text(json.dumps(selection, indent=2) + "\n")

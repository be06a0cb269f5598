"""Rule figure_experiment_curves: the dev learning curve of every run of an experiment, and the data behind it."""

import json
from pathlib import Path

from kdflow.core.job_setup import rule_job
from kdflow.reporting.experiment_curves import experiment_curves, experiment_curves_figure

with rule_job(snakemake):
    selection = json.loads(Path(snakemake.input.selection).read_text())
    data = experiment_curves(snakemake.params.runs, snakemake.input.curves, snakemake.input.metrics, selection)
    data.to_csv(snakemake.output.data, index=False, float_format="%.4f")
    experiment_curves_figure(data, snakemake.output.figure, snakemake.wildcards.experiment)

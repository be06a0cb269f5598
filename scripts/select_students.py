"""Rule select_students: per task, student and method, the best grid point on dev (mean over the selection seeds), and the
experiment's table of the selected students, with their tests against the experiment's baseline, and of its whole
grid."""

import json
from pathlib import Path

from kdflow.core.runtime import rule_job
from kdflow.distillation.selection import select_experiment
from kdflow.reporting.tables import experiment_document, experiment_table, grid_table

with rule_job(snakemake):
    runs = snakemake.params.runs
    selection = select_experiment(runs["runs"], list(snakemake.input.metrics), runs["main_metrics"], runs["compare_to"],
                                  list(snakemake.input.get("predictions", [])) or None, runs["selection_seeds"])
    Path(snakemake.output.selection).write_text(json.dumps(selection, indent=2) + "\n")
    table = experiment_table(selection)
    table.to_csv(snakemake.output.csv, index=False, float_format="%.4f")
    grid = grid_table(selection)
    grid.to_csv(snakemake.output.grid, index=False, float_format="%.4f")
    experiment_document(snakemake.wildcards.experiment, table, grid).write(snakemake.output.markdown,
                                                                           snakemake.output.html)

"""Rule experiment_table: the experiment's table of the students selected on dev, with their tests against the
experiment's baseline, and of its whole grid."""

import json
from pathlib import Path

from kdflow.core.runtime import rule_job
from kdflow.reporting.tables import experiment_document, experiment_table, grid_table

with rule_job(snakemake):
    selection = json.loads(Path(snakemake.input.selection).read_text())
    table = experiment_table(selection)
    table.to_csv(snakemake.output.csv, index=False, float_format="%.4f")
    grid = grid_table(selection)
    grid.to_csv(snakemake.output.grid, index=False, float_format="%.4f")
    experiment_document(snakemake.wildcards.experiment, table, grid).write(snakemake.output.markdown,
                                                                           snakemake.output.html)

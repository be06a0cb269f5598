"""Rule experiment_table: the experiment's table of the students selected on dev, with their tests against the
experiment's baseline, of its whole grid, and its exported students."""

import json
from pathlib import Path

from kdflow.core.job_setup import rule_job
from kdflow.reporting.tables import experiment_document, experiment_table, exports_table, grid_table
from kdflow.workflow.results_paths import EXPORT

with rule_job(snakemake):
    selection = json.loads(Path(snakemake.input.selection).read_text())
    table = experiment_table(selection)
    table.to_csv(snakemake.output.csv, index=False, float_format="%.4f")
    grid = grid_table(selection)
    grid.to_csv(snakemake.output.grid, index=False, float_format="%.4f")
    exported = snakemake.params.exported
    keys = [(student["task"], student["student"], student["method"]) for student in exported]
    exports = exports_table(dict(zip(keys, snakemake.input.cards, strict=True)),
                            {key: EXPORT.format(**student) for key, student in zip(keys, exported, strict=True)})
    experiment_document(snakemake.wildcards.experiment, table, grid, exports).write(snakemake.output.markdown,
                                                                                    snakemake.output.html)

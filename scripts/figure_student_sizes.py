"""Rule figure_student_sizes: one of thesis Figs. B.10-B.12, the best dev score of every student size."""

from kdflow.core.job_setup import rule_job
from kdflow.reporting.exploration_curves import load_runs, size_cells
from kdflow.reporting.figures.thesis import size_heatmaps

with rule_job(snakemake):
    params = snakemake.params
    cells = size_cells(load_runs(params.runs, snakemake.input.curves, snakemake.input.metrics), params.sizes)
    size_heatmaps(cells, snakemake.output.figure, params.title)
    cells.to_csv(snakemake.output.data, index=False, float_format="%.6g")

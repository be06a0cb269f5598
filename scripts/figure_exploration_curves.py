"""Rule figure_exploration_curves: one of thesis Figs. B.1-B.7 from the learning curves of its studies' runs."""

import pandas as pd

from kdflow.core.job_setup import rule_job
from kdflow.reporting.exploration_curves import curve_lines, load_runs
from kdflow.reporting.figures.thesis import exploration_curves_figure

with rule_job(snakemake):
    params = snakemake.params
    runs = load_runs(params.runs, snakemake.input.curves, snakemake.input.metrics)
    lines, best = curve_lines(runs, epochs=2.0)
    raw = params.spec.get("unsmoothed")
    unsmoothed = runs[(runs.study == raw["study"]) & (runs.point == raw["point"])] if raw else None
    exploration_curves_figure(lines, best, params.labels, snakemake.output.figure, params.title, unsmoothed)
    pd.concat([lines.assign(kind="smoothed"), best.rename(columns={"dev": "best"}).assign(kind="best")],
              ignore_index=True).to_csv(snakemake.output.data, index=False, float_format="%.6g")

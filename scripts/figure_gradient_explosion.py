"""Rule figure_gradient_explosion: thesis Fig. B.8 (a run's gradient explosion) or Fig. B.9 (the learning rate at
the point where its learning slows), from the run's learning curves."""

import pandas as pd

from kdflow.core.runtime import rule_job
from kdflow.reporting.exploration import explosion_curve, knee, load_runs
from kdflow.reporting.figures import explosion_figure, learning_rate_figure

with rule_job(snakemake):
    params = snakemake.params
    curve = explosion_curve(load_runs(params.runs, snakemake.input.curves, snakemake.input.metrics), epochs=0.1)
    if params.kind == "explosion":
        explosion_figure(curve, snakemake.output.figure, params.title)
        curve.to_csv(snakemake.output.data, index=False, float_format="%.6g")
    else:
        at = knee(curve["epoch"], curve["smoothed"])
        learning_rate_figure(curve, at, snakemake.output.figure, params.title)
        curve.assign(learning_slows=pd.Series(curve.index == at, index=curve.index)).to_csv(
            snakemake.output.data, index=False, float_format="%.6g")

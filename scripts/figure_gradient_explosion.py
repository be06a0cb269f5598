"""Rule figure_gradient_explosion: thesis Fig. B.8 (a run's gradient explosion) or Fig. B.9 (the learning rate at
the point where its learning slows during warm-up), from the run's learning curves."""

from kdflow.core.job_setup import rule_job
from kdflow.reporting.exploration_curves import explosion_curve, knee, load_runs, warmup_stretch
from kdflow.reporting.figures.thesis import explosion_figure, learning_rate_figure

with rule_job(snakemake):
    params = snakemake.params
    curve = explosion_curve(load_runs(params.runs, snakemake.input.curves, snakemake.input.metrics), epochs=0.1)
    if params.kind == "explosion":
        explosion_figure(curve, snakemake.output.figure, params.title)
        curve.to_csv(snakemake.output.data, index=False, float_format="%.6g")
    else:
        warmup = warmup_stretch(curve)
        at = knee(warmup["epoch"], warmup["smoothed"])
        learning_rate_figure(warmup, at, snakemake.output.figure, params.title)
        warmup.assign(learning_slows=warmup.index == at).to_csv(snakemake.output.data, index=False,
                                                                  float_format="%.6g")

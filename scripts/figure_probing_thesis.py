"""Rule figure_probing_thesis: thesis Figs. 6.1, 6.2, 6.3 and C.1 with kdflow's results beside the thesis's, and
the thesis's reference lines (human, majority class, Conneau et al.'s best, morphology guess) where the config
names them (probing.thesis.baselines)."""

import pandas as pd

from kdflow.core.job_setup import rule_job
from kdflow.reporting.figures.thesis import thesis_probing_figure
from kdflow.reporting.probing_reference import read_reference_lines

with rule_job(snakemake):
    comparison = pd.read_csv(snakemake.input.comparison, dtype={"thesis_layer": str, "thesis_figures": str})
    probing = pd.read_csv(snakemake.input.probing)
    baselines = snakemake.input.get("baselines")
    reference = read_reference_lines(baselines) if baselines else None
    for output, figure_id in snakemake.params.figures.items():
        thesis_probing_figure(comparison, probing, figure_id, snakemake.output[output], reference)

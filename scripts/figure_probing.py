"""Rule figure_probing: thesis Figs. 6.1-6.2 from the probing table."""

import pandas as pd

from kdflow.core.job_setup import rule_job
from kdflow.reporting.figures.thesis import probing_figure

with rule_job(snakemake):
    table = pd.read_csv(snakemake.input[0])
    probing_figure(table, snakemake.output.layers)
    probing_figure(table, snakemake.output.depth, relative_depth=True)

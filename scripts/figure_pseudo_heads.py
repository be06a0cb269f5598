"""Rule figure_pseudo_heads: Universal-KD Fig. 3 (left) from the teacher table."""

import pandas as pd

from kdflow.core.job_setup import rule_job
from kdflow.reporting.figures.universal_kd import pseudo_head_figure

with rule_job(snakemake):
    pseudo_head_figure(pd.read_csv(snakemake.input[0]), snakemake.output[0])

"""Rule probing_thesis_table: the thesis's probing scores beside kdflow's, as CSV and Markdown."""

import pandas as pd

from kdflow.core.job_setup import rule_job
from kdflow.reporting.paper_tables import read_deviations
from kdflow.reporting.probing_reference import comparison_document, read_thesis_scores, thesis_comparison

with rule_job(snakemake):
    params = snakemake.params
    table = thesis_comparison(pd.read_csv(snakemake.input.probing), read_thesis_scores(snakemake.input.scores),
                              params.models, params.missing, params.pooling)
    table.to_csv(snakemake.output.csv, index=False, float_format="%.4f")
    deviations = read_deviations(snakemake.input.get("deviations"))
    comparison_document(table, deviations).write(snakemake.output.markdown, snakemake.output.html)

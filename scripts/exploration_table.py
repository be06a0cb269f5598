"""Rule exploration_table: thesis Table 5.1, the values explored beside the thesis's choice and kdflow's best."""

import pandas as pd

from kdflow.core.job_setup import rule_job
from kdflow.reporting.exploration_curves import load_runs, table51, table51_document
from kdflow.reporting.paper_tables import read_deviations

with rule_job(snakemake):
    params = snakemake.params
    runs = load_runs(params.runs, snakemake.input.curves, snakemake.input.metrics)
    table = table51(pd.read_csv(snakemake.input.reference), params.studies, runs)
    table.to_csv(snakemake.output.csv, index=False, float_format="%.4f")
    deviations = read_deviations(snakemake.input.get("deviations"))
    table51_document(table, deviations).write(snakemake.output.markdown, snakemake.output.html)

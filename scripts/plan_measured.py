"""Rule plan_measured: the cost plan's hours beside those the run's benchmark files measured -> CSV, Markdown, HTML."""

import pandas as pd

from kdflow.core.job_setup import rule_job
from kdflow.reporting.plan_pages import measured_against_plan, measured_document

with rule_job(snakemake):
    table = measured_against_plan(pd.read_csv(snakemake.input.jobs, keep_default_na=False))
    table.to_csv(snakemake.output.table, index=False, float_format="%.6g")
    measured_document(table).write(snakemake.output.markdown, snakemake.output.html)

"""Rule teacher_table: teachers and per-layer pseudo-heads per task -> CSV and Markdown."""

from kdflow.core.job_setup import rule_job
from kdflow.reporting.tables import teacher_table, write_table

with rule_job(snakemake):
    table = teacher_table(snakemake.params.jobs, snakemake.input.teachers, snakemake.input.heads)
    write_table(table, snakemake.output.csv, snakemake.output.markdown, snakemake.output.html)

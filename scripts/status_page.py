"""Rule status_page: every table and figure of the three works and what this run has of it -> CSV, Markdown, HTML."""

from kdflow.core.job_setup import rule_job
from kdflow.reporting.status import artifact_status, paper_table_cells, status_document
from kdflow.reporting.works import read_artifacts, with_files

with rule_job(snakemake):
    artifacts = with_files(read_artifacts(snakemake.input.artifacts), snakemake.params.paper_files)
    status = artifact_status(artifacts, snakemake.params.targets)
    status.to_csv(snakemake.output.table, index=False)
    status_document(status, paper_table_cells(status)).write(snakemake.output.markdown, snakemake.output.html)

"""Rule ledger_table: the deviation ledger (reference/deviations.yaml) -> CSV, Markdown and HTML; the run's default
targets (params.targets) and the files that make the works' items (params.paper_files) say which of the results it
names this config makes."""

from kdflow.core.job_setup import rule_job
from kdflow.reporting.ledger import ledger_document, ledger_frame, read_ledger

with rule_job(snakemake):
    entries, run = read_ledger(snakemake.input.ledger), (snakemake.params.targets, snakemake.params.paper_files)
    ledger_frame(entries, *run).to_csv(snakemake.output.table, index=False)
    ledger_document(entries, *run).write(snakemake.output.markdown, snakemake.output.html)

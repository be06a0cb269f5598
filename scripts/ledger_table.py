"""Rule ledger_table: the deviation ledger (reference/deviations.yaml) -> CSV, Markdown and HTML; the run's default
targets (params.targets) say which of the results it names this config makes."""

from kdflow.core.runtime import rule_job
from kdflow.reporting.ledger import ledger_document, ledger_frame, read_ledger

with rule_job(snakemake):
    entries = read_ledger(snakemake.input.ledger)
    ledger_frame(entries, snakemake.params.targets).to_csv(snakemake.output.table, index=False)
    ledger_document(entries, snakemake.params.targets).write(snakemake.output.markdown, snakemake.output.html)

"""Rule ledger_table: the deviation ledger (reference/deviations.yaml) -> CSV, Markdown and HTML."""

from kdflow.core.runtime import rule_job
from kdflow.reporting.ledger import ledger_document, ledger_frame, read_ledger

with rule_job(snakemake):
    entries = read_ledger(snakemake.input.ledger)
    ledger_frame(entries).to_csv(snakemake.output.table, index=False)
    ledger_document(entries).write(snakemake.output.markdown, snakemake.output.html)

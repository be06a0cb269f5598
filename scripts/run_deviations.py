"""Rule run_deviations: a paper result's ledger entries as they hold for this run's config, as JSON."""

from kdflow.core.io import write_json
from kdflow.core.job_setup import rule_job
from kdflow.reporting.protocols import deviations_of

with rule_job(snakemake):
    entries = deviations_of(snakemake.input.ledger, snakemake.wildcards.result, snakemake.params.run_config,
                            snakemake.input.protocols, snakemake.params.spec)
    write_json(snakemake.output[0], entries)

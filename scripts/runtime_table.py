"""Rule runtime_table: thesis Table 4.5 from the benchmark files of the pipeline's jobs."""

import pandas as pd

from kdflow.core.job_setup import rule_job
from kdflow.reporting.runtime_table import read_benchmark, runtime_table, write_runtime_table

with rule_job(snakemake):
    benchmarks = [read_benchmark(path) for path in snakemake.input.benchmarks]
    table = runtime_table(pd.read_csv(snakemake.input.reference), snakemake.params.jobs, benchmarks)
    write_runtime_table(table, snakemake.output.csv, snakemake.output.markdown, snakemake.output.latex,
                        snakemake.output.html)

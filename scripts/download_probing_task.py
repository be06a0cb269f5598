"""Rule download_probing_task: one SentEval probing file from SentEval's GitHub repository."""

from pathlib import Path

from kdflow.core.job_setup import rule_job
from kdflow.probing.senteval import download_probing_file

with rule_job(snakemake):
    download_probing_file(Path(snakemake.output[0]).name, snakemake.output[0])

"""Rule plan_calibrated: the cost plan calibrated on the jobs that ran (kdflow.reporting.calibration) -> CSV, Markdown
and HTML."""

import logging

import pandas as pd

from kdflow.core.job_setup import rule_job
from kdflow.reporting.calibration import calibrate, measured_seconds
from kdflow.reporting.plan_pages import calibrated_document

with rule_job(snakemake):
    jobs = pd.read_csv(snakemake.input.jobs, keep_default_na=False)
    per_job, figures, progress = calibrate(jobs, measured_seconds(jobs), snakemake.params.sections)
    per_job.to_csv(snakemake.output.jobs, index=False, float_format="%.6g")
    figures.to_csv(snakemake.output.figures, index=False, float_format="%.6g")
    progress.to_csv(snakemake.output.progress, index=False, float_format="%.6g")
    document = calibrated_document(progress, figures)
    document.write(snakemake.output.markdown, snakemake.output.html)
    logging.getLogger("kdflow").info("\n%s", document.markdown())

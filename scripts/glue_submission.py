"""Rule glue_submission: GLUE test-server files of an experiment's selected students."""

import logging

from kdflow.core.job_setup import rule_job
from kdflow.reporting.submission import write_submissions

with rule_job(snakemake):
    written = write_submissions(snakemake.input.selection, snakemake.params.run_dir, snakemake.output[0])
    logging.getLogger("kdflow").info("wrote %d GLUE server files: %s", len(written), [str(p) for p in written])

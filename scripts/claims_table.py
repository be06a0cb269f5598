"""Rule claims_table: the papers' claims on real data, tested, from the committed runs -> Markdown and HTML."""

import json
from pathlib import Path

import pandas as pd

from kdflow.core.job_setup import rule_job
from kdflow.reporting.claims import claims_document, read_margins, read_runs, searched_points
from kdflow.workflow.config_files import load_config_file

with rule_job(snakemake):
    runs = [run for path in snakemake.input.runs for run in read_runs(path)]
    labels = json.loads(Path(snakemake.input.dev_labels).read_text())
    grids = searched_points(load_config_file(snakemake.input.config))
    reference = pd.read_csv(snakemake.input.reference) if snakemake.input.get("reference") else None
    margins = read_margins(snakemake.input.margins)
    claims_document(runs, labels, margins, grids, reference).write(snakemake.output.markdown, snakemake.output.html,
                                                            snakemake.output.csv)

"""Rule probing_table: every probed model, task and layer with the baselines, as CSV and Markdown."""

import json
from collections import defaultdict
from pathlib import Path

from kdflow.core.job_setup import rule_job
from kdflow.reporting.tables import probing_document, probing_table

with rule_job(snakemake):
    results = defaultdict(list)
    for path in snakemake.input:
        results[Path(path).parent.name].append(json.loads(Path(path).read_text()))
    table = probing_table({model: results[model] for model in snakemake.params.models})
    table.to_csv(snakemake.output.csv, index=False, float_format="%.4f")
    probing_document(table).write(snakemake.output.markdown, snakemake.output.html)

"""Rule figure_analysis: thesis Fig. 6.5 and Fig. C.2 from one task's prediction analysis."""

import json
from pathlib import Path

from kdflow.core.runtime import rule_job
from kdflow.reporting.figures import confidence_heatmap, mistake_overlap_heatmap

with rule_job(snakemake):
    analysis = json.loads(Path(snakemake.input[0]).read_text())
    confidence_heatmap(analysis, snakemake.output.confidence)
    mistake_overlap_heatmap(analysis, snakemake.output.mistakes)

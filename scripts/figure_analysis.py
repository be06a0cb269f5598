"""Rule figure_analysis: thesis Figs. 6.5, 6.6 and C.2 from one task's prediction analysis."""

import json
from pathlib import Path

from kdflow.analysis.prediction_analysis import average_confidence_table
from kdflow.core.job_setup import rule_job
from kdflow.reporting.figures.thesis import average_confidence_figure, confidence_heatmap, mistake_overlap_heatmap

with rule_job(snakemake):
    analysis = json.loads(Path(snakemake.input[0]).read_text())
    confidence_heatmap(analysis, snakemake.output.confidence)
    mistake_overlap_heatmap(analysis, snakemake.output.mistakes)
    average = average_confidence_table(analysis)
    average.to_csv(snakemake.output.average_data, index=False)
    average_confidence_figure(average, snakemake.output.average, analysis.get("task"))

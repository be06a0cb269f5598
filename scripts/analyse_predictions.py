"""Rule analyse_predictions: the thesis's prediction analysis (§6.2) of one task's teacher and students."""

import json
from pathlib import Path

from kdflow.analysis.prediction_analysis import analyse, analysis_document, load_predictions
from kdflow.core.data import TaskData
from kdflow.core.job_setup import rule_job
from kdflow.distillation.selection import predictions_path

with rule_job(snakemake):
    task = TaskData.load(snakemake.input.data)
    tables = {}
    for name, params in snakemake.params.models.items():
        files = {"teacher_model": snakemake.input[f"{name}_teacher"], "runs_dir": params.get("runs_dir"),
                 "selection": snakemake.input.get(f"{name}_selection")}
        tables[name] = predictions_path(params["reference"], files)
    result = analyse(load_predictions(tables), teacher=snakemake.params.teacher, texts=task.split("dev"),
                     k=snakemake.params.examples, labels=task.meta.get("labels"), seed=snakemake.params.seed)
    result["task"] = snakemake.wildcards.task
    Path(snakemake.output.json).write_text(json.dumps(result, indent=1))
    analysis_document(result).write(snakemake.output.markdown, snakemake.output.html, snakemake.output.csv)

"""Rule figure_teacher_curves: thesis Fig. 4.2 from a teacher's learning curves on each of its tasks."""

import pandas as pd

from kdflow.core.job_setup import rule_job
from kdflow.core.tasks import TASKS
from kdflow.reporting.figures.thesis import teacher_curves, teacher_curves_figure

with rule_job(snakemake):
    tasks = snakemake.params.tasks
    curves = {task: pd.read_parquet(path) for task, path in zip(tasks, snakemake.input, strict=True)}
    data = teacher_curves(curves, {task: TASKS[task].main_metric for task in tasks})
    data.to_csv(snakemake.output.data, index=False)
    teacher_curves_figure(data, snakemake.output.figure, snakemake.wildcards.teacher)

"""Rule figure_class_distribution: thesis Fig. A.1 from the prepared tasks' labelled splits."""

from pathlib import Path

import pandas as pd

from kdflow.core.data import TaskData
from kdflow.core.intermediates import read_parquet
from kdflow.core.job_setup import rule_job
from kdflow.reporting.figures.thesis import class_distribution, class_distribution_figure

with rule_job(snakemake):
    frames = []
    for task, directory in zip(snakemake.params.tasks, snakemake.input, strict=True):
        meta = TaskData.load(directory).meta
        splits = {split: read_parquet(Path(directory) / f"{split}.parquet", columns=["label"])["label"]
                  for split in meta["labelled_splits"]}
        frames.append(class_distribution(task, meta["labels"], splits))
    data = pd.concat(frames, ignore_index=True)
    data.to_csv(snakemake.output.data, index=False, float_format="%.6g")
    class_distribution_figure(data, snakemake.output.figure)

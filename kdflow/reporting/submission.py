"""GLUE test-server files for the selected students of an experiment (Universal-KD Table 3 reports the GLUE
test scores of the models selected on dev; test labels are hidden, so the scores come from the server).

For each (student, method) of an experiment, the run submitted is the selected grid point's seed with the best
dev score (dev only, as everywhere). Files follow the server's layout: one ``<Task>.tsv`` per task with the
columns ``index`` and ``prediction``; label names for the NLI tasks, 0/1 for the others, a float for STS-B.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from kdflow.core import run_files
from kdflow.core.intermediates import read_json, read_parquet
from kdflow.core.tasks import GLUE_FILES
from kdflow.distillation.selection import best_seed

NAMED_LABELS = {"mnli", "qnli", "rte"}  # the server reads these tasks' labels as names


def submitted_seed(selection: dict) -> str:
    """The seed of the selected grid point with the best dev score (the first of equals)."""
    return best_seed(selection["grid"][selection["selected"]]["dev_by_seed"])


def glue_file(predictions: pd.DataFrame, task: str, split: str) -> pd.DataFrame:
    rows = predictions[predictions["split"] == split].sort_values("idx")
    if task == "stsb":
        values = rows["prediction"].astype(float).clip(0.0, 5.0)
    elif task in NAMED_LABELS:
        values = rows["prediction_name"]
    else:
        values = rows["prediction"].astype(int)
    return pd.DataFrame({"index": rows["idx"].to_numpy(), "prediction": values.to_numpy()})


def write_submissions(selection_path, student_dir: str, out_dir) -> list[Path]:
    """Write the server files of every selected (student, method) under ``out_dir/<student>/<method>/``.
    ``student_dir`` is the run directory pattern with ``{task}``, ``{student}``, ``{method}``, ``{point}`` and
    ``{seed}`` fields. Tasks the GLUE server does not score (Sara) are skipped."""
    written = []
    for selection in read_json(selection_path)["selections"]:
        task = selection["task"]
        splits = [split for (name, split) in GLUE_FILES if name == task]
        if not splits:
            continue
        run = student_dir.format(task=task, student=selection["student"], method=selection["method"],
                                 point=selection["selected"], seed=submitted_seed(selection))
        predictions = read_parquet(Path(run) / run_files.PREDICTIONS)
        target = Path(out_dir) / selection["student"] / selection["method"]
        target.mkdir(parents=True, exist_ok=True)
        for split in splits:
            path = target / GLUE_FILES[task, split]
            glue_file(predictions, task, split).to_csv(path, sep="\t", index=False)
            written.append(path)
    return written

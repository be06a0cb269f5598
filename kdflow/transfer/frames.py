"""The transfer set a student learns from, as one frame: train, or train plus the generated examples."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from kdflow.core.data import TaskData
from kdflow.core.intermediates import read_parquet

UNLABELLED = -1  # the in-memory class label of a generated example


def transfer_frame(task: TaskData, augmented: Path | None = None) -> pd.DataFrame:
    """The transfer set as a prepared split (idx, text_a, text_b, label, origin): train, or the augmented
    set, whose generated examples get the label ``UNLABELLED`` (NaN for regression)."""
    if augmented is None:
        return task.split("train").assign(origin="train")
    frame = read_parquet(augmented)
    if not task.meta["regression"]:
        frame["label"] = frame["label"].fillna(UNLABELLED).astype("int64")
    return frame

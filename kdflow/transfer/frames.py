"""The transfer set a student learns from, as one frame: train, or train plus unlabelled and/or generated examples."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from kdflow.core.data import TaskData
from kdflow.core.intermediates import read_parquet

ADDED_ORIGINS = ("unlabelled", "generated")  # the sources a transfer set adds to train
UNLABELLED = -1  # the in-memory class label of an example the teacher alone labels


def transfer_frame(task: TaskData, transfer_set: Path | None = None) -> pd.DataFrame:
    """The transfer set as a prepared split (idx, text_a, text_b, label, origin): train, or a built set's file
    (:func:`kdflow.transfer.augmentation.build_transfer_set`), whose added examples get the label ``UNLABELLED``
    (NaN for regression)."""
    if transfer_set is None:
        return task.split("train").assign(origin="train")
    frame = read_parquet(transfer_set)
    if not task.meta["regression"]:
        frame["label"] = frame["label"].fillna(UNLABELLED).astype("int64")
    return frame

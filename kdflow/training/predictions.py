"""A model's predictions on a split as one table: the format of every ``predictions.parquet`` (teachers and
students), read by the GLUE submission and the prediction analysis."""

from __future__ import annotations

import numpy as np
import pandas as pd

from kdflow.core import metrics
from kdflow.training.batching import EncodedSplit


def prediction_table(split_name, frame, logits, split: EncodedSplit, regression: bool, labels) -> pd.DataFrame:
    """One row per example: split, idx, gold label (if any), predicted label, raw logits."""
    pred = metrics.predictions(logits, regression)
    table = pd.DataFrame(
        {
            "split": split_name,
            "idx": frame["idx"].to_numpy(),
            "label": frame["label"].to_numpy(),
            "prediction": pred,
            "logits": list(logits.astype(np.float32)),
        }
    )
    if not regression:
        table["prediction_name"] = [labels[i] for i in pred]
    return table

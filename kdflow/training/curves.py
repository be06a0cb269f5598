"""Learning curves: every dev evaluation of a training run (the history of :func:`kdflow.training.loop.train`) as
a tidy table, ``curves.parquet`` beside the job's ``metrics.json``, for plotting and comparing runs without
parsing JSON.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from kdflow.core.io import atomic_output


def write_curves(path: str | Path, history: list[dict]) -> None:
    """One row per dev evaluation (a student's with its ``stage``), its columns the history's fields, atomically."""
    with atomic_output(path) as temporary:
        pd.DataFrame.from_records(history).to_parquet(temporary, index=False)

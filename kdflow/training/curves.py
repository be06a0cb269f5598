"""Learning curves: every dev evaluation of a training run (the history of :func:`kdflow.training.loop.train`) as
a tidy table, ``curves.parquet`` beside the job's ``metrics.json``, for plotting and comparing runs without
parsing JSON; optionally also as TensorBoard event files written while the run trains, to watch it live.

TensorBoard is off by default (``tensorboard: false`` in the config) and needs the optional ``tensorboard``
package. A rule job turns it on with :func:`tensorboard_for_job`, which names the job's event directory,
``logs/tensorboard/<rule>/<wildcards>``, in the environment rather than in an argument: the ranks of a multi-GPU
job are processes of their own and inherit it, and the job functions need no parameter for it. Each training run
of the job writes to its own subdirectory (``train``; a student's stages ``stage1``, ``stage2``, ...), which
TensorBoard shows as a run; rank 0 alone writes. A run that starts afresh replaces an earlier attempt's events; a
resumed run hides those logged after its checkpoint, which it logs again.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pandas as pd

from kdflow.core.errors import UserError
from kdflow.core.intermediates import write_parquet
from kdflow.core.io import atomic_output
from kdflow.training.checkpoint import job_name

TENSORBOARD_DIR = "KDFLOW_TENSORBOARD_DIR"  # environment variable: where the job's training runs write events


def write_curves(path: str | Path, history: list[dict]) -> None:
    """One row per dev evaluation (a student's with its ``stage``), its columns the history's fields, atomically."""
    with atomic_output(path) as temporary:
        write_parquet(pd.DataFrame.from_records(history), temporary)


def tensorboard_for_job(snakemake) -> None:
    """With ``tensorboard: true`` in the config, have the job's training runs write TensorBoard events under
    ``logs/tensorboard/<job name>``. Read from the config rather than params, so that switching it reruns nothing."""
    if snakemake.config.get("tensorboard", False):
        os.environ[TENSORBOARD_DIR] = str(Path("logs/tensorboard") / job_name(snakemake))


class LiveCurves:
    """The TensorBoard events of one training run: each evaluation's record, a scalar per field at its optimiser
    step. It writes nothing unless the job turned TensorBoard on and ``writes`` (rank 0 of a multi-GPU job)."""

    def __init__(self, run: str, resumed_at_step: int, writes: bool = True):
        directory = os.environ.get(TENSORBOARD_DIR)
        self.writer = _summary_writer(Path(directory) / run, resumed_at_step) if directory and writes else None

    def add(self, record: dict) -> None:
        if self.writer is None:
            return
        for name, value in record.items():
            if name != "step":
                self.writer.add_scalar(name, value, record["step"])
        self.writer.flush()  # watched live, and a killed job keeps what it logged

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()


def _summary_writer(directory: Path, resumed_at_step: int):
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError as error:  # an optional dependency
        raise UserError("tensorboard: true needs the tensorboard package (pip install tensorboard)") from error
    if not resumed_at_step:
        shutil.rmtree(directory, ignore_errors=True)
    # A resumed run hides the events of the steps after its checkpoint (a killed run logged them): it logs them again.
    return SummaryWriter(directory, purge_step=resumed_at_step + 1 if resumed_at_step else None)

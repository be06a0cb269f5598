"""Teacher signals, the file format: the frozen teacher's outputs on a transfer set, computed once per teacher,
task and transfer set (:mod:`kdflow.transfer.labelling`) and shared by every student job, which reads them here
and runs no teacher forward pass. A TAKD teacher assistant's signals are its logits alone.

Stored per example, in the transfer set's row order: ``logits`` [n, C], ``head_logits`` [n, N, C] (the
pseudo-heads on layers 1..N) and, when a hidden-space method needs them, ``layers`` [n, N, H] (the pooled
layer representations the heads read, float16), and ``idx``; logits are float32. These dtypes are the file's
contract whatever precision computed the signals (``precision`` in the file's metadata): the values of a
bf16-computed file differ from an fp32 one's within bf16's rounding, which makes the precision part of the
signals' identity, so the config's ``precision`` is a param of the jobs that write them (a change recomputes
them and retrains their students). Per-example signals are independent of the student's tokenisation, so a
BiLSTM over word vectors can learn from a WordPiece teacher.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from kdflow.core.intermediates import DamagedFile
from kdflow.core.tensor_files import TensorFile


@dataclass
class TeacherSignals:
    """The teacher's outputs for a batch, read from the cache computed once per teacher, task and transfer set."""

    logits: torch.Tensor  # [B, C]
    head_logits: torch.Tensor | None = None  # [B, N, C]: pseudo-heads on teacher layers 1..N
    layers: torch.Tensor | None = None  # [B, N, H_t]: first-token vector of teacher layers 1..N


class SignalCache:
    """Teacher signals held on the training device, looked up by the batch's example positions. Only the
    signals in ``names`` are read (all if None): a logit-only method on an 800,000-sentence transfer set
    need not hold every pseudo-head's output (for Sara's 57 intents and BERT-large, 4 GB)."""

    def __init__(self, path: Path, device, expected_idx: np.ndarray, names: set[str] | None = None):
        with TensorFile(path) as f:
            if not np.array_equal(f.get("idx").numpy(), expected_idx):
                raise DamagedFile(path, "its examples are not the transfer set's")
            self.shapes = {name: f.shape(name) for name in f.keys() if name != "idx"}
            self.stored = set(self.shapes)
            self.tensors = {name: f.get(name).to(device) for name in self.stored if names is None or name in names}

    @property
    def available(self) -> set[str]:
        return self.stored

    @property
    def teacher_layers(self) -> int:
        for name in ("head_logits", "layers"):
            if name in self.shapes:
                return self.shapes[name][1]
        return 0

    @property
    def teacher_width(self) -> int:
        return self.shapes["layers"][2] if "layers" in self.shapes else 0

    def __getitem__(self, index: torch.Tensor) -> TeacherSignals:
        get = lambda name: self.tensors[name][index].float() if name in self.tensors else None  # noqa: E731
        return TeacherSignals(get("logits"), get("head_logits"), get("layers"))

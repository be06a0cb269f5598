"""Teacher signals, the file format: the frozen teacher's outputs on a transfer set, computed once per teacher,
task and transfer set (:mod:`kdflow.transfer.labelling`) and shared by every student job, which reads them here
and runs no teacher forward pass. A TAKD teacher assistant's signals are its logits alone.

Each signal is an entry of :data:`SIGNALS` (:func:`register_signal`): a function of one teacher forward pass
(:class:`TeacherForward`) and the dtype it is stored in. Stored per example, in the transfer set's row order:
``logits`` [n, C] and ``head_logits`` [n, N, C] (the pseudo-heads on layers 1..N) always, float32; a signal
registered ``on_demand`` only when a method of the teacher and task needs it (:func:`stored_signals`), such as
``layers`` [n, N, H] (the pooled layer representations the heads read, float16); and ``idx``. A method reads a
signal as ``teacher[name]`` (or an attribute, for the three above). These dtypes are the file's contract whatever
precision computed the signals (``precision`` in the file's metadata): the values of a
bf16-computed file differ from an fp32 one's within bf16's rounding, which makes the precision part of the
signals' identity, so the config's ``precision`` is a param of the jobs that write them (a change recomputes
them and retrains their students). Per-example signals are independent of the student's tokenisation, so a
BiLSTM over word vectors can learn from a WordPiece teacher.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, fields
from pathlib import Path

import numpy as np
import torch

from kdflow.core.errors import UserError
from kdflow.core.intermediates import DamagedFile
from kdflow.core.tensor_files import TensorFile


@dataclass
class TeacherForward:
    """What one teacher forward pass on a batch gives, from which every signal is computed."""

    logits: torch.Tensor  # [B, C]
    hidden_states: tuple[torch.Tensor, ...]  # the embeddings' output, then layers 1..N, each [B, T, H]
    attention_mask: torch.Tensor  # [B, T]
    pooled: torch.Tensor  # [B, N, H]: layers 1..N pooled as the pseudo-heads read them
    head_logits: torch.Tensor  # [B, N, C]


@dataclass(frozen=True)
class Signal:
    compute: Callable[[TeacherForward], torch.Tensor]  # [B, ...]
    example_shape: Callable[[int, int, int], tuple[int, ...]]  # one example's, of the teacher's layers, width, classes
    dtype: torch.dtype  # as stored
    on_demand: bool  # stored only where a method needs it


SIGNALS: dict[str, Signal] = {}


def register_signal(name: str, example_shape: Callable[[int, int, int], tuple[int, ...]],
                    dtype: torch.dtype = torch.float32, on_demand: bool = True):
    """Decorator: ``compute(forward) -> [B, ...]`` becomes the teacher signal ``name``, stored as ``dtype``;
    ``example_shape(N, H, C)`` is the shape of one example's (what tests build synthetic signals from)."""

    def add(compute):
        if name in SIGNALS or name == "idx":
            raise ValueError(f"teacher signal {name!r} is registered twice")
        SIGNALS[name] = Signal(compute, example_shape, dtype, on_demand)
        return compute

    return add


register_signal("logits", lambda layers, width, classes: (classes,), on_demand=False)(lambda forward: forward.logits)
register_signal("head_logits", lambda layers, width, classes: (layers, classes), on_demand=False)(
    lambda forward: forward.head_logits)
register_signal("layers", lambda layers, width, classes: (layers, width), torch.float16)(lambda forward: forward.pooled)


def stored_signals(needed: Iterable[str]) -> list[str]:
    """The signals a file holds for methods that need ``needed``: every one not on demand, and those needed."""
    needed = set(needed)
    if unknown := sorted(needed - set(SIGNALS)):
        raise UserError(f"unknown teacher signals {unknown}; registered: {sorted(SIGNALS)}")
    return [name for name, signal in SIGNALS.items() if not signal.on_demand or name in needed]


@dataclass
class TeacherSignals:
    """The teacher's outputs for a batch, read from the cache computed once per teacher, task and transfer set."""

    logits: torch.Tensor  # [B, C]
    head_logits: torch.Tensor | None = None  # [B, N, C]: pseudo-heads on teacher layers 1..N
    layers: torch.Tensor | None = None  # [B, N, H_t]: first-token vector of teacher layers 1..N
    others: dict[str, torch.Tensor] = field(default_factory=dict)  # every other registered signal read

    def __getitem__(self, name: str) -> torch.Tensor | None:
        return getattr(self, name) if name in OWN_FIELDS else self.others.get(name)


OWN_FIELDS = tuple(field.name for field in fields(TeacherSignals) if field.name != "others")


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

    @property
    def example_shapes(self) -> dict[str, tuple[int, ...]]:
        """Each stored signal's shape for one example (``layers``: (N, H)), which a method's parts are sized by."""
        return {name: tuple(shape[1:]) for name, shape in self.shapes.items()}

    def __getitem__(self, index: torch.Tensor) -> TeacherSignals:
        read = {name: tensor[index].float() for name, tensor in self.tensors.items()}
        return TeacherSignals(*(read.pop(name, None) for name in OWN_FIELDS), others=read)

"""Teacher signals: the frozen teacher's outputs on a transfer set, computed once per teacher, task and
transfer set, and shared by every student job (which then runs no teacher forward pass). A TAKD teacher
assistant's signals are its logits alone.

Stored per example, in the transfer set's row order: ``logits`` [n, C], ``head_logits`` [n, N, C] (the
pseudo-heads on layers 1..N) and, when a hidden-space method needs them, ``layers`` [n, N, H] (the pooled
layer representations the heads read, float16). Per-example signals are independent of the student's
tokenisation, so a BiLSTM over word vectors can learn from a WordPiece teacher.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from safetensors import safe_open
from safetensors.torch import save_file
from transformers import AutoTokenizer

from kdflow.batching import batches, encode, to_device
from kdflow.checkpoint import Checkpoint, resumable_chunks
from kdflow.hf import load_classifier
from kdflow.methods import TeacherSignals
from kdflow.outputs import atomic_output
from kdflow.pseudo_heads import load_heads, teacher_outputs

log = logging.getLogger("kdflow")


@torch.no_grad()
def compute_signals(
    frame: pd.DataFrame, transfer: str, teacher_dir: Path, heads_path: Path, include_layers: bool,
    max_seq_length: int, batch_size: int, device, out_path: Path, checkpoint: Checkpoint | None = None,
) -> dict[str, int]:
    """Label the transfer set ``frame`` (see :func:`kdflow.transfer.transfer_frame`) with the teacher, once
    (resuming from the batches a ``checkpoint`` holds)."""
    teacher_dir = Path(teacher_dir)
    tokenizer = AutoTokenizer.from_pretrained(teacher_dir / "model")
    model = load_classifier(teacher_dir / "model").to(device).eval()
    heads, pooling = load_heads(heads_path)
    heads.to(device)
    split = encode(frame, tokenizer, max_seq_length, labelled=False)

    def label(index: int, batch: dict) -> dict[str, torch.Tensor]:
        logits, pooled = teacher_outputs(model, to_device(batch, device), pooling)
        outputs = {"logits": logits.float().cpu(), "head_logits": heads(pooled).cpu()}
        return {**outputs, "layers": pooled.half().cpu()} if include_layers else outputs

    labelled = resumable_chunks(batches(split, batch_size, regression=False), label, checkpoint)
    tensors = {name: torch.cat([outputs[name] for outputs in labelled]) for name in labelled[0]}
    tensors["idx"] = torch.tensor(frame["idx"].to_numpy())
    with atomic_output(out_path) as path:
        save_file(tensors, str(path), metadata={"transfer": transfer, "pooling": pooling})
    shapes = {name: list(t.shape) for name, t in tensors.items()}
    log.info("teacher signals for %d examples of the %s transfer set: %s", len(frame), transfer, shapes)
    return shapes


@torch.no_grad()
def compute_assistant_signals(
    frame: pd.DataFrame, transfer: str, num_labels: int, run_dir: Path, teacher_dir: Path, max_seq_length: int,
    batch_size: int, device, out_path: Path,
) -> dict[str, int]:
    """The logits of a distilled teacher assistant (TAKD) on the transfer set: the signals its student learns from."""
    from kdflow.distill import load_distilled  # distill imports this module

    assistant = load_distilled(run_dir, teacher_dir, num_labels).to(device)
    tokenizer = AutoTokenizer.from_pretrained(Path(teacher_dir) / "model")
    split = encode(frame, tokenizer, max_seq_length, labelled=False)
    logits = [assistant(to_device(batch, device)).logits.float().cpu() for batch in batches(split, batch_size, False)]
    tensors = {"logits": torch.cat(logits), "idx": torch.tensor(frame["idx"].to_numpy())}
    with atomic_output(out_path) as path:
        save_file(tensors, str(path), metadata={"transfer": transfer, "assistant": str(run_dir)})
    log.info("assistant %s logits for %d examples of the %s transfer set", run_dir, len(frame), transfer)
    return {name: list(t.shape) for name, t in tensors.items()}


class SignalCache:
    """Teacher signals held on the training device, looked up by the batch's example positions. Only the
    signals in ``names`` are read (all if None): a logit-only method on an 800,000-sentence transfer set
    need not hold every pseudo-head's output (for Sara's 57 intents and BERT-large, 4 GB)."""

    def __init__(self, path: Path, device, expected_idx: np.ndarray, names: set[str] | None = None):
        with safe_open(str(path), framework="pt") as f:
            if not np.array_equal(f.get_tensor("idx").numpy(), expected_idx):
                raise ValueError(f"{path}: teacher signals do not match the transfer set's examples (rerun the signals)")
            self.shapes = {name: f.get_slice(name).get_shape() for name in f.keys() if name != "idx"}
            self.stored = set(self.shapes)
            self.tensors = {name: f.get_tensor(name).to(device) for name in self.stored if names is None or name in names}

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

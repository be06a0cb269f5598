"""The teacher labels a transfer set, once: its logits, its pseudo-heads' outputs and the signals its methods need
(for hidden-space methods its pooled layers), each a registered signal of :mod:`kdflow.transfer.signals` and
written in that module's format, in the job's precision (the stored dtypes do not depend on it). Resumable by
chunks of batches."""

from __future__ import annotations

import logging
from pathlib import Path

import pandas as pd
import torch
from transformers import AutoTokenizer

from kdflow.core.io import atomic_output
from kdflow.core.precision import FP32, Precision
from kdflow.core.tensor_files import save_tensors
from kdflow.teachers.pseudo_heads import load_heads, teacher_pass
from kdflow.training.batching import batches, to_device, tokenize
from kdflow.training.checkpoint import Checkpoint, resumable_chunks
from kdflow.training.hf_models import load_classifier
from kdflow.transfer.signals import SIGNALS, TeacherForward, stored_signals

log = logging.getLogger("kdflow")


@torch.no_grad()
def compute_signals(
    frame: pd.DataFrame, transfer: str, teacher_dir: Path, heads_path: Path, needed: list[str],
    max_seq_length: int, batch_size: int, device, out_path: Path, checkpoint: Checkpoint | None = None,
    precision: Precision = FP32,
) -> dict[str, int]:
    """Label the transfer set ``frame`` (see :func:`kdflow.transfer.frames.transfer_frame`) with the teacher, once
    (resuming from the batches a ``checkpoint`` holds), its forward passes in ``precision``: the signals stored are
    those every method needs and the ones ``needed`` names (:func:`kdflow.transfer.signals.stored_signals`)."""
    stored = stored_signals(needed)
    teacher_dir = Path(teacher_dir)
    tokenizer = AutoTokenizer.from_pretrained(teacher_dir / "model")
    model = load_classifier(teacher_dir / "model").to(device).eval()
    heads, pooling = load_heads(heads_path)
    heads.to(device)
    split = tokenize(frame, tokenizer, max_seq_length, labelled=False)

    def label(index: int, batch: dict) -> dict[str, torch.Tensor]:
        batch = to_device(batch, device)
        with precision.autocast():
            logits, hidden_states, pooled = teacher_pass(model, batch, pooling)
            forward = TeacherForward(logits, hidden_states, batch["attention_mask"], pooled, heads(pooled))
            # the file's dtypes (kdflow.transfer.signals), whatever autocast computed in
            return {name: SIGNALS[name].compute(forward).to(SIGNALS[name].dtype).cpu() for name in stored}

    labelled = resumable_chunks(batches(split, batch_size, regression=False), label, checkpoint)
    tensors = {name: torch.cat([outputs[name] for outputs in labelled]) for name in labelled[0]}
    tensors["idx"] = torch.tensor(frame["idx"].to_numpy())
    with atomic_output(out_path) as path:
        save_tensors(tensors, path, {"transfer": transfer, "pooling": pooling, "precision": precision.name})
    shapes = {name: list(t.shape) for name, t in tensors.items()}
    log.info("teacher signals for %d examples of the %s transfer set: %s", len(frame), transfer, shapes)
    return shapes

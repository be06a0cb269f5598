"""TAKD: a distilled teacher assistant labels the transfer set with its logits, which its student learns from."""

from __future__ import annotations

import logging
from pathlib import Path

import pandas as pd
import torch
from transformers import AutoTokenizer

from kdflow.core.io import atomic_output
from kdflow.core.precision import FP32, Precision
from kdflow.core.tensor_files import save_tensors
from kdflow.students.loading import load_distilled
from kdflow.students.tokens import student_tokenizer
from kdflow.training.batching import batches, to_device, tokenize

log = logging.getLogger("kdflow")


@torch.no_grad()
def compute_assistant_signals(
    frame: pd.DataFrame, transfer: str, num_labels: int, run_dir: Path, teacher_dir: Path, max_seq_length: int,
    batch_size: int, device, out_path: Path, precision: Precision = FP32,
) -> dict[str, int]:
    """The logits of a distilled teacher assistant (TAKD) on the transfer set, computed in ``precision`` and stored
    in float32: the signals its student learns from."""
    assistant = load_distilled(run_dir, teacher_dir, num_labels).to(device)
    tokenizer = AutoTokenizer.from_pretrained(Path(teacher_dir) / "model")
    split = tokenize(frame, student_tokenizer(assistant, tokenizer), max_seq_length, labelled=False)
    with precision.autocast():
        logits = [assistant(to_device(batch, device)).logits.float().cpu()
                  for batch in batches(split, batch_size, False)]
    tensors = {"logits": torch.cat(logits), "idx": torch.tensor(frame["idx"].to_numpy())}
    with atomic_output(out_path) as path:
        save_tensors(tensors, path, {"transfer": transfer, "assistant": str(run_dir), "precision": precision.name})
    log.info("assistant %s logits for %d examples of the %s transfer set", run_dir, len(frame), transfer)
    return {name: list(t.shape) for name, t in tensors.items()}

"""Tokenise a prepared split once, then serve batches padded to their own longest sequence.

Padding every batch to a fixed 128 tokens wastes most of the compute on GLUE, whose median sentence is far
shorter; dynamic padding gives identical results (attention masks exclude padding) at a fraction of the cost.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch


# Each row's count of real tokens, kept on the host by to_device: packing a recurrent student's sequences needs them
# there (pack_padded_sequence), and reading them from the device mask would make every step wait for it.
HOST_LENGTHS = "lengths"


@dataclass
class EncodedSplit:
    """Token ids of every example of a split (unpadded) and its labels (None when unlabelled)."""

    input_ids: list[list[int]]
    token_type_ids: list[list[int]]
    labels: np.ndarray | None
    pad_id: int

    def __len__(self) -> int:
        return len(self.input_ids)


def tokenize(frame: pd.DataFrame, tokenizer, max_length: int, labelled: bool) -> EncodedSplit:
    text_b = frame["text_b"] if frame["text_b"].notna().any() else None
    enc = tokenizer(
        list(frame["text_a"]),
        None if text_b is None else list(text_b),
        truncation=True,
        max_length=max_length,
        return_token_type_ids=True,
    )
    labels = frame["label"].to_numpy() if labelled else None
    return EncodedSplit(enc["input_ids"], enc["token_type_ids"], labels, tokenizer.pad_token_id)


def collate(split: EncodedSplit, indices: np.ndarray, regression: bool) -> dict[str, torch.Tensor]:
    longest = max(len(split.input_ids[i]) for i in indices)
    input_ids = torch.full((len(indices), longest), split.pad_id, dtype=torch.long)
    token_type_ids = torch.zeros((len(indices), longest), dtype=torch.long)
    attention_mask = torch.zeros((len(indices), longest), dtype=torch.long)
    for row, i in enumerate(indices):
        n = len(split.input_ids[i])
        input_ids[row, :n] = torch.tensor(split.input_ids[i])
        token_type_ids[row, :n] = torch.tensor(split.token_type_ids[i])
        attention_mask[row, :n] = 1
    batch = {"input_ids": input_ids, "token_type_ids": token_type_ids, "attention_mask": attention_mask}
    if split.labels is not None:
        labels = split.labels[indices]
        batch["labels"] = torch.tensor(labels, dtype=torch.float32 if regression else torch.long)
    batch["index"] = torch.as_tensor(indices)
    batch[HOST_LENGTHS] = attention_mask.sum(1)
    return batch


def batches(
    split: EncodedSplit,
    batch_size: int,
    regression: bool,
    shuffle: bool = False,
    generator: np.random.Generator | None = None,
) -> Iterator[dict[str, torch.Tensor]]:
    """Batches in file order, or shuffled with ``generator`` (seeded by the caller, for reproducibility)."""
    order = generator.permutation(len(split)) if shuffle else np.arange(len(split))
    for start in range(0, len(order), batch_size):
        yield collate(split, order[start : start + batch_size], regression)


def to_device(batch: dict[str, torch.Tensor], device: torch.device) -> dict[str, torch.Tensor]:
    """The batch on ``device``, but for its tokens' counts (:data:`HOST_LENGTHS`), which stay on the host."""
    return {key: value if key == HOST_LENGTHS else value.to(device, non_blocking=True) for key, value in batch.items()}


def host_lengths(batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """Each row's count of real tokens, on the host (read from the mask, a host sync, if the batch lacks them)."""
    lengths = batch.get(HOST_LENGTHS)
    return lengths if lengths is not None else batch["attention_mask"].sum(1).cpu()


def batch_rows(batch: dict[str, torch.Tensor]) -> int:
    return len(next(iter(batch.values())))  # every entry of a batch has one row per example

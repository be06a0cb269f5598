"""Tokenise a prepared split once, then serve batches padded to a few fixed lengths.

Padding every batch to a fixed 128 tokens wastes most of the compute on GLUE, whose median sentence is far
shorter; dynamic padding gives identical results (attention masks and packed lengths exclude padding) at a
fraction of the cost. A training epoch's batches pad to the smallest of a few lengths that holds their longest
example (``length_buckets`` of them, evenly spaced up to the split's ``max_length``), not to every batch's own
longest: an epoch then has a handful of shapes, which CUDA graphs and the GPU's memory allocator reuse. The
order of the examples, and which ones share a batch, stay the papers'; only the padding changes, and with it
what a model with dropout draws: its masks are drawn over the padded shape, so such a run differs from one padded
to each batch's longest as a rerun with another dropout seed would (the demo's scores moved by up to 0.03 in a
logit); without dropout the outputs are the same to float tolerance (tests/test_students.py). The last batch
of an epoch keeps its own, smaller row count: every loss is a mean over its batch's rows, so masked filler rows
would change each method's reduction for one more shape per epoch.

Collation is vectorised: the split's tokens sit in one padded array, and a batch is a slice of its rows; on a
CUDA device a batch is copied from pinned memory without blocking the host.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import torch


# Each row's count of real tokens, kept on the host by to_device: packing a recurrent student's sequences needs them
# there (pack_padded_sequence), and reading them from the device mask would make every step wait for it.
HOST_LENGTHS = "lengths"
LENGTH_MULTIPLE = 8  # bucket lengths are multiples of 8: the tile that half-precision tensor cores compute in


@dataclass
class EncodedSplit:
    """Token ids of every example of a split (unpadded), its labels (None when unlabelled) and the longest
    sequence its tokeniser allowed (``max_length``; its longest example where that is longer, or None given). The same tokens also sit padded in
    one array per field (built once, for vectorised collation): a split is not edited after it is made."""

    input_ids: list[list[int]]
    token_type_ids: list[list[int]]
    labels: np.ndarray | None
    pad_id: int
    max_length: int | None = None
    lengths: np.ndarray = field(init=False, repr=False)
    padded_ids: np.ndarray = field(init=False, repr=False)
    padded_types: np.ndarray = field(init=False, repr=False)

    def __post_init__(self):
        self.lengths = np.fromiter(map(len, self.input_ids), dtype=np.int64, count=len(self.input_ids))
        longest = int(self.lengths.max(initial=1))
        # a reader may cut at its own limit, or none, in place of the job's (kdflow.students.tokens.WholeSentences)
        self.max_length = max(self.max_length or 0, longest)
        # int32 halves a large transfer set's arrays; a batch is int64, as embedding lookups take it
        self.padded_ids = np.full((len(self), longest), self.pad_id, dtype=np.int32)
        self.padded_types = np.zeros((len(self), longest), dtype=np.int32)
        real = np.arange(longest) < self.lengths[:, None]
        if len(self):
            self.padded_ids[real] = np.concatenate(self.input_ids)
            self.padded_types[real] = np.concatenate(self.token_type_ids)

    def __len__(self) -> int:
        return len(self.input_ids)

    def reordered(self, order: np.ndarray) -> "EncodedSplit":
        """The split's examples in ``order``."""
        return EncodedSplit([self.input_ids[i] for i in order], [self.token_type_ids[i] for i in order],
                            None if self.labels is None else self.labels[order], self.pad_id, self.max_length)


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
    return EncodedSplit(enc["input_ids"], enc["token_type_ids"], labels, tokenizer.pad_token_id, max_length)


def bucket_lengths(max_length: int, buckets: int) -> list[int]:
    """The lengths a split of sequences up to ``max_length`` tokens pads its batches to: ``buckets`` evenly
    spaced multiples of :data:`LENGTH_MULTIPLE`, the last one ``max_length`` itself."""
    step = math.ceil(max_length / buckets / LENGTH_MULTIPLE) * LENGTH_MULTIPLE
    return sorted({min(length, max_length) for length in range(step, max_length + step, step)})


def padded_length(longest: int, max_length: int, buckets: int | None) -> int:
    """The length a batch whose longest example has ``longest`` tokens pads to (``buckets`` None: ``longest``)."""
    if buckets is None:
        return longest
    return next(length for length in bucket_lengths(max_length, buckets) if length >= longest)


def collate(split: EncodedSplit, indices: np.ndarray, regression: bool,
            length_buckets: int | None = None) -> dict[str, torch.Tensor]:
    """The examples ``indices`` of ``split`` as a batch, padded as :func:`padded_length` says."""
    lengths = split.lengths[indices]
    width = padded_length(int(lengths.max()), split.max_length, length_buckets)
    stored = min(width, split.padded_ids.shape[1])
    input_ids = np.full((len(indices), width), split.pad_id, dtype=np.int64)
    token_type_ids = np.zeros((len(indices), width), dtype=np.int64)
    input_ids[:, :stored] = split.padded_ids[indices, :stored]
    token_type_ids[:, :stored] = split.padded_types[indices, :stored]
    attention_mask = (np.arange(width) < lengths[:, None]).astype(np.int64)
    batch = {"input_ids": torch.from_numpy(input_ids), "token_type_ids": torch.from_numpy(token_type_ids),
             "attention_mask": torch.from_numpy(attention_mask)}
    if split.labels is not None:
        batch["labels"] = torch.tensor(split.labels[indices], dtype=torch.float32 if regression else torch.long)
    batch["index"] = torch.as_tensor(indices)
    batch[HOST_LENGTHS] = torch.from_numpy(lengths)
    return batch


def batches(
    split: EncodedSplit,
    batch_size: int,
    regression: bool,
    shuffle: bool = False,
    generator: np.random.Generator | None = None,
    length_buckets: int | None = None,
) -> Iterator[dict[str, torch.Tensor]]:
    """Batches in file order, or shuffled with ``generator`` (seeded by the caller, for reproducibility), each
    padded to the smallest of ``length_buckets`` lengths that holds it (None: to its longest example)."""
    order = generator.permutation(len(split)) if shuffle else np.arange(len(split))
    for start in range(0, len(order), batch_size):
        yield collate(split, order[start : start + batch_size], regression, length_buckets)


def to_device(batch: dict[str, torch.Tensor], device: torch.device) -> dict[str, torch.Tensor]:
    """The batch on ``device``, but for its tokens' counts (:data:`HOST_LENGTHS`), which stay on the host. To a CUDA
    device it goes from pinned memory, so that the copy does not block the host (a pageable copy does)."""
    pinned = torch.device(device).type == "cuda"
    return {key: value if key == HOST_LENGTHS else (value.pin_memory() if pinned and not value.is_cuda else value)
            .to(device, non_blocking=True) for key, value in batch.items()}


def host_lengths(batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """Each row's count of real tokens, on the host (read from the mask, a host sync, if the batch lacks them)."""
    lengths = batch.get(HOST_LENGTHS)
    return lengths if lengths is not None else batch["attention_mask"].sum(1).cpu()


def batch_rows(batch: dict[str, torch.Tensor]) -> int:
    return len(next(iter(batch.values())))  # every entry of a batch has one row per example

"""Sentence encodings of a probing task by one model, computed once for every layer and cached.

The cache is one safetensors file per (model, probing task) with a tensor ``layer<i>.<split>`` [n, H] per layer
and split, stored in float16 (BERT-large's 25 layers of SentEval's 120,000 sentences are 6 GB in half
precision) whatever precision the model ran in (``precision`` in the file's metadata); a probe of one layer reads
only that layer's tensors.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import torch

from kdflow.core.io import atomic_output
from kdflow.core.precision import FP32, Precision
from kdflow.core.tensor_files import TensorFile, save_tensors
from kdflow.probing.senteval import ProbingData
from kdflow.training.batching import batches, to_device, tokenize

SPLITS = ("train", "dev", "test")


@torch.no_grad()
def encode_sentences(model, sentences: list[str], pooling: str, batch_size: int, max_length: int,
                     device: torch.device, precision: Precision = FP32) -> list[torch.Tensor]:
    """Every layer's vectors [n, H_l] (float16) of every sentence, in input order (layers can differ in width), the
    model run in ``precision``.
    ``model``: a :class:`kdflow.distillation.named_models.LoadedModel` (not imported: the probe reads these files
    without loading any model code)."""
    frame = pd.DataFrame({"text_a": sentences, "text_b": None})
    split = tokenize(frame, model.tokenizer, max_length, labelled=False)
    # sorted by length so that batches carry little padding; written back in input order
    order = np.argsort(split.lengths, kind="stable")
    split = split.reordered(order)
    model.module.to(device)
    with precision.autocast():
        chunks = [[layer.to(torch.float16).cpu() for layer in model.layers(to_device(batch, device), pooling)]
                  for batch in batches(split, batch_size, regression=False)]
    inverse = torch.from_numpy(np.argsort(order))
    return [torch.cat(per_layer)[inverse] for per_layer in zip(*chunks)]


def write_encodings(model, data: ProbingData, path: str | Path, pooling: str, batch_size: int,
                    max_length: int, device: torch.device, precision: Precision = FP32) -> dict:
    """Encode the three splits of a probing task and save them; returns the layer count and sizes."""
    # token-level models' layer 0 is the embedding output; other students' layers are numbered from 1
    first_layer = 0 if model.token_level else 1
    tensors = {}
    for split in SPLITS:
        encoded = encode_sentences(model, getattr(data, split).sentences, pooling, batch_size, max_length, device,
                                   precision)
        tensors.update({f"layer{first_layer + i}.{split}": layer.contiguous() for i, layer in enumerate(encoded)})
    layers = len(encoded)
    with atomic_output(path) as temporary:
        save_tensors(tensors, temporary, {"layers": str(layers), "first_layer": str(first_layer),
                                          "pooling": pooling if model.token_level else "own",
                                          "precision": precision.name})
    return {"layers": layers, "first_layer": first_layer, "widths": [int(layer.shape[-1]) for layer in encoded],
            **{split: len(getattr(data, split).sentences) for split in SPLITS}}


def encoding_layers(path: str | Path) -> list[int]:
    """The layer numbers in a cache (0: embeddings)."""
    with TensorFile(path) as cache:
        metadata = cache.metadata
    first = int(metadata["first_layer"])
    return list(range(first, first + int(metadata["layers"])))


def read_layer(path: str | Path, layer: int) -> dict[str, np.ndarray]:
    """``{split: [n, H] float32}`` of one layer (by its number, as :func:`encoding_layers` lists them)."""
    with TensorFile(path) as cache:
        return {split: cache.get(f"layer{layer}.{split}").float().numpy() for split in SPLITS}

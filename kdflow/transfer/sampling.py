"""Sampling one shard of the generated transfer set from the fine-tuned generator (:mod:`kdflow.transfer.generation`):
seeded, in resumable chunks, decoded into sentence pairs at the separator token. Apart from the hygiene and
statistics (:mod:`kdflow.transfer.augmentation`), so that only the jobs that sample run the generator's code."""

from __future__ import annotations

import logging
import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from kdflow.core.data import TaskData
from kdflow.core.intermediates import write_parquet
from kdflow.core.io import atomic_output
from kdflow.core.precision import FP32, Precision
from kdflow.training.checkpoint import Checkpoint, resumable_chunks
from kdflow.transfer.generation import (
    SEPARATOR,
    SamplingSettings,
    encode_examples,
    first_token_prefixes,
    load_generator,
    sample,
)

log = logging.getLogger("kdflow")

CHUNK_SLOTS = 16  # prefixes per sampling chunk, in sampler slots (a draining chunk leaves slots idle: keep it long)


def shard_size(total: int, shards: int, shard: int) -> int:
    return total // shards + (shard < total % shards)


def sample_shard(task: TaskData, generator_dir: Path, shard: int, shards: int, total: int, seed: int, prefix: str,
                 settings: SamplingSettings, device, out_path: Path, dtype: str = "float32",
                 checkpoint: Checkpoint | None = None, precision: Precision = FP32) -> dict:
    """Sample shard ``shard`` of ``shards`` (its share of ``total`` sentences) with its own seed, derived from
    ``(seed, shard)``: a rerun reproduces the same sentences (on the same hardware, in the same precision), and
    shards run as independent jobs. ``dtype`` is the generator weights' storage: bfloat16 halves a GPU's memory
    traffic per decoding step; ``precision`` is what the forward passes compute in (autocast): float32 weights
    under bf16 compute in bfloat16 and keep a bfloat16 KV cache. The next-token softmax stays float32 in both.

    The shard samples its prefixes in chunks of ``CHUNK_SLOTS`` x ``batch_size``, each with its own seed, so
    that a ``checkpoint`` can hold the chunks done and a killed shard resumes with the same sentences."""
    started = time.perf_counter()
    model, tokenizer = load_generator(generator_dir)
    model.to(device, getattr(torch, dtype))
    rng = np.random.default_rng([seed, shard])
    count = shard_size(total, shards, shard)
    if prefix == "first_token":
        training = encode_examples(task.split("train"), tokenizer, settings.max_length)
        prefixes = first_token_prefixes(training, count, rng)
    elif prefix == "bos":
        prefixes = [[tokenizer.bos_token_id]] * count
    else:
        raise ValueError(f"unknown prefix mode {prefix!r}: use first_token or bos")
    chunk = CHUNK_SLOTS * settings.batch_size
    chunks = [prefixes[start:start + chunk] for start in range(0, len(prefixes), chunk)]
    seeds = rng.integers(2**62, size=len(chunks))

    def sample_chunk(index: int, chunk_prefixes: list[list[int]]) -> list[tuple[list[int], bool]]:
        generator = torch.Generator(device=device).manual_seed(int(seeds[index]))
        return sample(model, chunk_prefixes, tokenizer.eos_token_id, settings, generator, device, precision)

    outputs = [output for done in resumable_chunks(chunks, sample_chunk, checkpoint) for output in done]
    frame = decode_samples(outputs, tokenizer)
    with atomic_output(out_path) as path:
        write_parquet(frame, path)
    seconds = time.perf_counter() - started
    log.info("shard %d/%d: %d sequences (%d finished) in %.1f s, %.1f sentences/s", shard, shards, len(frame),
             int(frame["finished"].sum()), seconds, len(frame) / seconds)
    return {"sequences": len(frame), "seconds": seconds}


def decode_samples(outputs: list[tuple[list[int], bool]], tokenizer) -> pd.DataFrame:
    """Sampled token sequences to text, split on the separator: text_a, text_b (after the first separator),
    the number of separators, whether the sequence reached eos, and its length in tokens."""
    sep = tokenizer.convert_tokens_to_ids(SEPARATOR)
    decode = lambda ids: tokenizer.decode(ids, skip_special_tokens=True).strip()  # noqa: E731
    rows = []
    for tokens, finished in outputs:
        body = tokens[1:-1] if finished else tokens[1:]  # without bos (and eos)
        cut = body.index(sep) if sep in body else len(body)
        rows.append({
            "text_a": decode(body[:cut]),
            "text_b": decode(body[cut + 1:]) if cut < len(body) else None,
            "separators": body.count(sep),
            "finished": finished,
            "tokens": len(tokens),
        })
    return pd.DataFrame(rows, columns=["text_a", "text_b", "separators", "finished", "tokens"])

"""Transfer-set generation (thesis §3.2, §4.3.2, Table 4.2): a causal language model fine-tuned on a task's
training sentences, then sampled to produce new unlabelled sentences for the teacher to label.

Generator text format, one example per sequence::

    <bos> text_a <|sep|> text_b <eos>      (sentence pairs; single-sentence tasks have no separator)

GPT-2's ``<|endoftext|>`` is both its bos and eos. The separator is a special token added to the vocabulary
(a new embedding row) that the generator learns during fine-tuning, so a sampled pair can be split on it.

Sampling (:func:`sample`) is ancestral by default (temperature 1, no top-k/top-p), from prefixes drawn from
the training set's first-token distribution (as in Tang et al.'s code) or from the bos token alone, until
``<eos>`` or ``max_length`` tokens. It runs a batch of slots over one shared KV cache: a slot whose sequence
ends is refilled at once with the next prefix, so the batch stays full instead of waiting for its longest
sequence, as a batched ``generate`` call would.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer, DynamicCache

from kdflow.core import run_files
from kdflow.core.data import TaskData
from kdflow.core.devices import seed_everything
from kdflow.core.hyperparameters import Hyperparameters
from kdflow.core.intermediates import read_training_record
from kdflow.core.io import write_json
from kdflow.core.precision import FP32, Precision
from kdflow.training.batching import EncodedSplit, batches, to_device
from kdflow.training.checkpoint import Checkpoint
from kdflow.training.curves import write_curves
from kdflow.training.hf_models import attention_mask_4d, build_tokenizer, from_hub, save_trained
from kdflow.training.loop import subset_indices, train

log = logging.getLogger("kdflow")

SEPARATOR = "<|sep|>"
END_OF_TEXT = "<|endoftext|>"


# Generator model and its text format.


def prepare_tokenizer(tokenizer):
    """Give the tokenizer the generator's special tokens: bos/eos (GPT-2's ``<|endoftext|>`` where it has
    none), the pair separator and a padding token (eos, masked out of the loss)."""
    special = {"additional_special_tokens": [SEPARATOR]}
    if tokenizer.eos_token is None:
        special["eos_token"] = END_OF_TEXT
    tokenizer.add_special_tokens(special)
    if tokenizer.bos_token is None:
        tokenizer.bos_token = tokenizer.eos_token
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def build_generator(spec: dict):
    """(model, tokenizer) from a generator spec: ``model`` (hub name or directory, e.g. gpt2-medium) or
    ``architecture`` (``model_type`` plus config fields) with ``tokenizer`` (a WordPiece vocabulary file)
    for a random initialisation (the offline demo). Embeddings are resized for the added special tokens."""
    tokenizer = prepare_tokenizer(build_tokenizer(spec))
    if spec.get("model"):
        model = from_hub(AutoModelForCausalLM.from_pretrained, spec["model"], dtype=torch.float32)
    else:
        arch = dict(spec["architecture"])
        config = AutoConfig.for_model(arch.pop("model_type"), vocab_size=len(tokenizer), bos_token_id=tokenizer.bos_token_id,
                                      eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id, **arch)
        model = AutoModelForCausalLM.from_config(config)
    if model.get_input_embeddings().num_embeddings < len(tokenizer):
        model.resize_token_embeddings(len(tokenizer))
    model.config.bos_token_id, model.config.eos_token_id = tokenizer.bos_token_id, tokenizer.eos_token_id
    model.config.pad_token_id = tokenizer.pad_token_id
    return model, tokenizer


def load_generator(directory: Path):
    directory = Path(directory)
    tokenizer = AutoTokenizer.from_pretrained(directory)
    return AutoModelForCausalLM.from_pretrained(directory, dtype=torch.float32), tokenizer


def encode_examples(frame: pd.DataFrame, tokenizer, max_length: int) -> list[list[int]]:
    """Each example as generator tokens: bos, text_a, [separator, text_b,] eos; truncated to ``max_length``
    keeping the eos (a long training sentence still teaches the model to stop)."""
    sep = tokenizer.convert_tokens_to_ids(SEPARATOR)
    firsts = tokenizer(list(frame["text_a"]), add_special_tokens=False)["input_ids"]
    seconds = (tokenizer(list(frame["text_b"]), add_special_tokens=False)["input_ids"]
               if frame["text_b"].notna().any() else [None] * len(frame))
    sequences = []
    for a, b in zip(firsts, seconds):
        body = a if b is None else a + [sep] + b
        sequences.append([tokenizer.bos_token_id] + body[: max_length - 2] + [tokenizer.eos_token_id])
    return sequences


def lm_split(sequences: list[list[int]], pad_id: int, max_length: int) -> EncodedSplit:
    return EncodedSplit(sequences, [[0] * len(s) for s in sequences], None, pad_id, max_length)


def lm_loss(model, batch) -> torch.Tensor:
    """Mean next-token cross-entropy over the real tokens of the batch (padding excluded)."""
    labels = batch["input_ids"].masked_fill(batch["attention_mask"] == 0, -100)
    mask = attention_mask_4d(model, batch["attention_mask"], causal=True)
    return model(input_ids=batch["input_ids"], attention_mask=mask, labels=labels).loss


@torch.no_grad()
def perplexity(model, split: EncodedSplit, batch_size: int, device, precision: Precision = FP32) -> float:
    """exp of the mean next-token negative log-likelihood over every predicted token of ``split`` (the forward pass
    in ``precision``, the log-likelihoods in float32)."""
    model.eval()
    total, count = 0.0, 0
    for batch in batches(split, batch_size, regression=False):
        batch = to_device(batch, device)
        with precision.autocast():
            logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
        logits = logits[:, :-1].float()
        targets, mask = batch["input_ids"][:, 1:], batch["attention_mask"][:, 1:].bool()
        nll = torch.nn.functional.cross_entropy(logits.transpose(1, 2), targets, reduction="none")
        total += nll[mask].sum().item()
        count += int(mask.sum())
    return math.exp(total / count)


def finetune_generator(task: TaskData, spec: dict, hp: Hyperparameters, out_dir: Path, device,
                       checkpoint: Checkpoint | None = None, precision: Precision = FP32) -> dict:
    """Fine-tune a causal LM on ``task``'s training sentences (thesis Table 4.2: AdamW 5e-5, weight decay 1e-3,
    10% warm-up then linear decay, 1 epoch), its forward passes in ``precision``. Held-out perplexity on dev is
    measured before and after each epoch; the best-dev-perplexity epoch is kept. Writes ``model/`` (with the
    tokenizer and ``training.json``, the training record: a diverged run keeps the weights it diverged with,
    perplexity NaN and ``diverged``, see :mod:`kdflow.training.loop`) and returns the record. What describes the
    model is :func:`evaluate_generator`'s, a rule of its own: losing it does not fine-tune the generator again and
    resample its transfer set."""
    started = time.perf_counter()
    seed_everything(hp.seed)
    model, tokenizer = build_generator(spec)
    model.to(device)
    train_frame = task.split("train")
    train_frame = train_frame.iloc[subset_indices(len(train_frame), hp.max_train_examples, hp.seed)]
    train_split = lm_split(encode_examples(train_frame, tokenizer, hp.max_seq_length), tokenizer.pad_token_id,
                           hp.max_seq_length)
    dev_split = lm_split(encode_examples(task.split("dev"), tokenizer, hp.max_seq_length), tokenizer.pad_token_id,
                         hp.max_seq_length)
    log.info("generator %s: %.1fM parameters, %d training sequences",
             spec.get("model") or spec["architecture"]["model_type"],
             sum(p.numel() for p in model.parameters()) / 1e6, len(train_split))
    before = perplexity(model, dev_split, hp.eval_batch_size, device, precision)
    log.info("dev perplexity before fine-tuning: %.2f", before)

    def evaluate(model):
        ppl = perplexity(model, dev_split, hp.eval_batch_size, device, precision)
        return {"neg_perplexity": -ppl, "perplexity": ppl}

    result = train(model, lm_loss, lambda rng: batches(train_split, hp.batch_size, False, shuffle=True, generator=rng,
                                                       length_buckets=hp.length_buckets),
                   len(train_split), evaluate, "neg_perplexity", hp, device, checkpoint=checkpoint, precision=precision)
    model.load_state_dict(result.best_state)
    record = {
        "task": task.meta["task"],
        "spec": spec,
        "dev_perplexity": -result.best_score,
        "dev_perplexity_before": before,
        "best_epoch": result.best_epoch,
        "diverged": result.diverged,
        "train_sequences": len(train_split),
        "history": result.history,
        "hyperparameters": vars(hp),
        "precision": precision.name,
        "seconds": time.perf_counter() - started,
    }
    save_trained(model, tokenizer, record, Path(out_dir) / "model")
    return record


def evaluate_generator(task: TaskData, model_dir: Path, out_dir: Path, device, precision: Precision = FP32) -> dict:
    """Measure a fine-tuned generator's dev perplexity again (in ``precision``) and write ``metrics.json`` (the
    training record with ``dev_perplexity`` as measured here) and ``curves.parquet`` (from the record's history) in
    ``out_dir``; returns the metrics."""
    record = read_training_record(model_dir, "generator")
    hp = Hyperparameters.from_dict(record["hyperparameters"])
    model, tokenizer = load_generator(model_dir)
    model.to(device)
    dev_split = lm_split(encode_examples(task.split("dev"), tokenizer, hp.max_seq_length), tokenizer.pad_token_id,
                         hp.max_seq_length)
    measured = perplexity(model, dev_split, hp.eval_batch_size, device, precision)
    report = {**record, "dev_perplexity": float("nan") if record["diverged"] else measured,
              "evaluation_precision": precision.name}
    log.info("dev perplexity %.2f (%.2f when it was kept)", measured, record["dev_perplexity"])
    write_json(Path(out_dir) / run_files.METRICS, report)
    write_curves(Path(out_dir) / run_files.CURVES, record["history"])
    return report


# Sampling.


@dataclass(frozen=True)
class SamplingSettings:
    """Ancestral sampling by default; ``temperature: 0`` is greedy decoding (used by tests)."""

    max_length: int = 128  # tokens per sequence, the prefix included (thesis: 128)
    temperature: float = 1.0
    top_k: int = 0  # 0: off
    top_p: float = 1.0  # 1: off
    batch_size: int = 64  # slots decoded together


def first_token_prefixes(sequences: list[list[int]], count: int, rng: np.random.Generator) -> list[list[int]]:
    """``count`` prefixes ``[bos, t]`` with ``t`` drawn from the first-token distribution of the training
    ``sequences`` (generator-encoded, starting with bos)."""
    firsts = np.array([s[1] for s in sequences if len(s) > 2])  # skip empty sentences (bos, eos only)
    values, counts = np.unique(firsts, return_counts=True)
    drawn = rng.choice(values, size=count, p=counts / counts.sum())
    return [[sequences[0][0], int(t)] for t in drawn]


def next_tokens(logits: torch.Tensor, settings: SamplingSettings, generator: torch.Generator) -> torch.Tensor:
    """One token per row of ``logits`` [B, V] under the sampling settings."""
    logits = logits.float()
    if settings.temperature == 0:
        return logits.argmax(-1)
    logits = logits / settings.temperature
    if settings.top_k:
        kth = logits.topk(min(settings.top_k, logits.shape[-1]), dim=-1).values[:, -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if settings.top_p < 1.0:
        sorted_logits, order = logits.sort(-1, descending=True)
        cumulative = sorted_logits.softmax(-1).cumsum(-1)
        drop = cumulative - sorted_logits.softmax(-1) >= settings.top_p  # keep the smallest set reaching top_p
        logits = logits.masked_fill(drop.scatter(-1, order, drop), float("-inf"))
    # argmax of p / E with E ~ Exp(1) draws from p (the exponential race, Gumbel-max in another form): one
    # vectorised pass over the vocabulary, several times faster than torch.multinomial on CPU.
    race = torch.empty_like(logits).exponential_(generator=generator)
    return (logits.softmax(-1) / race).argmax(-1)


@torch.no_grad()
def sample(model, prefixes: list[list[int]], eos_id: int, settings: SamplingSettings, generator: torch.Generator,
           device, precision: Precision = FP32) -> list[tuple[list[int], bool]]:
    """Continue every prefix until ``eos_id`` or ``settings.max_length`` tokens; returns ``(tokens, finished)``
    per prefix, in prefix order (tokens include the prefix and the eos). The model runs in ``precision`` (its KV
    cache in the dtype autocast computes keys and values in), the next-token distribution in float32.

    Every step feeds one token per slot: the next prefix token (forced) or the last sampled one. Each slot
    attends only to its own cache columns (a per-slot attention mask and position ids), so a slot can restart
    with a new prefix while the others continue. Columns no live slot needs are trimmed from the cache.
    """
    model.eval()
    results: list[tuple[list[int], bool] | None] = [None] * len(prefixes)
    queue = iter(range(len(prefixes)))
    slots = [next(queue) for _ in range(min(settings.batch_size, len(prefixes)))]  # prefix index per slot
    sequences = [list(prefixes[p]) for p in slots]  # known tokens of each slot's sequence
    fed = [0] * len(slots)  # how many of them are in the cache
    start = torch.zeros(len(slots), dtype=torch.long, device=device)  # first cache column of each sequence
    cache, length = DynamicCache(), 0  # length: columns in the cache
    while slots:
        step_input = torch.tensor([[s[n]] for s, n in zip(sequences, fed)], device=device)
        attention_mask = (torch.arange(length + 1, device=device)[None, :] >= start[:, None]).long()
        with precision.autocast():
            logits = model(input_ids=step_input, attention_mask=attention_mask, position_ids=(length - start)[:, None],
                           cache=cache, use_cache=True).logits[:, -1]
        length += 1
        sampled = next_tokens(logits, settings, generator).tolist()
        keep = []
        for i in range(len(slots)):
            fed[i] += 1
            if fed[i] == len(sequences[i]):  # the whole sequence is in the cache: extend it
                sequences[i].append(sampled[i])
                if sampled[i] == eos_id or len(sequences[i]) >= settings.max_length:
                    results[slots[i]] = (sequences[i], sampled[i] == eos_id)
                    refill = next(queue, None)
                    if refill is None:
                        continue  # nothing left to start: the slot leaves the batch
                    slots[i], sequences[i], fed[i] = refill, list(prefixes[refill]), 0
                    start[i] = length  # the new sequence starts at the next column
            keep.append(i)
        if len(keep) < len(slots):
            index = torch.tensor(keep, dtype=torch.long, device=device)
            cache.batch_select_indices(index)
            slots, sequences, fed, start = ([slots[i] for i in keep], [sequences[i] for i in keep],
                                            [fed[i] for i in keep], start[index])
        if slots and int(start.min()) > 0:  # columns no live sequence attends to
            drop = int(start.min())
            for layer in cache.layers:
                layer.keys, layer.values = layer.keys[..., drop:, :], layer.values[..., drop:, :]
            start, length = start - drop, length - drop
    return results

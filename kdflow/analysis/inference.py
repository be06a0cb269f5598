"""Inference cost of a model as Sučík (2020) Table 5.2 reports it: size in non-embedding parameters and CPU time
per example.

Size (thesis §4.3.3 footnote 8, after Tang et al. 2019 and the GLUE leaderboard) leaves out embedding parameters,
because they depend on the vocabulary and vector width rather than on the model. What counts as embedding here:

- every ``nn.Embedding`` (BERT's wordpiece, position and token-type tables, the students' vector tables);
- every :class:`kdflow.students.embeddings.TokenEmbedding` whole, including the linear layer that projects wide
  teacher or word2vec vectors to a student's width. A projection of a lookup table is itself a lookup table (the
  projected rows can be precomputed), and the thesis counts it so: BERT_S has 2.42M parameters with 600-wide
  word2vec and 2.43M with 1024-wide wordpieces (Table 5.2), which only holds without the projection.

Everything else counts, including the LayerNorm after BERT's embeddings
(:func:`kdflow.students.embeddings.non_embedding_parameters`, which every student job records in its metrics). This reproduces the students' stated
sizes (LSTM_S 2,406,002, BERT_S 2,417,888 for 2 classes) and gives a 2-class BERT-large 303,363,074: the "340M"
in Table 5.2 is BERT-large's total (embeddings included; 335M exactly), not its non-embedding size.

Speed (Table 5.2 caption): the whole evaluation set is processed in batches of 256 on a laptop CPU and the time
turned into milliseconds per example. The thesis padded BERT_S's batches to 128 tokens but LSTM_S's only to their
longest example; kdflow's batches are all padded to their longest example (:mod:`kdflow.training.batching`).

Rule measure_inference also times the model in ONNX Runtime on the same batches and threads (issue 55, beyond the
thesis): :func:`kdflow.export.onnx_inference.measure_onnxruntime`, in the export stage, whose ONNX export it uses;
:func:`measure` hands it PyTorch's logits (``outputs``) to check its own against.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

import torch
from torch import nn

from kdflow.students.embeddings import non_embedding_parameters

Batch = dict[str, torch.Tensor]


def time_inference(
    forward: Callable[[Batch], torch.Tensor], batches: Sequence[Batch], warmup: int = 1, threads: int | None = None,
    outputs: list | None = None,
) -> float:
    """Wall-clock milliseconds per example of ``forward`` over all ``batches``, without gradients, on
    ``threads`` CPU threads (None: torch's current setting). The first batch is run ``warmup`` times untimed
    first, so one-off costs (allocation, lazy initialisation) do not count. ``outputs``: a list that receives what
    ``forward`` returns for each batch (appending costs nothing measurable)."""
    previous = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(threads)
    try:
        with torch.no_grad():
            for _ in range(warmup):
                forward(batches[0])
            started = time.perf_counter()
            for batch in batches:
                output = forward(batch)
                if outputs is not None:
                    outputs.append(output)
            elapsed = time.perf_counter() - started
    finally:
        torch.set_num_threads(previous)
    return 1000 * elapsed / sum(len(batch["input_ids"]) for batch in batches)


def measure(
    module: nn.Module, forward: Callable[[Batch], torch.Tensor], batches: Sequence[Batch], threads: int | None = None,
    outputs: list | None = None,
) -> dict:
    """Table 5.2's size and speed of ``module`` (run through ``forward``, in eval mode) with what they were
    measured on; the keys of the two measurements are the metric names of reference/paper_results.csv.
    ``outputs``: a list that receives the logits of each timed batch
    (:func:`kdflow.export.onnx_inference.measure_onnxruntime` checks its own against them)."""
    module.eval()
    return {
        "params_millions_non_embedding": non_embedding_parameters(module) / 1e6,
        "ms_per_example_cpu": time_inference(forward, batches, threads=threads, outputs=outputs),
        "batch_size": max(len(batch["input_ids"]) for batch in batches),
        "examples": sum(len(batch["input_ids"]) for batch in batches),
        "threads": threads or torch.get_num_threads(),
    }

"""Pseudo classifiers on every teacher layer (Universal-KD §4.1 and §5.2).

After the teacher is fine-tuned, one linear classifier ``f_i(h_i) = softmax(W_i h_i)`` (Eq. 3) is trained on
the representation ``h_i`` of each transformer layer i = 1..N with cross-entropy (MSE for regression), the
teacher frozen. The paper trains them "all together": here all N heads are one batched linear map trained in
one loop, on layer representations computed once by a single frozen forward pass over the data (not once per
epoch), stored in float16 in a memory map so that large tasks do not need to fit in RAM.

Choices the paper leaves open, configurable under ``pseudo_heads`` in the config: ``h_i`` is the layer's
first-token ([CLS]/<s>) vector by default (``pooling: mean`` averages the unpadded tokens); the heads are
trained jointly and the epoch with the best mean dev score over layers is kept; regression heads start their
bias at the training labels' mean (:meth:`LayerHeads.start_at_label_mean`).

Heads whose training diverged (:mod:`kdflow.training.loop`) are written as they diverged, every layer's scores NaN
and ``diverged`` (epoch and step) in the metrics.

Also recorded per layer (for the left panel of Universal-KD Figure 3): the mean Euclidean distance between the
head's predicted distribution and the one-hot gold label (absolute error for regression).
"""

from __future__ import annotations

import json
import logging
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F
from torch import nn
from transformers import AutoTokenizer

from kdflow.core import metrics, run_files
from kdflow.core.data import TaskData
from kdflow.core.devices import seed_everything
from kdflow.core.hyperparameters import Hyperparameters
from kdflow.core.intermediates import DamagedFile, write_parquet
from kdflow.core.io import atomic_output, write_json
from kdflow.core.precision import FP32, Precision
from kdflow.core.tensor_files import TensorFile, save_tensors
from kdflow.training.batching import EncodedSplit, batches, to_device, tokenize
from kdflow.training.checkpoint import Checkpoint
from kdflow.training.curves import write_curves
from kdflow.training.hf_models import load_classifier, model_inputs
from kdflow.training.loop import predict, subset_indices, train

log = logging.getLogger("kdflow")

POOLINGS = ("cls", "mean", "max")
TRAINING = "training"  # heads.safetensors metadata: the training record, as JSON


class LayerHeads(nn.Module):
    """N independent linear classifiers applied to N layer representations at once: [B, N, H] -> [B, N, C].

    Each head standardises its input with the training set's per-dimension mean and standard deviation (fixed
    buffers, saved with the heads) before its linear map. The composition is still one linear classifier per
    layer (Eq. 3), but it trains: the first-token vectors of low layers carry a large constant offset (their
    spread is 2-5% of their magnitude in MiniLM), and without standardisation an Adam-trained head on them stays
    at the majority class.
    """

    def __init__(self, n_layers: int, hidden_size: int, n_outputs: int):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(n_layers, hidden_size, n_outputs))
        self.bias = nn.Parameter(torch.zeros(n_layers, n_outputs))
        self.register_buffer("feature_mean", torch.zeros(n_layers, hidden_size))
        self.register_buffer("feature_scale", torch.ones(n_layers, hidden_size))
        nn.init.normal_(self.weight, std=0.02)  # BERT's initializer_range

    @torch.no_grad()
    def fit_standardisation(self, features: np.ndarray, chunk: int = 4096) -> None:
        """Set the per-layer, per-dimension mean and std from ``features`` [n, N, H] (read in chunks)."""
        total = torch.zeros_like(self.feature_mean, dtype=torch.float64)
        squares = torch.zeros_like(total)
        for start in range(0, len(features), chunk):
            block = torch.from_numpy(np.asarray(features[start : start + chunk], dtype=np.float64))
            total += block.sum(0)
            squares += (block**2).sum(0)
        mean = total / len(features)
        variance = (squares / len(features) - mean**2).clamp_min(0)
        self.feature_mean.copy_(mean)
        # No scale below one float16 step at the dimension's mean: a dimension whose float16 values barely vary
        # (in MiniLM, one of 384 in layers 1 and 3 did not vary at all) would otherwise turn a rounding step of a
        # new example into thousands of standard deviations.
        step = torch.from_numpy(np.spacing(mean.numpy().astype(np.float16)).astype(np.float64))
        self.feature_scale.copy_(torch.maximum(variance.sqrt(), step.abs()).clamp_min(1e-6))

    @torch.no_grad()
    def start_at_label_mean(self, labels: np.ndarray) -> None:
        """Regression heads: every bias starts at the training labels' mean, its least-squares value on the
        standardised (zero-mean) inputs. Adam moves a parameter by about its learning rate per step, so from 0 a
        bias does not reach STS-B's mean of about 2.7 in the few hundred steps at lr 1e-3 the heads get: they
        ranked the pairs (dev Pearson up to 83.6) and sat 2.2-2.5 from the gold scores."""
        self.bias.fill_(float(np.mean(labels)))

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        # Rounded to float16 as the training features are stored: the heads then see the same values when the
        # signals job passes them float32 layers (before, one MiniLM STS-B head's outputs moved by 27).
        standardised = (features.half().float() - self.feature_mean) / self.feature_scale
        return torch.einsum("bnh,nhc->bnc", standardised, self.weight) + self.bias


def pool_layers(hidden_states, attention_mask: torch.Tensor, pooling: str) -> torch.Tensor:
    """[B, N, H] float32: each layer's first-token vector (``cls``), or mean (``mean``) or element-wise maximum
    (``max``) over unpadded tokens."""
    if pooling not in POOLINGS:
        raise ValueError(f"unknown pooling {pooling!r}; expected one of {POOLINGS}")
    # float32 whatever the precision of the forward pass (bf16 hidden states on CPU): means are taken in float32
    stacked = torch.stack(tuple(hidden_states), dim=1).float()  # [B, N, T, H]
    if pooling == "cls":
        return stacked[:, :, 0]
    real = attention_mask[:, None, :, None].bool()
    if pooling == "max":
        return stacked.masked_fill(~real, float("-inf")).amax(2)
    weights = real.to(stacked.dtype)
    return (stacked * weights).sum(2) / weights.sum(2)


@torch.no_grad()
def teacher_pass(model, batch: dict, pooling: str) -> tuple[torch.Tensor, tuple[torch.Tensor, ...], torch.Tensor]:
    """One forward pass of a frozen sequence classifier: its logits [B, C], its hidden states (the embeddings'
    output, then layers 1..N, [B, T, H]) and pooled layers 1..N [B, N, H] (the embedding output is dropped:
    pseudo-heads sit on transformer layers)."""
    out = model(**model_inputs(model, batch), output_hidden_states=True)
    return out.logits, out.hidden_states, pool_layers(out.hidden_states[1:], batch["attention_mask"], pooling)


def teacher_outputs(model, batch: dict, pooling: str) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`teacher_pass`'s logits [B, C] and pooled layers [B, N, H]."""
    logits, _, pooled = teacher_pass(model, batch, pooling)
    return logits, pooled


def layer_features(model, split: EncodedSplit, pooling: str, batch_size: int, device, out: np.ndarray,
                   precision: Precision = FP32) -> None:
    """Write the pooled representation of every transformer layer for every example into ``out`` [n, N, H],
    computed in ``precision``."""
    model.eval()
    row = 0
    for batch in batches(split, batch_size, regression=False):
        with precision.autocast():
            _, pooled = teacher_outputs(model, to_device(batch, device), pooling)
        out[row : row + len(pooled)] = pooled.cpu().numpy()
        row += len(pooled)


def feature_batches(features: np.ndarray, labels: np.ndarray, batch_size: int, regression: bool, rng=None):
    order = rng.permutation(len(features)) if rng is not None else np.arange(len(features))
    for start in range(0, len(order), batch_size):
        index = np.sort(order[start : start + batch_size])  # sorted reads are faster on a memory map
        yield {
            "features": torch.from_numpy(np.ascontiguousarray(features[index])),
            "labels": torch.as_tensor(labels[index], dtype=torch.float32 if regression else torch.long),
        }


def heads_loss(outputs: torch.Tensor, labels: torch.Tensor, regression: bool) -> torch.Tensor:
    """Sum over layers of each head's mean loss: heads share no parameters, so each gets its own gradient."""
    n_layers = outputs.shape[1]
    if regression:
        return F.mse_loss(outputs[..., 0], labels[:, None].expand(-1, n_layers), reduction="sum") / len(labels)
    flat = outputs.reshape(-1, outputs.shape[-1])
    return F.cross_entropy(flat, labels.repeat_interleave(n_layers), reduction="sum") / len(labels)


def gold_distance(outputs: np.ndarray, gold: np.ndarray, regression: bool) -> np.ndarray:
    """Per example and layer: ||softmax(logits) - onehot(gold)||_2, or |prediction - gold| for regression."""
    if regression:
        return np.abs(outputs[..., 0] - gold[:, None])
    probs = torch.softmax(torch.from_numpy(outputs), dim=-1).numpy()
    onehot = np.eye(outputs.shape[-1])[gold][:, None, :]
    return np.linalg.norm(probs - onehot, axis=-1)


def train_pseudo_heads(task: TaskData, teacher_dir: Path, settings: dict, out_dir: Path, device,
                       checkpoint: Checkpoint | None = None, precision: Precision = FP32) -> dict:
    """Train heads on every layer of the frozen teacher in ``teacher_dir`` (its forward pass and the heads'
    training in ``precision``) and write ``heads.safetensors``, with
    the training record (best epoch, divergence, history, hyperparameters, seconds) in its metadata; returns
    the record. What the heads score is :func:`evaluate_pseudo_heads`'s, a rule of its own: losing its files
    re-evaluates the heads, and leaves them, and the signals and students that learn from them, alone."""
    started = time.perf_counter()
    settings = dict(settings)
    pooling = settings.pop("pooling", "cls")
    hp = Hyperparameters.from_dict(settings)
    seed_everything(hp.seed)
    regression, metric_names = task.meta["regression"], task.meta["metrics"]
    main = metric_names[0]

    tokenizer = AutoTokenizer.from_pretrained(teacher_dir / "model")
    teacher = load_classifier(teacher_dir / "model").to(device)
    teacher.requires_grad_(False)
    n_layers, hidden = teacher.config.num_hidden_layers, teacher.config.hidden_size
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)

    with tempfile.TemporaryDirectory(dir=out_dir, prefix=".features-") as scratch:
        features, labels = {}, {}
        for name in ("train", "dev"):
            frame = task.split(name)
            if name == "train":
                keep = subset_indices(len(frame), hp.max_train_examples, hp.seed)
                frame = frame.iloc[keep].reset_index(drop=True)
            features[name], labels[name] = _features(teacher, tokenizer, frame, pooling, hp.max_seq_length,
                                                     hp.eval_batch_size, device, Path(scratch) / f"{name}.npy",
                                                     precision)
        log.info("layer features computed once: %s", {k: v.shape for k, v in features.items()})
        del teacher

        heads = LayerHeads(n_layers, hidden, task.num_labels)
        heads.fit_standardisation(features["train"])
        if regression:
            heads.start_at_label_mean(labels["train"])

        def evaluate(model) -> dict:
            per_layer = _layer_scores(_head_outputs(model, features["dev"], labels["dev"], hp.eval_batch_size,
                                                    regression, device, precision), labels["dev"], metric_names,
                                              regression)
            return {f"mean_{main}": float(np.mean([s[main] for s in per_layer]))}

        result = train(
            heads,
            lambda model, batch: heads_loss(model(batch["features"]), batch["labels"], regression),
            lambda rng: feature_batches(features["train"], labels["train"], hp.batch_size, regression, rng),
            len(labels["train"]),
            evaluate,
            f"mean_{main}",
            hp,
            device,
            checkpoint=checkpoint,
            precision=precision,
        )
    heads.load_state_dict(result.best_state)
    record = {"best_epoch": result.best_epoch, "diverged": result.diverged, "history": result.history,
              "hyperparameters": vars(hp), "precision": precision.name,
              "seconds": time.perf_counter() - started}
    with atomic_output(out_dir / run_files.PSEUDO_HEADS) as path:
        save_tensors(heads.state_dict(), path, {"pooling": pooling, "layers": str(n_layers),
                                                 "outputs": str(task.num_labels), TRAINING: json.dumps(record)})
    return record


def evaluate_pseudo_heads(task: TaskData, teacher_dir: Path, heads_path: Path, out_dir: Path, device,
                          precision: Precision = FP32) -> dict:
    """Score trained heads on dev, layer by layer (the teacher's forward pass and the heads in ``precision``): ``dev_predictions.parquet``, ``metrics.json`` (per layer,
    with the training record) and ``curves.parquet`` (from the record's history) in ``out_dir``."""
    heads, pooling = load_heads(heads_path)
    record = training_record(heads_path)
    hp = record["hyperparameters"]
    regression, metric_names = task.meta["regression"], task.meta["metrics"]
    n_layers, n_outputs = heads.weight.shape[0], heads.weight.shape[2]
    tokenizer = AutoTokenizer.from_pretrained(teacher_dir / "model")
    teacher = load_classifier(teacher_dir / "model").to(device).requires_grad_(False)
    dev_frame = task.split("dev")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out_dir, prefix=".features-") as scratch:
        features, labels = _features(teacher, tokenizer, dev_frame, pooling, hp["max_seq_length"],
                                     hp["eval_batch_size"], device, Path(scratch) / "dev.npy", precision)
        outputs = _head_outputs(heads.to(device), features, labels, hp["eval_batch_size"], regression, device,
                                precision)

    distances = gold_distance(outputs, labels, regression)
    per_layer = [metrics.nan_scores(scores) if record["diverged"] else scores
                 for scores in _layer_scores(outputs, labels, metric_names, regression)]
    layers = [
        {"layer": i + 1, **scores, "gold_distance": float(distances[:, i].mean())} for i, scores in enumerate(per_layer)
    ]
    dev_predictions = pd.DataFrame(
        {
            "idx": np.repeat(dev_frame["idx"].to_numpy(), n_layers),
            "label": np.repeat(labels, n_layers),
            "layer": np.tile(np.arange(1, n_layers + 1), len(dev_frame)),
            "prediction": metrics.predictions(outputs.reshape(-1, n_outputs), regression),
            "gold_distance": distances.reshape(-1),
            "logits": list(outputs.reshape(-1, n_outputs).astype(np.float32)),
        }
    )
    with atomic_output(out_dir / run_files.PSEUDO_HEADS_PREDICTIONS) as path:
        write_parquet(dev_predictions, path)
    report = {"task": task.meta["task"], "pooling": pooling, "best_epoch": record["best_epoch"],
              "diverged": record["diverged"], "layers": layers, "history": record["history"],
              "hyperparameters": hp, "precision": precision.name, "seconds": record["seconds"]}
    write_json(out_dir / run_files.METRICS, report)
    write_curves(out_dir / run_files.CURVES, record["history"])
    main = metric_names[0]
    for layer in layers:
        log.info("layer %2d: dev %s %.4f, gold distance %.4f", layer["layer"], main, layer[main],
                 layer["gold_distance"])
    return report


def _features(teacher, tokenizer, frame: pd.DataFrame, pooling: str, max_seq_length: int, batch_size: int, device,
              path: Path, precision: Precision = FP32) -> tuple[np.ndarray, np.ndarray]:
    """Every layer's pooled representation of ``frame``'s examples in a float16 memory map at ``path``
    [n, N, H], and their labels."""
    split = tokenize(frame, tokenizer, max_seq_length, labelled=True)
    shape = (len(split), teacher.config.num_hidden_layers, teacher.config.hidden_size)
    features = np.lib.format.open_memmap(path, mode="w+", dtype=np.float16, shape=shape)
    layer_features(teacher, split, pooling, batch_size, device, features, precision)
    return features, split.labels


def _head_outputs(heads, features: np.ndarray, labels: np.ndarray, batch_size: int, regression: bool,
                  device, precision: Precision = FP32) -> np.ndarray:
    heads.eval()
    return predict(lambda b: heads(b["features"]), feature_batches(features, labels, batch_size, regression), device,
                   precision)


def _layer_scores(outputs: np.ndarray, labels: np.ndarray, metric_names, regression: bool) -> list[dict]:
    return [metrics.score_logits(metric_names, outputs[:, i], labels, regression) for i in range(outputs.shape[1])]


def load_heads(path: Path) -> tuple[LayerHeads, str]:
    """Trained heads and the pooling they were trained on, from ``heads.safetensors``."""
    with TensorFile(path) as f:
        pooling = f.metadata["pooling"]
        state = {name: f.get(name) for name in f.keys()}
    heads = LayerHeads(*state["weight"].shape)
    heads.load_state_dict(state)
    return heads.eval().requires_grad_(False), pooling


def training_record(path: Path) -> dict:
    """How the heads in ``heads.safetensors`` were trained (:func:`train_pseudo_heads`)."""
    with TensorFile(path) as f:
        if TRAINING not in f.metadata:
            raise DamagedFile(path, "no training record in its metadata (written by an older kdflow: retrain it)")
        return json.loads(f.metadata[TRAINING])

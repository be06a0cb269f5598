"""Pseudo classifiers on every teacher layer (Universal-KD §4.1 and §5.2).

After the teacher is fine-tuned, one linear classifier ``f_i(h_i) = softmax(W_i h_i)`` (Eq. 3) is trained on
the representation ``h_i`` of each transformer layer i = 1..N with cross-entropy (MSE for regression), the
teacher frozen. The paper trains them "all together": here all N heads are one batched linear map trained in
one loop, on layer representations computed once by a single frozen forward pass over the data (not once per
epoch), stored in float16 in a memory map so that large tasks do not need to fit in RAM.

Choices the paper leaves open, configurable under ``pseudo_heads`` in the config: ``h_i`` is the layer's
first-token ([CLS]/<s>) vector by default (``pooling: mean`` averages the unpadded tokens); the heads are
trained jointly and the epoch with the best mean dev score over layers is kept.

Heads whose training diverged (:mod:`kdflow.training.loop`) are written as they diverged, every layer's scores NaN
and ``diverged`` (epoch and step) in the metrics.

Also recorded per layer (for the left panel of Universal-KD Figure 3): the mean Euclidean distance between the
head's predicted distribution and the one-hot gold label (absolute error for regression).
"""

from __future__ import annotations

import logging
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F
from safetensors.torch import save_file
from torch import nn
from transformers import AutoTokenizer

from kdflow.core import metrics
from kdflow.core.data import TaskData
from kdflow.core.hyperparameters import Hyperparameters
from kdflow.core.intermediates import TensorFile
from kdflow.core.io import atomic_output, write_json
from kdflow.core.runtime import seed_everything
from kdflow.training.batching import EncodedSplit, batches, to_device, tokenize
from kdflow.training.checkpoint import Checkpoint
from kdflow.training.curves import write_curves
from kdflow.training.hf_models import load_classifier, model_inputs
from kdflow.training.loop import predict, subset_indices, train

log = logging.getLogger("kdflow")

POOLINGS = ("cls", "mean", "max")


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
        self.feature_scale.copy_(variance.sqrt().clamp_min(1e-6))

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        standardised = (features.float() - self.feature_mean) / self.feature_scale
        return torch.einsum("bnh,nhc->bnc", standardised, self.weight) + self.bias


def pool_layers(hidden_states, attention_mask: torch.Tensor, pooling: str) -> torch.Tensor:
    """[B, N, H]: each layer's first-token vector (``cls``), or mean (``mean``) or element-wise maximum (``max``)
    over unpadded tokens."""
    if pooling not in POOLINGS:
        raise ValueError(f"unknown pooling {pooling!r}; expected one of {POOLINGS}")
    stacked = torch.stack(tuple(hidden_states), dim=1)  # [B, N, T, H]
    if pooling == "cls":
        return stacked[:, :, 0]
    real = attention_mask[:, None, :, None].bool()
    if pooling == "max":
        return stacked.masked_fill(~real, float("-inf")).amax(2)
    weights = real.to(stacked.dtype)
    return (stacked * weights).sum(2) / weights.sum(2)


@torch.no_grad()
def teacher_outputs(model, batch: dict, pooling: str) -> tuple[torch.Tensor, torch.Tensor]:
    """One forward pass of a frozen sequence classifier: its logits [B, C] and pooled layers 1..N [B, N, H]
    (the embedding output is dropped: pseudo-heads sit on transformer layers)."""
    out = model(**model_inputs(model, batch), output_hidden_states=True)
    return out.logits, pool_layers(out.hidden_states[1:], batch["attention_mask"], pooling)


def layer_features(model, split: EncodedSplit, pooling: str, batch_size: int, device, out: np.ndarray) -> None:
    """Write the pooled representation of every transformer layer for every example into ``out`` [n, N, H]."""
    model.eval()
    row = 0
    for batch in batches(split, batch_size, regression=False):
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
                       checkpoint: Checkpoint | None = None) -> dict:
    """Train heads on every layer of the frozen teacher in ``teacher_dir``; write heads, predictions, metrics, curves."""
    started = time.perf_counter()
    settings = dict(settings)
    pooling = settings.pop("pooling", "cls")
    hp = Hyperparameters.from_dict(settings)
    seed_everything(hp.seed)
    regression, metric_names = task.meta["regression"], task.meta["metrics"]
    main = metric_names[0]
    n_outputs = task.num_labels

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
            split = tokenize(frame, tokenizer, hp.max_seq_length, labelled=True)
            features[name] = np.lib.format.open_memmap(
                Path(scratch) / f"{name}.npy", mode="w+", dtype=np.float16, shape=(len(split), n_layers, hidden)
            )
            layer_features(teacher, split, pooling, hp.eval_batch_size, device, features[name])
            labels[name] = split.labels
        log.info("layer features computed once: %s", {k: v.shape for k, v in features.items()})
        del teacher

        heads = LayerHeads(n_layers, hidden, n_outputs)
        heads.fit_standardisation(features["train"])

        def dev_outputs(model) -> np.ndarray:
            model.eval()
            dev = feature_batches(features["dev"], labels["dev"], hp.eval_batch_size, regression)
            return predict(lambda b: model(b["features"]), dev, device)

        def layer_scores(outputs: np.ndarray) -> list[dict]:
            return [metrics.score_logits(metric_names, outputs[:, i], labels["dev"], regression) for i in range(n_layers)]

        def evaluate(model) -> dict:
            per_layer = layer_scores(dev_outputs(model))
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
        )
        heads.load_state_dict(result.best_state)
        outputs = dev_outputs(heads)

    distances = gold_distance(outputs, labels["dev"], regression)
    per_layer = [metrics.nan_scores(scores) if result.diverged else scores for scores in layer_scores(outputs)]
    layers = [
        {"layer": i + 1, **scores, "gold_distance": float(distances[:, i].mean())} for i, scores in enumerate(per_layer)
    ]
    with atomic_output(out_dir / "heads.safetensors") as path:
        save_file(
            {name: tensor.detach().cpu().contiguous() for name, tensor in heads.state_dict().items()},
            path,
            metadata={"pooling": pooling, "layers": str(n_layers), "outputs": str(n_outputs)},
        )
    dev_frame = task.split("dev")
    dev_predictions = pd.DataFrame(
        {
            "idx": np.repeat(dev_frame["idx"].to_numpy(), n_layers),
            "label": np.repeat(labels["dev"], n_layers),
            "layer": np.tile(np.arange(1, n_layers + 1), len(dev_frame)),
            "prediction": metrics.predictions(outputs.reshape(-1, n_outputs), regression),
            "gold_distance": distances.reshape(-1),
            "logits": list(outputs.reshape(-1, n_outputs).astype(np.float32)),
        }
    )
    with atomic_output(out_dir / "dev_predictions.parquet") as path:
        dev_predictions.to_parquet(path, index=False)
    report = {
        "task": task.meta["task"],
        "pooling": pooling,
        "best_epoch": result.best_epoch,
        "diverged": result.diverged,
        "layers": layers,
        "history": result.history,
        "hyperparameters": vars(hp),
        "seconds": time.perf_counter() - started,
    }
    write_json(out_dir / "metrics.json", report)
    write_curves(out_dir / "curves.parquet", result.history)
    for layer in layers:
        log.info("layer %2d: dev %s %.4f, gold distance %.4f", layer["layer"], main, layer[main], layer["gold_distance"])
    return report


def load_heads(path: Path) -> tuple[LayerHeads, str]:
    """Trained heads and the pooling they were trained on, from ``heads.safetensors``."""
    with TensorFile(path) as f:
        pooling = f.metadata["pooling"]
        state = {name: f.get(name) for name in f.keys()}
    heads = LayerHeads(*state["weight"].shape)
    heads.load_state_dict(state)
    return heads.eval().requires_grad_(False), pooling

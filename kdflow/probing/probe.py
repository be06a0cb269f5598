"""SentEval's probing protocol (Conneau et al. 2018; thesis §3.3, §4.3.6): the MLP probe over cached encodings.

The probe is a one-hidden-layer MLP with a sigmoid nonlinearity and dropout, trained with Adam (lr 1e-3) on
mini-batches of 64 with early stopping on dev accuracy (tenacity 5). Hidden width ∈ {50, 100, 200} and dropout
∈ {0, 0.1, 0.2} are tuned on dev; the reported score is the test accuracy of the dev-best configuration.

Where SentEval's code and the papers differ, this module follows the papers:

* Grid: nhid × dropout as in the papers. SentEval's ``SplitClassifier`` instead tunes the L2 penalty
  {1e-5, ..., 1e-2} for one fixed nhid/dropout; here ``weight_decay`` is a single fixed setting (default 0).
* Early stopping: dev is checked after every epoch and training stops after ``tenacity`` *consecutive* checks
  without a strict improvement ("does not improve over 5 consecutive iterations", thesis §4.3.6). SentEval checks
  every ``epoch_size=4`` epochs (thesis Tab. 4.4) and never resets its counter; ``epochs_per_check=4`` restores
  the spacing. Training is capped at ``max_epochs`` (SentEval's ``max_epoch=200``).
* Dropout acts on the sigmoid's output (standard inverted dropout); SentEval's ``nn.Sequential`` drops the
  pre-activations, so a dropped unit outputs sigmoid(0) = 0.5 there.
* The loss is the batch-mean cross-entropy (SentEval sums; under Adam this only rescales against its epsilon).
* Features are used as given: no standardisation, as in SentEval.
* Test accuracy comes from each configuration's best-dev checkpoint. SentEval retrains the chosen configuration
  with the same seed and evaluates that checkpoint; with deterministic training the two coincide.
* Dev-accuracy ties go to the first configuration in grid order (smaller width, then smaller dropout).

The grid is trained as one model with one optimizer, not as sequential runs: configurations of equal width are
stacked on a leading axis and run as one batched matmul; the summed loss gives each its own gradients. Each keeps
its own early-stopping state (best dev accuracy, checkpoint, patience); training ends when all have stopped
(stopped ones keep computing but their results are frozen). All configurations see the same mini-batch order
(one shuffle per epoch) and the same dropout noise, and start from the same weights (``nn.Linear``'s init,
U(±1/√fan_in)), all drawn so that hidden unit j's values do not depend on which other configurations are in the
grid: given the seed, a configuration trained alone gets the same result as in the grid.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from kdflow.probing.encodings import encoding_layers, read_layer
from kdflow.probing.senteval import (
    MORPHOLOGY_RULES,
    ProbingData,
    ProbingDataError,
    majority_baseline,
    morphology_baseline,
)

EVAL_CHUNK = 4096


@dataclass(frozen=True)
class ProbeSettings:
    """Probe training configuration; defaults as in Conneau et al. (2018) and thesis Tab. 4.4."""

    hidden_sizes: tuple[int, ...] = (50, 100, 200)
    dropouts: tuple[float, ...] = (0.0, 0.1, 0.2)
    batch_size: int = 64
    learning_rate: float = 1e-3
    weight_decay: float = 0.0
    tenacity: int = 5
    max_epochs: int = 200
    epochs_per_check: int = 1
    seed: int = 1111
    device: str = "cpu"

    def __post_init__(self) -> None:
        if not self.hidden_sizes or min(self.hidden_sizes) < 1:
            raise ValueError(f"hidden sizes must be positive, got {self.hidden_sizes}")
        if not self.dropouts or not all(0 <= p < 1 for p in self.dropouts):
            raise ValueError(f"dropout rates must lie in [0, 1), got {self.dropouts}")

    @property
    def grid(self) -> list[tuple[int, float]]:
        return [(hidden, dropout) for hidden in self.hidden_sizes for dropout in self.dropouts]


class SameWidthMLPs(torch.nn.Module):
    """Sigmoid MLPs of one hidden width, one per dropout rate, as weights stacked on a leading configuration axis:
    w1 [K, d, H], b1 [K, H], w2 [K, H, C], b2 [K, C]. All start from the same weights (``nn.Linear``'s init)."""

    def __init__(self, input_dim: int, n_classes: int, hidden_size: int, dropouts: tuple[float, ...],
                 init_seeds: list[int]):
        super().__init__()
        w1_gen, b1_gen, w2_gen, b2_gen = (torch.Generator().manual_seed(seed) for seed in init_seeds)

        def uniform(generator: torch.Generator, *shape: int, fan_in: int) -> torch.Tensor:
            """U(±1/√fan_in), drawn row-major so that hidden unit j's values do not depend on the width."""
            return (torch.rand(*shape, generator=generator) * 2 - 1) / math.sqrt(fan_in)

        stack = len(dropouts)
        self.w1 = torch.nn.Parameter(uniform(w1_gen, hidden_size, input_dim, fan_in=input_dim).T.repeat(stack, 1, 1))
        self.b1 = torch.nn.Parameter(uniform(b1_gen, hidden_size, fan_in=input_dim).repeat(stack, 1))
        self.w2 = torch.nn.Parameter(uniform(w2_gen, hidden_size, n_classes, fan_in=hidden_size).repeat(stack, 1, 1))
        self.b2 = torch.nn.Parameter(uniform(b2_gen, n_classes, fan_in=hidden_size).repeat(stack, 1))
        self.register_buffer("dropout", torch.tensor(dropouts, dtype=torch.float32)[:, None, None])

    def forward(self, x: torch.Tensor, dropout_noise: torch.Tensor | None) -> torch.Tensor:
        """x [B, d] -> logits [K, B, C]; ``dropout_noise`` [B, >= H], uniform in [0, 1), switches dropout on."""
        hidden = torch.sigmoid(torch.matmul(x, self.w1) + self.b1[:, None, :])
        if dropout_noise is not None:
            keep = dropout_noise[:, :hidden.shape[-1]] >= self.dropout
            hidden = hidden * keep / (1 - self.dropout)
        return torch.matmul(hidden, self.w2) + self.b2[:, None, :]


class ProbeGrid(torch.nn.Module):
    """The whole nhid × dropout grid as one model: one :class:`SameWidthMLPs` per hidden size, so that each step
    is one batched matmul per width (no compute spent on padding) and one optimizer step for all."""

    def __init__(self, input_dim: int, n_classes: int, settings: ProbeSettings, init_seed: np.random.SeedSequence):
        super().__init__()
        init_seeds = [int(seed) for seed in init_seed.generate_state(4)]
        self.groups = torch.nn.ModuleList(SameWidthMLPs(input_dim, n_classes, hidden, settings.dropouts, init_seeds)
                                          for hidden in settings.hidden_sizes)

    def forward(self, x: torch.Tensor, dropout_noise: torch.Tensor | None = None) -> torch.Tensor:
        """Logits [K, B, C] in grid order (hidden size major, dropout minor)."""
        return torch.cat([group(x, dropout_noise) for group in self.groups])

    @torch.no_grad()
    def accuracies(self, x: torch.Tensor, y: torch.Tensor) -> np.ndarray:
        correct = sum((self(x[i:i + EVAL_CHUNK]).argmax(-1) == y[i:i + EVAL_CHUNK]).sum(1)
                      for i in range(0, len(x), EVAL_CHUNK))
        return (correct.double() / len(x)).cpu().numpy()

    def parameter_masks(self, configs: np.ndarray) -> list[torch.Tensor]:
        """Per parameter (in ``parameters()`` order): which of its stacked configurations the boolean vector
        ``configs`` (over the whole grid) selects."""
        masks = torch.from_numpy(configs.reshape(len(self.groups), -1)).to(self.groups[0].dropout.device)
        return [mask for group, mask in zip(self.groups, masks) for _ in group.parameters()]


def _dropout_noise(base_seed: int, step: int, width: int, batch: int, device: torch.device) -> torch.Tensor:
    """Fresh per-step noise [batch, width]; drawn unit-major so that unit j's column does not depend on width."""
    generator = torch.Generator().manual_seed((base_seed + step) % 2**63)
    return torch.rand(width, batch, generator=generator).T.to(device)


def probe(train_X: np.ndarray, train_y: np.ndarray, dev_X: np.ndarray, dev_y: np.ndarray, test_X: np.ndarray,
          test_y: np.ndarray, settings: ProbeSettings | None = None) -> dict:
    """Train the grid of probes on pre-computed encodings (n, d) and integer labels; select on dev only.

    Returns ``{"configs": [...], "selected": {...}, "dev_accuracy", "test_accuracy", "settings"}``, where each
    config lists hidden_size, dropout, dev/test accuracy of its best-dev checkpoint, best_epoch and
    epochs_trained, and "selected" is the dev-best config (its test accuracy is the probing score)."""
    settings = settings or ProbeSettings()
    device = torch.device(settings.device)
    grid = settings.grid
    init_seed, shuffle_seed, dropout_seed = np.random.SeedSequence(settings.seed).spawn(3)
    input_dim = np.shape(train_X)[-1]

    def tensors(X: np.ndarray, y: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
        X, y = np.asarray(X, dtype=np.float32), np.asarray(y, dtype=np.int64)
        if X.ndim != 2 or not len(X) or X.shape[1] != input_dim or y.shape != (len(X),):
            raise ValueError(f"expected encodings (n > 0, {input_dim}) and labels (n,); got {X.shape} and {y.shape}")
        return torch.from_numpy(X).to(device), torch.from_numpy(y).to(device)

    (x_train, y_train), (x_dev, y_dev), (x_test, y_test) = (
        tensors(train_X, train_y), tensors(dev_X, dev_y), tensors(test_X, test_y))
    n_classes = int(max(y_train.max(), y_dev.max(), y_test.max())) + 1
    model = ProbeGrid(input_dim, n_classes, settings, init_seed).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=settings.learning_rate, weight_decay=settings.weight_decay)
    shuffle_rng = np.random.default_rng(shuffle_seed)
    dropout_base = int(dropout_seed.generate_state(1, np.uint64)[0])
    uses_dropout = any(p > 0 for _, p in grid)
    width = max(settings.hidden_sizes)

    n_configs = len(grid)
    best_dev, best_epoch = np.full(n_configs, -1.0), np.zeros(n_configs, dtype=int)
    epochs_trained, checks_without_improvement = np.zeros(n_configs, dtype=int), np.zeros(n_configs, dtype=int)
    stopped = np.zeros(n_configs, dtype=bool)
    best_parameters = [parameter.detach().clone() for parameter in model.parameters()]
    epoch = step = 0
    while epoch < settings.max_epochs and not stopped.all():
        for _ in range(min(settings.epochs_per_check, settings.max_epochs - epoch)):
            order = torch.from_numpy(shuffle_rng.permutation(len(x_train))).to(device)
            for batch in order.split(settings.batch_size):
                noise = _dropout_noise(dropout_base, step, width, len(batch), device) if uses_dropout else None
                logits = model(x_train[batch], noise)
                losses = F.cross_entropy(logits.reshape(-1, n_classes), y_train[batch].repeat(n_configs),
                                         reduction="none")
                optimizer.zero_grad()
                losses.view(n_configs, -1).mean(1).sum().backward()  # configs are independent: sum of their losses
                optimizer.step()
                step += 1
            epoch += 1
        dev_accuracy = model.accuracies(x_dev, y_dev)
        improved = (dev_accuracy > best_dev) & ~stopped
        best_dev[improved], best_epoch[improved] = dev_accuracy[improved], epoch
        checks_without_improvement[improved] = 0
        checks_without_improvement[~improved & ~stopped] += 1
        epochs_trained[~stopped] = epoch
        stopped |= checks_without_improvement >= settings.tenacity
        for parameter, best, mask in zip(model.parameters(), best_parameters, model.parameter_masks(improved)):
            best[mask] = parameter.detach()[mask]

    with torch.no_grad():
        for parameter, best in zip(model.parameters(), best_parameters):
            parameter.copy_(best)
    test_accuracy = model.accuracies(x_test, y_test)
    configs = [{"hidden_size": hidden, "dropout": dropout, "dev_accuracy": float(best_dev[k]),
                "test_accuracy": float(test_accuracy[k]), "best_epoch": int(best_epoch[k]),
                "epochs_trained": int(epochs_trained[k])} for k, (hidden, dropout) in enumerate(grid)]
    selected = int(np.argmax(best_dev))  # first of equals in grid order
    return {"configs": configs, "selected": {"hidden_size": grid[selected][0], "dropout": grid[selected][1]},
            "dev_accuracy": float(best_dev[selected]), "test_accuracy": float(test_accuracy[selected]),
            "settings": asdict(settings)}


def probe_encodings(path: str | Path, task: str, data: ProbingData, settings: ProbeSettings | None = None) -> dict:
    """Probe every layer of a model's cached encodings of ``task`` (:mod:`kdflow.probing.encodings`), with the task's
    baselines: ``{"task", "labels", "layers": [{"layer", ...probe result}], "baselines": {name: accuracy}}``."""
    layers = []
    for layer in encoding_layers(path):
        X = read_layer(path, layer)
        if [len(X[split]) for split in X] != [len(data.train.labels), len(data.dev.labels), len(data.test.labels)]:
            raise ProbingDataError(f"{path} does not hold encodings of {task}'s sentences (sizes differ)")
        result = probe(X["train"], data.train.labels, X["dev"], data.dev.labels, X["test"], data.test.labels, settings)
        layers.append({"layer": layer, **result})
    baselines = {"majority": majority_baseline(data.train.labels, data.test.labels)}
    if task in MORPHOLOGY_RULES:
        baselines["morphology"] = morphology_baseline(task, data)
    return {"task": task, "labels": list(data.label_names), "layers": layers, "baselines": baselines}

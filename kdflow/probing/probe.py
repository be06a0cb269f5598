"""SentEval's probing protocol (Conneau et al. 2018; thesis §3.3, §4.3.6): the probe grid over cached encodings.

The probe is SentEval's classifier (``senteval/tools/classifier.py``, ``validation.py``, ``probing.py``): a
one-hidden-layer MLP, Linear → Dropout → Sigmoid → Linear, trained with Adam (lr 1e-3) on mini-batches of 64 with
early stopping on dev accuracy. The papers' grid of hidden width {50, 100, 200} × dropout {0, 0.1, 0.2} (which
SentEval leaves to its caller) is crossed with SentEval's own search of the L2 penalty {1e-5, 1e-4, 1e-3, 1e-2};
the probing score is the test accuracy of the dev-best configuration. WordContent is probed by logistic regression
(width 0, ``logistic_regression_tasks``), since SentEval forces ``nhid = 0`` for it.

As in SentEval's code (which the thesis ran):

* Early stopping (``PyTorchClassifier.fit``): dev is checked after every ``epochs_per_check`` = 4 epochs (SentEval's
  ``epoch_size``). A check that strictly beats the best dev accuracy so far keeps a copy of the weights (so the
  first of equal accuracies is kept); any other check is a miss. Misses are counted over the whole run, never reset
  by an improvement, and training stops at a miss that finds ``tenacity`` misses already counted: the
  (tenacity + 1)-th miss, the 6th with tenacity 5. Training goes on while the epochs trained are ≤ ``max_epochs``
  and a chunk of ``epochs_per_check`` epochs is never cut short, so SentEval's ``max_epoch`` 200 allows up to 204
  epochs (51 checks).
* L2 is Adam's coupled weight decay (SentEval sets ``weight_decay = l2reg``): ``l2 · w`` is added to the gradient
  of every weight and bias before Adam's moments, per configuration.
* Dropout acts on the pre-activations (inverted dropout before the sigmoid), so a dropped unit outputs
  sigmoid(0) = 0.5, not 0.
* Selection: SentEval picks, per (width, dropout), the L2 of best dev accuracy (``np.argmax``: the first, i.e.
  smallest, of ties); the caller then picks the dev-best (width, dropout). kdflow takes the first dev-best
  configuration of the whole grid in the order width, dropout, L2 (each as configured, ascending by default):
  the same choice, with ties going to the smaller width, then the smaller dropout, then the smaller L2. SentEval
  compares accuracies rounded to 0.01 points; for dev sets of at most 10,000 sentences (SentEval's) that never
  changes the order, so kdflow compares them unrounded.
* Features are used as given: no standardisation.
* Test accuracy comes from each configuration's best-dev checkpoint. SentEval retrains the chosen L2 with the
  same seed and evaluates that checkpoint; with deterministic training the two coincide.

Where kdflow chooses:

* The loss is the batch-mean cross-entropy, because that is what SentEval computes on any PyTorch since 1.0: it
  sets ``loss_fn.size_average = False`` after building the loss, an attribute PyTorch no longer reads (it summed
  in the 2018 runs). The choice matters through L2: against a loss summed over 64 examples the same penalty is 64
  times weaker.
* Random streams are kdflow's own (below), not SentEval's global numpy/torch generators, so the draws differ.
* ``early_stopping: consecutive`` stops at the ``tenacity``-th *consecutive* miss instead, as the thesis text
  states the rule (§4.3.6). With ``epochs_per_check: 1`` and ``l2_penalties: [0]`` it is kdflow's earlier
  protocol (which also dropped the sigmoid's outputs and stopped at exactly ``max_epochs``), kept to measure
  what SentEval's rule changes (``benchmarks/probing_protocols.py``).

The grid is trained as one model with one optimizer, not as sequential runs: configurations of equal width (one
per dropout × L2 pair) are stacked on a leading axis and run as one batched matmul; the summed loss gives each its
own gradients, each gets its own L2 term, and Adam's update is elementwise. Each keeps its own early-stopping state
(best dev accuracy, checkpoint, misses); training ends when all have stopped (stopped ones keep computing but their
results are frozen). All configurations see the same mini-batch order (one shuffle per epoch) and the same dropout
noise, and start from the same weights (``nn.Linear``'s init, U(±1/√fan_in)), all drawn so that hidden unit j's
values do not depend on which other configurations are in the grid: given the seed, a configuration trained alone
gets the same result as in the grid.

The probes' forward passes run in the job's ``precision`` (:mod:`kdflow.core.precision`; their weights and Adam's
state stay float32). With fp16 one gradient scaler serves the whole grid: a step on which any configuration's
gradient overflows is skipped for all, the one place where a configuration's training depends on the others'.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from kdflow.core.precision import Precision
from kdflow.probing.encodings import encoding_layers, read_layer
from kdflow.probing.senteval import (
    MORPHOLOGY_RULES,
    ProbingData,
    ProbingDataError,
    majority_baseline,
    morphology_baseline,
)

EVAL_CHUNK = 4096
EARLY_STOPPING_RULES = ("senteval", "consecutive")


@dataclass(frozen=True)
class ProbeSettings:
    """Probe training configuration; defaults as in SentEval's code and Conneau et al. (2018)."""

    hidden_sizes: tuple[int, ...] = (50, 100, 200)  # 0: logistic regression
    dropouts: tuple[float, ...] = (0.0, 0.1, 0.2)
    l2_penalties: tuple[float, ...] = (1e-5, 1e-4, 1e-3, 1e-2)
    batch_size: int = 64
    learning_rate: float = 1e-3
    tenacity: int = 5
    epochs_per_check: int = 4
    max_epochs: int = 200
    early_stopping: str = "senteval"
    logistic_regression_tasks: tuple[str, ...] = ("WordContent",)
    seed: int = 1111
    device: str = "cpu"
    precision: str = "fp32"  # resolved (bf16, fp16 or fp32), see kdflow.core.precision

    def __post_init__(self) -> None:
        if not self.hidden_sizes or min(self.hidden_sizes) < 0:
            raise ValueError(f"hidden sizes must be >= 0 (0: logistic regression), got {self.hidden_sizes}")
        if not self.dropouts or not all(0 <= p < 1 for p in self.dropouts):
            raise ValueError(f"dropout rates must lie in [0, 1), got {self.dropouts}")
        if not self.l2_penalties or min(self.l2_penalties) < 0:
            raise ValueError(f"L2 penalties must be >= 0, got {self.l2_penalties}")
        if self.early_stopping not in EARLY_STOPPING_RULES:
            raise ValueError(f"early_stopping must be one of {', '.join(EARLY_STOPPING_RULES)}, "
                             f"got {self.early_stopping!r}")

    def dropouts_of(self, hidden_size: int) -> tuple[float, ...]:
        """Logistic regression has no hidden layer to drop: one configuration per L2, listed with dropout 0."""
        return self.dropouts if hidden_size else (0.0,)

    @property
    def grid(self) -> list[tuple[int, float, float]]:
        """(hidden size, dropout, L2) in selection order."""
        return [(hidden, dropout, l2) for hidden in self.hidden_sizes for dropout in self.dropouts_of(hidden)
                for l2 in self.l2_penalties]

    def for_task(self, task: str) -> ProbeSettings:
        """The settings a probing task is probed with: logistic regression for ``logistic_regression_tasks``."""
        return replace(self, hidden_sizes=(0,)) if task in self.logistic_regression_tasks else self


def _uniform(generator: torch.Generator, *shape: int, fan_in: int) -> torch.Tensor:
    """U(±1/√fan_in) (``nn.Linear``'s init), drawn row-major: hidden unit j's values do not depend on the width."""
    return (torch.rand(*shape, generator=generator) * 2 - 1) / math.sqrt(fan_in)


class SameWidthProbes(torch.nn.Module):
    """Probes of one hidden width, one per (dropout, L2) pair, as weights stacked on a leading configuration axis:
    MLPs w1 [K, d, H], b1 [K, H], w2 [K, H, C], b2 [K, C]; width 0 (logistic regression) w2 [K, d, C], b2 [K, C].
    All start from the same weights."""

    def __init__(self, input_dim: int, n_classes: int, hidden_size: int, dropouts: tuple[float, ...],
                 l2_penalties: tuple[float, ...], init_seeds: list[int]):
        super().__init__()
        w1_gen, b1_gen, w2_gen, b2_gen = (torch.Generator().manual_seed(seed) for seed in init_seeds)

        def stacked(values: torch.Tensor) -> torch.nn.Parameter:
            return torch.nn.Parameter(values.expand(len(dropouts), *values.shape).clone())

        self.hidden_size = hidden_size
        if hidden_size:
            self.w1 = stacked(_uniform(w1_gen, hidden_size, input_dim, fan_in=input_dim).T)
            self.b1 = stacked(_uniform(b1_gen, hidden_size, fan_in=input_dim))
            self.w2 = stacked(_uniform(w2_gen, hidden_size, n_classes, fan_in=hidden_size))
            self.b2 = stacked(_uniform(b2_gen, n_classes, fan_in=hidden_size))
        else:
            self.w2 = stacked(_uniform(w2_gen, n_classes, input_dim, fan_in=input_dim).T)
            self.b2 = stacked(_uniform(b2_gen, n_classes, fan_in=input_dim))
        self.register_buffer("dropout", torch.tensor(dropouts, dtype=torch.float32)[:, None, None])
        self.register_buffer("l2", torch.tensor(l2_penalties, dtype=torch.float32))

    def forward(self, x: torch.Tensor, dropout_noise: torch.Tensor | None) -> torch.Tensor:
        """x [B, d] -> logits [K, B, C]; ``dropout_noise`` [B, >= H], uniform in [0, 1), switches dropout on."""
        if self.hidden_size:
            pre_activation = torch.matmul(x, self.w1) + self.b1[:, None, :]
            if dropout_noise is not None:
                keep = dropout_noise[:, :self.hidden_size] >= self.dropout
                pre_activation = pre_activation * keep / (1 - self.dropout)
            x = torch.sigmoid(pre_activation)
        return torch.matmul(x, self.w2) + self.b2[:, None, :]

    def add_l2_gradients(self) -> None:
        """Adam's coupled weight decay with each configuration's own penalty: grad += l2 · w."""
        for parameter in self.parameters():
            parameter.grad.add_(self.l2.view(-1, *[1] * (parameter.dim() - 1)) * parameter.detach())


class ProbeGrid(torch.nn.Module):
    """The whole grid as one model: one :class:`SameWidthProbes` per hidden size, so that each step is one batched
    matmul per width (no compute spent on padding) and one optimizer step for all."""

    def __init__(self, input_dim: int, n_classes: int, settings: ProbeSettings, init_seed: np.random.SeedSequence):
        super().__init__()
        init_seeds = [int(seed) for seed in init_seed.generate_state(4)]
        self.groups = torch.nn.ModuleList()
        for hidden in settings.hidden_sizes:
            dropouts, l2_penalties = zip(*[(dropout, l2) for dropout in settings.dropouts_of(hidden)
                                           for l2 in settings.l2_penalties])
            self.groups.append(SameWidthProbes(input_dim, n_classes, hidden, dropouts, l2_penalties, init_seeds))

    def forward(self, x: torch.Tensor, dropout_noise: torch.Tensor | None = None) -> torch.Tensor:
        """Logits [K, B, C] in grid order (hidden size, dropout, L2)."""
        return torch.cat([group(x, dropout_noise) for group in self.groups])

    def add_l2_gradients(self) -> None:
        for group in self.groups:
            group.add_l2_gradients()

    @torch.no_grad()
    def accuracies(self, x: torch.Tensor, y: torch.Tensor) -> np.ndarray:
        correct = sum((self(x[i:i + EVAL_CHUNK]).argmax(-1) == y[i:i + EVAL_CHUNK]).sum(1)
                      for i in range(0, len(x), EVAL_CHUNK))
        return (correct.double() / len(x)).cpu().numpy()

    def parameter_masks(self, configs: np.ndarray) -> list[torch.Tensor]:
        """Per parameter (in ``parameters()`` order): which of its stacked configurations the boolean vector
        ``configs`` (over the whole grid) selects."""
        masks = torch.from_numpy(configs).to(self.groups[0].l2.device).split([len(g.l2) for g in self.groups])
        return [mask for group, mask in zip(self.groups, masks) for _ in group.parameters()]


class DevEarlyStopping:
    """Early stopping on dev accuracy for configurations trained together (rules in the module docstring):
    per configuration the best dev accuracy and its epoch, the misses, and whether it has stopped (then frozen)."""

    def __init__(self, n_configs: int, tenacity: int, rule: str):
        self.tenacity, self.rule = tenacity, rule
        self.best_dev, self.best_epoch = np.full(n_configs, -1.0), np.zeros(n_configs, dtype=int)
        self.epochs_trained, self.misses = np.zeros(n_configs, dtype=int), np.zeros(n_configs, dtype=int)
        self.stopped = np.zeros(n_configs, dtype=bool)

    def record(self, epoch: int, dev_accuracy: np.ndarray) -> np.ndarray:
        """Record the dev check after ``epoch`` epochs; returns which configurations improved (keep their weights)."""
        active = ~self.stopped
        beats_best = dev_accuracy > self.best_dev
        improved, missed = active & beats_best, active & ~beats_best
        self.best_dev[improved], self.best_epoch[improved] = dev_accuracy[improved], epoch
        self.epochs_trained[active] = epoch
        if self.rule == "senteval":  # the count is compared before this miss is added, and never reset
            self.stopped |= missed & (self.misses >= self.tenacity)
            self.misses[missed] += 1
        else:
            self.misses[improved] = 0
            self.misses[missed] += 1
            self.stopped |= self.misses >= self.tenacity
        return improved


def _dropout_noise(base_seed: int, step: int, width: int, batch: int, device: torch.device) -> torch.Tensor:
    """Fresh per-step noise [batch, width]; drawn unit-major so that unit j's column does not depend on width."""
    generator = torch.Generator().manual_seed((base_seed + step) % 2**63)
    return torch.rand(width, batch, generator=generator).T.to(device)


def probe(train_X: np.ndarray, train_y: np.ndarray, dev_X: np.ndarray, dev_y: np.ndarray, test_X: np.ndarray,
          test_y: np.ndarray, settings: ProbeSettings | None = None) -> dict:
    """Train the grid of probes on pre-computed encodings (n, d) and integer labels; select on dev only.

    Returns ``{"configs": [...], "selected": {...}, "dev_accuracy", "test_accuracy", "settings"}``, where each
    config lists hidden_size, dropout, l2, dev/test accuracy of its best-dev checkpoint, best_epoch and
    epochs_trained, and "selected" is the dev-best config (its test accuracy is the probing score)."""
    settings = settings or ProbeSettings()
    device = torch.device(settings.device)
    precision = Precision(settings.precision, device.type)
    scaler = precision.grad_scaler()
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
    optimizer = torch.optim.Adam(model.parameters(), lr=settings.learning_rate, fused=True)  # L2: add_l2_gradients
    shuffle_rng = np.random.default_rng(shuffle_seed)
    dropout_base = int(dropout_seed.generate_state(1, np.uint64)[0])
    uses_dropout = any(dropout > 0 for _, dropout, _ in grid)
    width = max(settings.hidden_sizes)

    n_configs = len(grid)
    stopping = DevEarlyStopping(n_configs, settings.tenacity, settings.early_stopping)
    best_parameters = [parameter.detach().clone() for parameter in model.parameters()]
    epoch = step = 0
    while epoch <= settings.max_epochs and not stopping.stopped.all():
        for _ in range(settings.epochs_per_check):
            order = torch.from_numpy(shuffle_rng.permutation(len(x_train))).to(device)
            for batch in order.split(settings.batch_size):
                noise = _dropout_noise(dropout_base, step, width, len(batch), device) if uses_dropout else None
                with precision.autocast():
                    logits = model(x_train[batch], noise)
                losses = F.cross_entropy(logits.float().reshape(-1, n_classes), y_train[batch].repeat(n_configs),
                                         reduction="none")
                optimizer.zero_grad()
                # configs are independent: the sum of their losses gives each its own gradient
                scaler.scale(losses.view(n_configs, -1).mean(1).sum()).backward()
                scaler.unscale_(optimizer)  # the true gradient before the L2 term is added
                model.add_l2_gradients()
                scaler.step(optimizer)
                scaler.update()
                step += 1
        epoch += settings.epochs_per_check
        with precision.autocast():
            dev_accuracy = model.accuracies(x_dev, y_dev)
        improved = stopping.record(epoch, dev_accuracy)
        for parameter, best, mask in zip(model.parameters(), best_parameters, model.parameter_masks(improved)):
            best[mask] = parameter.detach()[mask]

    with torch.no_grad():
        for parameter, best in zip(model.parameters(), best_parameters):
            parameter.copy_(best)
    with precision.autocast():
        test_accuracy = model.accuracies(x_test, y_test)
    configs = [{"hidden_size": hidden, "dropout": dropout, "l2": l2, "dev_accuracy": float(stopping.best_dev[k]),
                "test_accuracy": float(test_accuracy[k]), "best_epoch": int(stopping.best_epoch[k]),
                "epochs_trained": int(stopping.epochs_trained[k])} for k, (hidden, dropout, l2) in enumerate(grid)]
    selected = int(np.argmax(stopping.best_dev))  # first of equals in grid order
    hidden, dropout, l2 = grid[selected]
    return {"configs": configs, "selected": {"hidden_size": hidden, "dropout": dropout, "l2": l2},
            "dev_accuracy": float(stopping.best_dev[selected]), "test_accuracy": float(test_accuracy[selected]),
            "settings": asdict(settings)}


def probe_encodings(path: str | Path, task: str, data: ProbingData, settings: ProbeSettings | None = None) -> dict:
    """Probe every layer of a model's cached encodings of ``task`` (:mod:`kdflow.probing.encodings`), with the task's
    baselines: ``{"task", "labels", "layers": [{"layer", ...probe result}], "baselines": {name: accuracy}}``."""
    settings = (settings or ProbeSettings()).for_task(task)
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

"""The optimisation settings of one training run. Torch-free: the workflow checks a config's hyperparameter
names against these fields while planning, before any job (or torch) starts."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Hyperparameters:
    """Optimisation settings of one training run (thesis Table 4.1 / Universal-KD §5.2 vocabulary)."""

    learning_rate: float
    batch_size: int
    epochs: int
    warmup_ratio: float = 0.1
    weight_decay: float = 0.01
    max_grad_norm: float | None = 1.0
    max_seq_length: int = 128
    eval_batch_size: int = 128
    seed: int = 0
    log_every: int = 50
    max_train_examples: int | None = None  # a seeded random subset of train, for quick runs on small hardware

    @classmethod
    def from_dict(cls, values: dict) -> "Hyperparameters":
        known = set(cls.__dataclass_fields__)
        unknown = set(values) - known
        if unknown:
            raise ValueError(f"unknown hyperparameters {sorted(unknown)}; known: {sorted(known)}")
        return cls(**values)

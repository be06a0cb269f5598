"""The optimisation settings of one training run. Torch-free: the workflow checks a config's hyperparameter
names against these fields while planning, before any job (or torch) starts."""

from __future__ import annotations

from dataclasses import dataclass

# The options each optimiser takes beyond lr and weight decay; an option left None is torch's default.
OPTIMIZER_OPTIONS = {"adamw": {"betas", "eps"}, "adam": {"betas", "eps"}, "adadelta": {"rho", "eps"}}
# What the members of a pack of runs (kdflow.training.packs) may set apart: per-member tensors of its optimiser, and
# each member's own shuffler and initialisation.
PACK_VARIES = ("learning_rate", "weight_decay", "seed")
# The method options they may set apart: its loss weights (kdflow.distillation.methods.registry.WEIGHTS), a buffer of
# each member's, so long as the members weigh the same terms (their zero weights alike).
PACK_WEIGHTS = ("alpha", "beta", "gamma")


@dataclass
class Hyperparameters:
    """Optimisation settings of one training run (thesis Table 4.1 / Universal-KD §5.2 vocabulary). What each
    one means in training is in :func:`kdflow.training.loop.train` and the config schema."""

    learning_rate: float
    batch_size: int  # examples per optimiser step, whatever the gradient accumulation
    epochs: int
    warmup_ratio: float = 0.1  # of all optimiser steps; the thesis's "E_w of E epochs" is E_w / E
    lr_decay: str = "linear"  # after warm-up: linear (to 0 at the last step) | none (constant)
    optimizer: str = "adamw"  # adamw | adam | adadelta
    betas: list[float] | None = None
    eps: float | None = None
    rho: float | None = None
    weight_decay: float = 0.01
    weight_decay_all: bool = False  # False: biases and LayerNorm weights are not decayed (the BERT recipe)
    max_grad_norm: float | None = 1.0
    gradient_accumulation_steps: int = 1
    evaluate_every_steps: int | None = None  # None: at epoch ends only
    keep: str = "best"  # best (dev) | final
    max_seq_length: int = 128
    length_buckets: int | None = 8  # training batches pad to one of this many lengths (None: to their longest)
    eval_batch_size: int = 128
    seed: int = 0
    log_every: int = 50
    max_train_examples: int | None = None  # a seeded random subset of train, for quick runs on small hardware

    def __post_init__(self):
        for name, allowed in (("optimizer", OPTIMIZER_OPTIONS), ("lr_decay", ("linear", "none")),
                              ("keep", ("best", "final"))):
            if getattr(self, name) not in allowed:
                raise ValueError(f"{name} {getattr(self, name)!r} is not one of {sorted(allowed)}")
        for option in ("betas", "eps", "rho"):
            if getattr(self, option) is not None and option not in OPTIMIZER_OPTIONS[self.optimizer]:
                raise ValueError(f"{self.optimizer} takes no {option}; it takes "
                                 f"{sorted(OPTIMIZER_OPTIONS[self.optimizer])}")

    @classmethod
    def value_problem(cls, name: str, value) -> str | None:
        """Why ``value`` cannot be hyperparameter ``name`` by its type (a grid's values are not in the schema),
        or None."""
        annotation = cls.__dataclass_fields__[name].type  # a string: annotations are postponed
        kinds = {"float": (int, float), "int": (int,), "bool": (bool,), "str": (str,), "None": (type(None),),
                 "list[float]": (list,)}
        accepted = tuple(kind for part in annotation.split(" | ") for kind in kinds[part])
        if isinstance(value, accepted) and not (isinstance(value, bool) and bool not in accepted):
            return None
        return f"{value!r} is not of type {annotation}"

    @classmethod
    def from_dict(cls, values: dict) -> "Hyperparameters":
        known = set(cls.__dataclass_fields__)
        unknown = set(values) - known
        if unknown:
            raise ValueError(f"unknown hyperparameters {sorted(unknown)}; known: {sorted(known)}")
        return cls(**values)

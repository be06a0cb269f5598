"""The distillation-method registry.

A method is an ``nn.Module`` (it may own trainable parts: projections, the student's pseudo classifiers) that
turns the student's output, the cached teacher signals and the gold labels into named loss terms, combined
with explicit weights as in Universal-KD Eq. 10 (see :mod:`kdflow.training.losses` for the one loss convention)::

    loss = alpha * ce + beta * kd + gamma * inter

``ce`` is the hard-label loss, ``kd`` the logit-level distillation term and ``inter`` the method's own
intermediate-layer (or pseudo-classifier) term. Weights can change between the stages of a training schedule
(Universal-KD's two stages, Annealing-KD's two phases). Adding a method is one ``@register`` class in a module of
:mod:`kdflow.distillation.methods` (imported by the package), plus a config entry.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch
from torch import nn

from kdflow.core.errors import UserError
from kdflow.students.registry import StudentOutput
from kdflow.training.losses import task_loss
from kdflow.transfer.signals import SIGNALS, TeacherSignals

WEIGHTS = ("alpha", "beta", "gamma")
TERMS = ("ce", "kd", "inter")  # the term each weight multiplies


@dataclass(frozen=True)
class Shapes:
    """Sizes a method needs to build its trainable parts."""

    student_widths: tuple[int, ...]  # width of each student layer's representation, bottom to top
    teacher_layers: int
    teacher_width: int
    num_labels: int
    regression: bool
    signals: dict[str, tuple[int, ...]] = field(default_factory=dict, hash=False)  # one example's, as stored

    def signal_shape(self, name: str) -> tuple[int, ...]:
        """One example's shape of the teacher signal ``name``: as the signals file stores it, or, for shapes not
        read from one, as the signal's registration gives it from the teacher's sizes."""
        if name in self.signals:
            return self.signals[name]
        return SIGNALS[name].example_shape(self.teacher_layers, self.teacher_width, self.num_labels)

    @property
    def student_layers(self) -> int:
        return len(self.student_widths)


class Method(nn.Module):
    """Base class: subclasses set ``needs`` and ``defaults`` and implement :meth:`terms`."""

    needs: frozenset[str] = frozenset({"logits"})  # teacher signals used (kdflow.transfer.signals.SIGNALS)
    provides: tuple[str, ...] = ("ce", "kd")  # the terms :meth:`terms` adds to "ce"
    defaults: dict = {"alpha": 1.0, "beta": 0.0, "gamma": 0.0}
    # A weight left at None is the complement of another, e.g. Universal-KD §4.2's gamma = 1 - beta and
    # ALP-KD's CE weight 1 - η: so a grid over beta alone moves both, as in the papers.
    complement: dict[str, str] = {}
    learns_from_assistant = False  # True: the signals come from a distilled teacher assistant (TAKD)

    def __init__(self, shapes: Shapes, **options):
        super().__init__()
        unknown = set(options) - set(self.defaults)
        if unknown:
            raise ValueError(f"{type(self).__name__}: unknown options {sorted(unknown)}; known: {sorted(self.defaults)}")
        self.shapes = shapes
        self.options = {**self.defaults, **options}
        for weight, other in self.complement.items():
            if self.options.get(weight) is None:
                self.options[weight] = 1.0 - self.options[other]
        self.weights = {name: 0.0 for name in WEIGHTS}
        # the weights as a buffer too, which the loss multiplies by: stacked per member in a pack
        # (kdflow.training.packs), where members may weigh their terms differently
        self.register_buffer("loss_weights", torch.zeros(len(WEIGHTS)), persistent=False)
        self.set_weights(**{name: self.options[name] for name in WEIGHTS if name in self.options})

    def set_weights(self, **weights: float) -> None:
        """Change loss weights, e.g. between the stages of a schedule (Universal-KD §4.2: stage 2 is CE only)."""
        unknown = set(weights) - set(WEIGHTS)
        if unknown:
            raise ValueError(f"unknown loss weights {sorted(unknown)}; known: {list(WEIGHTS)}")
        self.weights.update({name: float(value) for name, value in weights.items()})
        for weight, term in zip(WEIGHTS, TERMS):
            if self.weights[weight] and term not in ("ce", *self.provides):
                raise ValueError(f"{self.name} has no {term!r} term: {weight} must be 0")
        if not any(self.weights.values()):
            raise ValueError(f"{self.name}: every loss weight is zero")
        self.loss_weights.copy_(torch.tensor([self.weights[name] for name in WEIGHTS]))

    def terms(self, student: StudentOutput, teacher: TeacherSignals, labels: torch.Tensor) -> dict[str, torch.Tensor]:
        raise NotImplementedError

    def layer_attention(self, student: StudentOutput, teacher: TeacherSignals) -> tuple[torch.Tensor, list[int]]:
        """The attention [B, L, N] that this method's loss puts on the N teacher layers, and the student layers
        (1-based, bottom to top) its L rows belong to: what a figure of the method's attention draws
        (kdflow.analysis.attention_maps). A method that attends overrides it; the others refuse."""
        raise no_attention(self.name)

    @classmethod
    def attends(cls) -> bool:
        """Whether the method weighs teacher layers by an attention (overrides :meth:`layer_attention`)."""
        return cls.layer_attention is not Method.layer_attention

    def start_epoch(self, epoch: int, epochs: int) -> None:
        """Called before each epoch of a stage (1-based); for schedules inside a method (Annealing-KD)."""

    def forward(self, student: StudentOutput, teacher: TeacherSignals, labels: torch.Tensor) -> dict[str, torch.Tensor]:
        terms = {"ce": task_loss(student.logits, labels, self.shapes.regression)}
        if self.weights["beta"] or self.weights["gamma"]:
            terms.update(self.terms(student, teacher, labels))
        # which terms count is the Python weights' (a pack's members agree on it), how much the buffer's
        loss = sum(self.loss_weights[i] * terms[t] for i, (w, t) in enumerate(zip(WEIGHTS, TERMS)) if self.weights[w])
        return {"loss": loss, **terms}


METHODS: dict[str, type[Method]] = {}


def register(name: str):
    def decorate(cls: type[Method]) -> type[Method]:
        if name in METHODS:
            raise ValueError(f"method {name!r} is registered twice")
        cls.name = name
        METHODS[name] = cls
        return cls

    return decorate


def attentive_methods() -> list[str]:
    """The registered methods whose loss weighs teacher layers by an attention."""
    return [name for name in available_methods() if METHODS[name].attends()]


def no_attention(method: str) -> UserError:
    return UserError(f"{method} has no attention over teacher layers; methods that do: "
                     f"{', '.join(attentive_methods())}")


def available_methods() -> list[str]:
    """Names of every registered method."""
    return sorted(METHODS)


def method_class(name: str) -> type[Method]:
    if name not in available_methods():
        raise KeyError(f"unknown method {name!r}; known: {', '.join(sorted(METHODS))}")
    return METHODS[name]


def build_method(name: str, shapes: Shapes, options: dict | None = None) -> Method:
    return method_class(name)(shapes, **(options or {}))


# Layer mappings between M student layers and N teacher layers. Intermediate-layer terms cover the student's
# layers 1..M-1: its top layer is distilled through the logits (PKD, ALP-KD §"Experimental Study").


def skip_mapping(teacher_layers: int, student_layers: int) -> list[int]:
    """PKD-skip (Sun et al. 2019): student layer j <- teacher layer j * N/M, e.g. 12 -> 6: 2, 4, 6, 8, 10."""
    if student_layers > teacher_layers:
        raise ValueError(f"the skip mapping needs a teacher at least as deep as the student ({student_layers} student "
                         f"layers, {teacher_layers} teacher layers): give the method a 'mapping'")
    step = teacher_layers // student_layers
    return [j * step for j in range(1, student_layers)]


def buckets(teacher_layers: int, student_layers: int, overlap: bool) -> list[list[int]]:
    """Teacher layers 1..N split into M-1 contiguous buckets of near-equal size (ALP-KD: 12 -> 4 gives
    [1-4], [5-8], [9-12]). With ``overlap`` (ALP-KD's "PO") every bucket also takes the first layer of the next
    one: [1-5], [5-9], [9-12]."""
    parts = [list(part + 1) for part in np.array_split(np.arange(teacher_layers), student_layers - 1)]
    if overlap:
        parts = [part + parts[i + 1][:1] for i, part in enumerate(parts[:-1])] + parts[-1:]
    return parts

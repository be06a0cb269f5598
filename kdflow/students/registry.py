"""The student registry: every student architecture is one module of :mod:`kdflow.students` that registers a
builder here (the package imports every member, so importing any of it fills the registry).

A student is an ``nn.Module`` whose ``forward(batch)`` takes the batch dictionary of :mod:`kdflow.training.batching`
(``input_ids``, ``attention_mask``, ``token_type_ids``; sentence pairs arrive as one sequence) and returns a
:class:`StudentOutput`: the logits and one pooled representation per layer, which is what every distillation
method of :mod:`kdflow.distillation.methods` needs (PKD and ALP-KD match layer representations, Universal-KD puts pseudo
classifiers on them). Adding a student is one file with a ``@register("name")`` builder plus a config entry.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn


@dataclass
class StudentOutput:
    logits: torch.Tensor  # [B, C] (C = 1 for regression)
    layers: list[torch.Tensor]  # one pooled representation [B, H_j] per layer, bottom to top


@dataclass
class StudentContext:
    """What a builder may use: the task's output size, the teacher's tokenizer and its fine-tuned directory; for a
    word-level student the words of its transfer set (:mod:`kdflow.students.tokens`). ``read_vector_files`` is False
    when trained weights will replace the initial ones (:mod:`kdflow.students.loading`): a word-vectors file, up to
    3.6 GB for word2vec's GoogleNews vectors, is then not read, only its vector width."""

    num_labels: int
    tokenizer: object
    teacher_dir: str | None = None
    words: list[str] | None = None
    read_vector_files: bool = True


Builder = Callable[[dict, StudentContext], nn.Module]


@dataclass(frozen=True)
class StudentType:
    builder: Builder  # called with every option resolved (``defaults`` under the spec's own)
    defaults: dict  # every option the student has, so a misspelt one is an error, and the workflow can check it


STUDENTS: dict[str, StudentType] = {}


def register(name: str, defaults: dict) -> Callable[[Builder], Builder]:
    def decorate(builder: Builder) -> Builder:
        if name in STUDENTS:
            raise ValueError(f"student {name!r} is registered twice")
        STUDENTS[name] = StudentType(builder, defaults)
        return builder

    return decorate


def with_defaults(spec: dict, defaults: dict, what: str) -> dict:
    """``spec`` over ``defaults``; every option must have a default, so a misspelt one is an error, not ignored."""
    unknown = sorted(set(spec) - set(defaults))
    if unknown:
        raise ValueError(f"unknown option(s) {unknown} for {what}; known: {sorted(defaults)}")
    return {**defaults, **spec}


def student_options(spec: dict) -> tuple[StudentType, dict]:
    """The registered student ``spec`` (``{"type": <registered name>, ...its options}``) names, and every option of
    it resolved."""
    spec = dict(spec)
    kind = spec.pop("type")
    if kind not in STUDENTS:
        raise KeyError(f"unknown student type {kind!r}; known: {', '.join(sorted(STUDENTS))}")
    student = STUDENTS[kind]
    return student, with_defaults(spec, student.defaults, kind)


def build_student(spec: dict, context: StudentContext) -> nn.Module:
    """Build the student described by ``spec``."""
    student, options = student_options(spec)
    return student.builder(options, context)

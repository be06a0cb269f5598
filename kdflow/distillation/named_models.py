"""Models of the DAG as subjects of probing, prediction analysis and inference measurements.

A *model reference* (config ``models:``) names one model by what produced it:

* ``{pretrained: <teacher>}``: the checkpoint the teacher starts from (its ``model``; a config-built teacher,
  such as the demo's, is its random initialisation at the teacher's seed);
* ``{teacher: <teacher>, task: <task>}``: the fine-tuned teacher;
* ``{experiment: <e>, task: <t>, student: <s>, method: <m>}``: the student the experiment selected on dev for that
  task, student and method: the selected grid point's best-dev seed, as for the GLUE submission.

:func:`load_model` turns a reference (with the files the workflow resolved for it) into a :class:`LoadedModel`:
a module in eval mode, its tokenizer, and two views of it: logits, and one sentence vector per layer.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn
from transformers import AutoTokenizer

from kdflow.core.model_references import reference_kind
from kdflow.core.runtime import seed_everything
from kdflow.distillation.selection import selected_run_dir
from kdflow.students.loading import load_distilled
from kdflow.students.tokens import student_tokenizer
from kdflow.students.transformer import HFStudent
from kdflow.teachers.finetune import build_teacher
from kdflow.teachers.pseudo_heads import pool_layers
from kdflow.training.hf_models import load_classifier, model_inputs

Batch = dict[str, torch.Tensor]
@dataclass
class LoadedModel:
    module: nn.Module  # in eval mode
    tokenizer: object
    logits: Callable[[Batch], torch.Tensor]
    # (batch, pooling) -> one [B, H_l] vector per layer, bottom to top (token-level: the embedding output first)
    layers: Callable[[Batch, str], list[torch.Tensor]]
    token_level: bool  # True: layers are pooled token states; False: the model's own sentence vectors


def hf_model(model: nn.Module, tokenizer) -> LoadedModel:
    """A Hugging Face sequence classifier: every hidden state (embeddings included), pooled over tokens."""

    def layers(batch: Batch, pooling: str) -> list[torch.Tensor]:
        out = model(**model_inputs(model, batch), output_hidden_states=True)
        return list(pool_layers(out.hidden_states, batch["attention_mask"], pooling).unbind(1))

    return LoadedModel(model.eval(), tokenizer, lambda batch: model(**model_inputs(model, batch)).logits,
                       layers, token_level=True)


def student_model(student: nn.Module, teacher_tokenizer) -> LoadedModel:
    """A distilled student, with the tokenizer it reads text by (its own, or its teacher's). Transformer students
    (:class:`kdflow.students.transformer.HFStudent`) are probed like any Hugging Face model; recurrent and
    convolutional ones through their own per-layer sentence vectors (the BiLSTM's final states, thesis §6.1;
    attention-pooled layers of Universal-KD's students), which pooling does not apply to."""
    tokenizer = student_tokenizer(student, teacher_tokenizer)
    if isinstance(student, HFStudent):
        loaded = hf_model(student.model, tokenizer)
        loaded.module = student.eval()
        return loaded

    def layers(batch: Batch, pooling: str) -> list[torch.Tensor]:
        return student(batch).layers

    return LoadedModel(student.eval(), tokenizer, lambda batch: student(batch).logits, layers, token_level=False)


def load_model(reference: dict, files: dict, num_labels: int, pretrained: dict | None = None) -> LoadedModel:
    """Load a referenced model from the files the workflow resolved for it: ``teacher_model`` (the fine-tuned
    teacher's ``model`` directory) for teachers and students; ``selection`` (the experiment's selection JSON) and
    ``runs_dir`` (``results/students/<experiment>/<task>/<student>/<method>``) for students. A ``pretrained``
    reference needs its teacher's ``spec`` (model, or architecture and tokenizer) and ``seed`` (``pretrained``)."""
    kind = reference_kind(reference)
    if kind == "pretrained":
        seed_everything(pretrained["seed"])  # a config-built teacher's initialisation
        model, tokenizer = build_teacher(pretrained["spec"], num_labels)
        return hf_model(model, tokenizer)
    teacher_model = Path(files["teacher_model"])
    tokenizer = AutoTokenizer.from_pretrained(teacher_model)
    if kind == "teacher":
        return hf_model(load_classifier(teacher_model), tokenizer)
    run_dir = selected_run_dir(reference, files["selection"], files["runs_dir"])
    return student_model(load_distilled(run_dir, teacher_model.parent, num_labels), tokenizer)

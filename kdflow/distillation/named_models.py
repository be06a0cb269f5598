"""Models of the DAG as subjects of probing, prediction analysis and inference measurements.

A *model reference* (config ``models:``) names one model by what produced it:

* ``{pretrained: <teacher>}``: the checkpoint the teacher starts from (its ``model``; a config-built teacher,
  such as the demo's, is its random initialisation at the teacher's seed);
* ``{teacher: <teacher>, task: <task>}``: the fine-tuned teacher;
* ``{experiment: <e>, task: <t>, student: <s>, method: <m>}``: the student the experiment selected on dev for that
  task, student and method: the selected grid point's best-dev seed, as for the GLUE submission;
* ``{embeddings: <source>}``: the raw input vectors of a pre-trained or fine-tuned teacher, or of an experiment's
  student before training (:func:`embedding_model`, the thesis's "embed." baselines).

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

from kdflow.core.data import TaskData
from kdflow.core.devices import seed_everything
from kdflow.core.model_references import embeddings_source, reference_kind
from kdflow.distillation.selection import selected_run_dir
from kdflow.students.embeddings import TokenEmbedding
from kdflow.students.loading import load_distilled
from kdflow.students.registry import StudentContext, build_student
from kdflow.students.tokens import WholeSentences, reads_words, student_tokenizer, transfer_words
from kdflow.students.transformer import HFStudent
from kdflow.teachers.finetune import build_teacher
from kdflow.teachers.pseudo_heads import pool_layers
from kdflow.training.hf_models import load_classifier, model_inputs
from kdflow.training.loop import subset_indices
from kdflow.transfer.frames import transfer_frame

Batch = dict[str, torch.Tensor]
@dataclass
class LoadedModel:
    module: nn.Module  # in eval mode
    tokenizer: object
    logits: Callable[[Batch], torch.Tensor] | None  # None: no classifier (an embeddings model)
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


def embedding_model(vectors: torch.Tensor, tokenizer) -> LoadedModel:
    """Thesis §6.1's "embed." baselines (Fig. 6.2): a sentence encoded by its tokens' raw input vectors alone, read
    whole and without special tokens ([CLS]/[SEP], <cls>/<sep>), and pooled over its tokens (the thesis averages
    them: the config's default ``mean``). One layer, numbered 0 as the embedding output of a transformer."""
    table = nn.Embedding.from_pretrained(vectors.detach().float().clone(), freeze=True)

    def layers(batch: Batch, pooling: str) -> list[torch.Tensor]:
        return list(pool_layers([table(batch["input_ids"])], batch["attention_mask"], pooling).unbind(1))

    return LoadedModel(table.eval(), WholeSentences(tokenizer, None), None, layers, token_level=True)


def input_vectors(student: nn.Module) -> torch.Tensor:
    """The vectors a student's tokens start from: its :class:`TokenEmbedding`'s first channel, before any projection
    (a multichannel student's two channels start as one matrix), or a Hugging Face model's token embedding matrix."""
    embedding = student.model.get_input_embeddings() if isinstance(student, HFStudent) else student.embed
    return embedding.channels[0].weight if isinstance(embedding, TokenEmbedding) else embedding.weight


def initial_student(task: TaskData, transfer: str | Path | None, teacher_model: Path, settings: dict) -> tuple:
    """An experiment's student before training, with the teacher's tokenizer: built as its job builds it
    (:func:`kdflow.distillation.distill.distill`), from the seed and, for a word-level student, the words of its
    seeded training subset of the transfer set (``transfer``: the augmented set's file, None for train).
    ``settings``: :func:`kdflow.workflow.job_settings.embedding_settings`."""
    tokenizer = AutoTokenizer.from_pretrained(teacher_model)
    seed_everything(settings["seed"])
    words = None
    if reads_words(settings["student"]):
        frame = transfer_frame(task, transfer)
        words = transfer_words(frame.iloc[subset_indices(len(frame), settings["max_train_examples"], settings["seed"])])
    context = StudentContext(task.num_labels, tokenizer, str(teacher_model.parent), words)
    return build_student(settings["student"], context), tokenizer


def load_embeddings(reference: dict, files: dict, num_labels: int, pretrained: dict | None,
                    settings: dict | None) -> LoadedModel:
    """An ``embeddings`` reference as an :func:`embedding_model`: the token vectors of a teacher's pre-trained
    checkpoint (``pretrained``), of a fine-tuned teacher (``teacher_model``), or of an experiment's student before
    training (``data``, ``teacher_model``, ``transfer`` and ``settings``), with the tokenizer the model reads by."""
    source = embeddings_source(reference)
    if source == "pretrained":
        seed_everything(pretrained["seed"])  # a config-built teacher's initialisation, as the pretrained kind's
        model, tokenizer = build_teacher(pretrained["spec"], num_labels)
        return embedding_model(model.get_input_embeddings().weight, tokenizer)
    teacher_model = Path(files["teacher_model"])
    if source == "teacher":
        model = load_classifier(teacher_model)
        return embedding_model(model.get_input_embeddings().weight, AutoTokenizer.from_pretrained(teacher_model))
    student, tokenizer = initial_student(TaskData.load(files["data"]), files.get("transfer"), teacher_model, settings)
    reader = student_tokenizer(student, tokenizer)
    return embedding_model(input_vectors(student), reader.tokenizer if isinstance(reader, WholeSentences) else reader)


def load_model(reference: dict, files: dict, num_labels: int, pretrained: dict | None = None,
               embeddings: dict | None = None) -> LoadedModel:
    """Load a referenced model from the files the workflow resolved for it: ``teacher_model`` (the fine-tuned
    teacher's ``model`` directory) for teachers and students; ``selection`` (the experiment's selection JSON) and
    ``runs_dir`` (``results/students/<experiment>/<task>/<student>/<method>``) for students. A ``pretrained``
    reference needs its teacher's ``spec`` (model, or architecture and tokenizer) and ``seed`` (``pretrained``); an
    ``embeddings`` reference what :func:`load_embeddings` says."""
    kind = reference_kind(reference)
    if kind == "embeddings":
        return load_embeddings(reference, files, num_labels, pretrained, embeddings)
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

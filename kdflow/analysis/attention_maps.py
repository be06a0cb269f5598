"""Layer-attention weights of a trained student over its teacher's layers, per example: Universal-KD Fig. 3
(middle and right: the penultimate layer of a 4-layer student trained with Universal-KD(IL) or ALP over the 12
teacher layers, 10 RTE examples) and ALP-KD Fig. 3 (the student's first layer).

The weights are not stored during training, so they are recomputed by the run's own method: the best-dev
student and the method's trainable parts are reloaded from ``model.safetensors``, and the teacher side is
computed for the chosen examples by :func:`kdflow.transfer.labelling.compute_signals`, the function that labelled the
transfer set (the cache holds the transfer set only, never dev), so it matches what the student trained
against, float16 layers included.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pandas as pd
import torch
from transformers import AutoTokenizer

from kdflow.core.data import TaskData
from kdflow.core.errors import UserError
from kdflow.core.intermediates import TensorFile
from kdflow.distillation.distill import layer_widths
from kdflow.distillation.methods.hidden_methods import ALP
from kdflow.distillation.methods.output_methods import (
    UniversalKD,
    UniversalKDAttentionOnLosses,
    UniversalKDCapacityGap,
)
from kdflow.distillation.methods.registry import (
    Method,
    Shapes,
    available_methods,
    build_method,
    method_class,
)
from kdflow.students.loading import load_distilled
from kdflow.students.registry import StudentOutput
from kdflow.students.tokens import student_tokenizer
from kdflow.teachers.pseudo_heads import gold_distance
from kdflow.training.batching import batches, to_device, tokenize
from kdflow.training.loop import subset_indices
from kdflow.training.losses import layer_attention
from kdflow.transfer.labelling import compute_signals
from kdflow.transfer.signals import SignalCache, TeacherSignals

INTERMEDIATE = (UniversalKD, ALP)  # student layers 1..M-1 attend (Universal-KD Eq. 4, ALP-KD Eq. 5-6)
OUTPUT = (UniversalKDCapacityGap, UniversalKDAttentionOnLosses)  # the student's output attends (Eq. 8, §5.6)


def attentive_methods() -> list[str]:
    """The registered methods that weigh teacher layers by an attention."""
    return [name for name in available_methods() if issubclass(method_class(name), INTERMEDIATE + OUTPUT)]


def no_attention(method: str) -> UserError:
    known = ", ".join(attentive_methods())
    return UserError(f"{method} has no attention over teacher layers; methods that do: {known}")


def layer_attention_weights(
    method: Method, student: StudentOutput, teacher: TeacherSignals
) -> tuple[torch.Tensor, list[int]]:
    """The attention [B, L, N] that ``method``'s loss puts on the N teacher layers, and the student layers
    (1-based, bottom to top) its L rows belong to."""
    depth = method.shapes.student_layers
    if isinstance(method, UniversalKD):
        logits = torch.stack([head(h) for head, h in zip(method.heads, student.layers[:-1])], dim=1)
        weights = method.attention(method.distribution(logits), method.distribution(teacher.head_logits))
        return weights, list(range(1, depth))
    if isinstance(method, ALP):
        return method.attention(student, teacher), list(range(1, depth))
    if isinstance(method, OUTPUT):  # these compute the attention inside their loss, from the output distribution
        query = method.distribution(student.logits)[:, None]
        return layer_attention(query, method.distribution(teacher.head_logits)), [depth]
    raise no_attention(method.name)


def load_method(run_dir: Path, report: dict, shapes: Shapes) -> Method:
    """The run's method with its trained parts (student pseudo classifiers, projections), in eval mode."""
    method = build_method(report["method"], shapes, report["method_options"])
    with TensorFile(Path(run_dir) / "model.safetensors") as saved:
        state = {k.removeprefix("method."): saved.get(k) for k in saved.keys() if k.startswith("method.")}
    method.load_state_dict(state)
    return method.eval()


def example_text(row) -> str:
    return row.text_a if pd.isna(row.text_b) else f"{row.text_a} [SEP] {row.text_b}"


@torch.no_grad()
def attention_weights(
    run_dir: Path, teacher_dir: Path, heads_path: Path, data_dir: Path, n_examples: int = 10,
    student_layer: int | None = None, split: str = "dev", seed: int = 0, device="cpu",
) -> dict:
    """Attention of one student layer (1-based; default: the topmost that attends, i.e. the penultimate layer
    for Universal-KD(IL) and ALP as in Universal-KD Fig. 3) over the teacher's layers, for ``n_examples``
    examples of ``split`` drawn with ``seed`` (the same examples for every run of the task).

    Returns JSON-serialisable data: ``method``, ``student`` (its spec), ``task``, ``split``, ``student_layer``,
    ``student_layers`` (its depth M), ``teacher_layers`` (1..N), per example ``idx``, ``texts``, ``labels``
    (None when unlabelled) and ``weights`` [n_examples, N] (rows sum to 1), and ``gold_distance`` [n_examples, N]:
    each teacher pseudo-head's distance to the gold label on the same examples (Universal-KD Fig. 3, left)."""
    run_dir, teacher_dir, device = Path(run_dir), Path(teacher_dir), torch.device(device)
    report = json.loads((run_dir / "metrics.json").read_text())
    if report["method"] not in attentive_methods():
        raise no_attention(report["method"])
    task = TaskData.load(data_dir)
    regression, labelled = task.meta["regression"], task.is_labelled(split)
    frame = task.split(split)
    examples = frame.iloc[subset_indices(len(frame), n_examples, seed)].reset_index(drop=True)

    teacher_length = json.loads((teacher_dir / "metrics.json").read_text())["hyperparameters"]["max_seq_length"]
    with tempfile.TemporaryDirectory() as scratch:
        signals = Path(scratch) / "signals.safetensors"
        compute_signals(examples, split, teacher_dir, heads_path, True, teacher_length, len(examples), device, signals)
        cache = SignalCache(signals, device, examples["idx"].to_numpy())
    teacher = cache[torch.arange(len(examples), device=device)]

    student = load_distilled(run_dir, teacher_dir, task.num_labels).to(device)
    tokenizer = AutoTokenizer.from_pretrained(teacher_dir / "model")
    encoded = tokenize(examples, student_tokenizer(student, tokenizer), report["hyperparameters"]["max_seq_length"],
                       labelled)
    batch = to_device(next(batches(encoded, len(examples), regression)), device)
    widths = layer_widths(student, batch)
    shapes = Shapes(widths, cache.teacher_layers, cache.teacher_width, task.num_labels, regression)
    method = load_method(run_dir, report, shapes).to(device)
    weights, layers = layer_attention_weights(method, student(batch), teacher)

    chosen = layers[-1] if student_layer is None else student_layer
    if chosen not in layers:
        raise UserError(f"{report['method']} attends from student layers {layers}, not {student_layer}")
    labels = examples["label"].to_numpy() if labelled else None
    distance = gold_distance(teacher.head_logits.cpu().numpy(), labels, regression) if labelled else None
    return {
        "method": report["method"],
        "student": report["student"],
        "task": report["task"],
        "split": split,
        "student_layer": chosen,
        "student_layers": shapes.student_layers,
        "teacher_layers": list(range(1, cache.teacher_layers + 1)),
        "idx": examples["idx"].tolist(),
        "texts": [example_text(row) for row in examples.itertuples()],
        "labels": None if labels is None else labels.tolist(),
        "weights": weights[:, layers.index(chosen)].cpu().tolist(),
        "gold_distance": None if distance is None else distance.tolist(),
    }

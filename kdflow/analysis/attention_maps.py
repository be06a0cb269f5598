"""Layer-attention weights of a trained student over its teacher's layers, per example: Universal-KD Fig. 3
(middle and right: the penultimate layer of a 4-layer student trained with Universal-KD(IL) or ALP over the 12
teacher layers, 10 RTE examples) and ALP-KD Fig. 3 (the first layer of 2-, 4- and 6-layer ALP students, 10 random
SST-2 examples).

The weights are not stored during training, so they are recomputed (:func:`recompute`, which ALP-KD Fig. 4's
:mod:`kdflow.analysis.layer_outputs` shares) by the run's own method: the best-dev
student and the method's trainable parts are reloaded from ``model.safetensors``, and the teacher side is
computed for the chosen examples by :func:`kdflow.transfer.labelling.compute_signals`, the function that labelled the
transfer set (the cache holds the transfer set only, never dev), so it matches what the student trained
against, float16 layers included; teacher and student run in the job's precision, as the signals and the
students did.
"""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import torch
from transformers import AutoTokenizer

from kdflow.core import run_files
from kdflow.core.data import TaskData
from kdflow.core.errors import UserError
from kdflow.core.intermediates import read_training_record
from kdflow.core.precision import FP32, Precision
from kdflow.core.tensor_files import TensorFile
from kdflow.distillation.distill import layer_widths
from kdflow.distillation.methods.registry import Method, Shapes, attentive_methods, build_method, no_attention
from kdflow.students.loading import load_distilled
from kdflow.students.registry import StudentOutput
from kdflow.students.tokens import student_tokenizer
from kdflow.teachers.pseudo_heads import gold_distance
from kdflow.training.batching import batches, to_device, tokenize
from kdflow.training.loop import subset_indices
from kdflow.transfer.labelling import compute_signals
from kdflow.transfer.signals import SIGNALS, SignalCache, TeacherSignals

def load_method(run_dir: Path, report: dict, shapes: Shapes) -> Method:
    """The run's method with its trained parts (student pseudo classifiers, projections), in eval mode."""
    method = build_method(report["method"], shapes, report["method_options"])
    with TensorFile(Path(run_dir) / run_files.STUDENT_WEIGHTS) as saved:
        state = {k.removeprefix("method."): saved.get(k) for k in saved.keys() if k.startswith("method.")}
    method.load_state_dict(state)
    return method.eval()


def example_text(row) -> str:
    return row.text_a if pd.isna(row.text_b) else f"{row.text_a} [SEP] {row.text_b}"


@dataclass
class Recomputed:
    """A trained run's student and method, and its teacher's signals, on chosen examples of a split."""

    report: dict  # the run's metrics.json
    examples: pd.DataFrame  # the chosen rows of the split, in their original order
    labelled: bool
    regression: bool
    shapes: Shapes
    method: Method  # with its trained parts, in eval mode
    student: StudentOutput
    teacher: TeacherSignals


@torch.no_grad()
def recompute(run_dir: Path, teacher_dir: Path, heads_path: Path, data_dir: Path, n_examples: int | None,
              split: str = "dev", seed: int = 0, device="cpu", precision: Precision = FP32) -> Recomputed:
    """Rerun a trained student (``run_dir``) and its method on ``n_examples`` examples of ``split`` drawn with
    ``seed`` (the same examples for every run of the task; all of them if None or fewer), with the teacher side
    computed as it labelled the transfer set, both in ``precision``."""
    run_dir, teacher_dir, device = Path(run_dir), Path(teacher_dir), torch.device(device)
    report = json.loads((run_dir / run_files.METRICS).read_text())
    task = TaskData.load(data_dir)
    regression, labelled = task.meta["regression"], task.is_labelled(split)
    frame = task.split(split)
    examples = frame.iloc[subset_indices(len(frame), n_examples, seed)].reset_index(drop=True)

    teacher_length = read_training_record(teacher_dir / "model", "teacher")["hyperparameters"]["max_seq_length"]
    with tempfile.TemporaryDirectory() as scratch:
        signals = Path(scratch) / "teacher_signals.safetensors"
        compute_signals(examples, split, teacher_dir, heads_path, list(SIGNALS), teacher_length, len(examples), device,
                        signals, precision=precision)
        cache = SignalCache(signals, device, examples["idx"].to_numpy())
    teacher = cache[torch.arange(len(examples), device=device)]

    student = load_distilled(run_dir, teacher_dir, task.num_labels).to(device)
    tokenizer = AutoTokenizer.from_pretrained(teacher_dir / "model")
    encoded = tokenize(examples, student_tokenizer(student, tokenizer), report["hyperparameters"]["max_seq_length"],
                       labelled)
    batch = to_device(next(batches(encoded, len(examples), regression)), device)
    shapes = Shapes(layer_widths(student, batch), cache.teacher_layers, cache.teacher_width, task.num_labels,
                    regression, cache.example_shapes)
    method = load_method(run_dir, report, shapes).to(device)
    with precision.autocast():
        outputs = student(batch)
    return Recomputed(report, examples, labelled, regression, shapes, method, outputs, teacher)


@torch.no_grad()
def attention_weights(
    run_dir: Path, teacher_dir: Path, heads_path: Path, data_dir: Path, n_examples: int = 10,
    student_layer: int | None = None, split: str = "dev", seed: int = 0, device="cpu", precision: Precision = FP32,
) -> dict:
    """Attention of one student layer (1-based; default: the topmost that attends, i.e. the penultimate layer
    for Universal-KD(IL) and ALP as in Universal-KD Fig. 3; ALP-KD Fig. 3 draws the first) over the teacher's
    layers, for ``n_examples`` examples of ``split`` drawn with ``seed`` (the same examples for every run of the
    task), the models run in ``precision``.

    Returns JSON-serialisable data: ``method``, ``student`` (its spec), ``task``, ``split``, ``student_layer``,
    ``student_layers`` (its depth M), ``teacher_layers`` (1..N), per example ``idx``, ``texts``, ``labels``
    (None when unlabelled) and ``weights`` [n_examples, N] (rows sum to 1), and ``gold_distance`` [n_examples, N]:
    each teacher pseudo-head's distance to the gold label on the same examples (Universal-KD Fig. 3, left)."""
    method = json.loads((Path(run_dir) / run_files.METRICS).read_text())["method"]
    if method not in attentive_methods():
        raise no_attention(method)
    run = recompute(run_dir, teacher_dir, heads_path, data_dir, n_examples, split, seed, device, precision)
    with precision.autocast():
        weights, layers = run.method.layer_attention(run.student, run.teacher)
    weights = weights.float()

    chosen = layers[-1] if student_layer is None else student_layer
    if chosen not in layers:
        raise UserError(f"{method} attends from student layers {layers}, not {student_layer}")
    examples = run.examples
    labels = examples["label"].to_numpy() if run.labelled else None
    distance = gold_distance(run.teacher.head_logits.cpu().numpy(), labels, run.regression) if run.labelled else None
    return {
        "method": method,
        "student": run.report["student"],
        "task": run.report["task"],
        "split": split,
        "student_layer": chosen,
        "student_layers": run.shapes.student_layers,
        "teacher_layers": list(range(1, run.shapes.teacher_layers + 1)),
        "idx": examples["idx"].tolist(),
        "texts": [example_text(row) for row in examples.itertuples()],
        "labels": None if labels is None else labels.tolist(),
        "weights": weights[:, layers.index(chosen)].cpu().tolist(),
        "gold_distance": None if distance is None else distance.tolist(),
    }

"""Students' intermediate layers beside their teacher's: ALP-KD Fig. 4 (Passban et al. 2021, "Qualitative
Analysis").

The paper takes 100 random SST-2 examples and, for the 4-layer ALP and PKD students, the output of student layer 2
(Fig. 4a) and 3 (4b), "the output of the layer for the CLS token" (footnote 3), together with the teacher's layers
6 and 9, and draws "the first two principle components of representations". The three sets of vectors of a panel
are drawn in one plane, so kdflow fits one PCA jointly on all of them (teacher and students, centred on their
common mean): a separate fit per model would put each in coordinates of its own. Figs. 4c-4d give, per example,
the cosine distance (1 - cosine similarity) of each student's layer from the teacher's, e.g. about 0.20 for PKD
and 0.05 for ALP on example 20.

Student layers are taken in the teacher's space as the run's method compares them: through the method's trained
projection when the student is narrower (kdflow's PKD and ALP), as they are when it is as wide as the teacher (the
paper's BERT students). Both sides are recomputed as :func:`kdflow.analysis.attention_maps.recompute` does, the
teacher's layers in the float16 they were distilled from.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from kdflow.analysis.attention_maps import Recomputed, recompute
from kdflow.core.errors import UserError
from kdflow.core.precision import FP32, Precision


def principal_components(vectors: np.ndarray, k: int = 2) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """PCA of the rows of ``vectors`` [n, d] by SVD: their coordinates [n, k] on the first ``k`` components, the
    components [k, d] (unit rows) and the share of the total variance each explains [k]. Rows are centred on
    their mean. Each component is signed so that its largest-magnitude entry is positive (an SVD's signs are
    arbitrary; this makes the plane the same whatever the library)."""
    centred = vectors - vectors.mean(0)
    _, singular, components = np.linalg.svd(centred, full_matrices=False)
    components = components[:k]
    components *= np.sign(components[np.arange(len(components)), np.abs(components).argmax(1)])[:, None]
    variance = singular**2
    return centred @ components.T, components, variance[:k] / variance.sum()


def cosine_distance(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-wise ``1 - cos(a_i, b_i)``: 0 for the same direction, 1 for orthogonal, 2 for opposite."""
    return 1 - (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


def student_layer_output(run: Recomputed, layer: int) -> np.ndarray:
    """Student layer ``layer`` (1-based) [B, H_t] in the teacher's space: through the method's projection of
    that layer when it has one (hidden-space methods, layers 1..M-1)."""
    depth = run.shapes.student_layers
    if not 1 <= layer <= depth:
        raise UserError(f"student layer {layer} does not exist: {run.report['method']}'s student has {depth} layers")
    hidden = run.student.layers[layer - 1]
    projections = getattr(run.method, "to_teacher", [])
    if layer <= len(projections):
        hidden = projections[layer - 1](hidden)
    if hidden.shape[1] != run.shapes.teacher_width:
        raise UserError(f"student layer {layer} of {run.report['method']} is {hidden.shape[1]} wide, the teacher "
                        f"{run.shapes.teacher_width}, and the method has no projection for it")
    return hidden.double().cpu().numpy()


def panel(teacher: np.ndarray, students: Mapping[str, np.ndarray]) -> dict:
    """One panel of ALP-KD Fig. 4: the teacher layer's and each student layer's rows [n, d] projected on the
    first two principal components of all of them together, and each student row's cosine distance to the
    teacher row of the same example."""
    names = list(students)
    coordinates, _, explained = principal_components(np.concatenate([teacher, *students.values()]))
    parts = np.split(coordinates, len(names) + 1)
    distances = {name: cosine_distance(students[name], teacher) for name in names}
    return {
        "explained_variance_ratio": explained.tolist(),
        "teacher": {"pc": parts[0].tolist()},
        "students": {name: {"pc": part.tolist(), "cosine_distance": distances[name].tolist(),
                            "mean_cosine_distance": float(distances[name].mean())}
                     for name, part in zip(names, parts[1:])},
    }


@torch.no_grad()
def layer_outputs(runs: Mapping[str, Path], teacher_dir: Path, heads_path: Path, data_dir: Path,
                  layers: Sequence[Sequence[int]], n_examples: int = 100, split: str = "dev", seed: int = 0,
                  device="cpu", precision: Precision = FP32) -> dict:
    """ALP-KD Fig. 4 for the students ``runs`` (name -> run directory; students of one teacher and task) on
    ``n_examples`` examples of ``split`` drawn with ``seed``: one panel per (student layer, teacher layer) pair of
    ``layers`` (1-based; the paper's are (2, 6) and (3, 9)).

    Returns JSON-serialisable data: ``task``, ``split``, ``teacher_layers`` (N), ``idx`` and ``labels`` of the
    examples, ``models`` (per student: ``method``, ``student`` spec, ``student_layers``), and ``panels``, each with
    ``student_layer``, ``teacher_layer``, ``explained_variance_ratio`` of the two components, the teacher's ``pc``
    [n, 2], and per student ``pc`` [n, 2], ``cosine_distance`` [n] and its mean."""
    recomputed = {name: recompute(run_dir, teacher_dir, heads_path, data_dir, n_examples, split, seed, device, precision)
                  for name, run_dir in runs.items()}
    first = next(iter(recomputed.values()))
    teacher_layers = first.shapes.teacher_layers
    panels = []
    for student_layer, teacher_layer in layers:
        if not 1 <= teacher_layer <= teacher_layers:
            raise UserError(f"teacher layer {teacher_layer} does not exist: the teacher has {teacher_layers} layers")
        teacher = first.teacher.layers[:, teacher_layer - 1].double().cpu().numpy()
        students = {name: student_layer_output(run, student_layer) for name, run in recomputed.items()}
        panels.append({"student_layer": student_layer, "teacher_layer": teacher_layer, **panel(teacher, students)})
    return {
        "task": first.report["task"],
        "split": split,
        "teacher_layers": teacher_layers,
        "idx": first.examples["idx"].tolist(),
        "labels": first.examples["label"].tolist() if first.labelled else None,
        "models": {name: {"method": run.report["method"], "student": run.report["student"],
                          "student_layers": run.shapes.student_layers} for name, run in recomputed.items()},
        "panels": panels,
    }


def layer_outputs_table(data: Mapping) -> pd.DataFrame:
    """:func:`layer_outputs`' data as one row per panel, model and example: ``student_layer``, ``teacher_layer``,
    ``model`` (``teacher`` for the teacher's rows), ``method``, ``layer`` (the model's layer drawn), ``idx``,
    ``pc1``, ``pc2`` and ``cosine_distance`` (to the teacher's layer; empty for the teacher's rows)."""
    rows = []
    for entry in data["panels"]:
        drawn = [("teacher", "teacher", entry["teacher_layer"], entry["teacher"])]
        drawn += [(name, data["models"][name]["method"], entry["student_layer"], values)
                  for name, values in entry["students"].items()]
        for model, method, layer, values in drawn:
            distances = values.get("cosine_distance", [None] * len(data["idx"]))
            rows += [{"student_layer": entry["student_layer"], "teacher_layer": entry["teacher_layer"],
                      "model": model, "method": method, "layer": layer, "idx": idx, "pc1": pc[0], "pc2": pc[1],
                      "cosine_distance": distance}
                     for idx, pc, distance in zip(data["idx"], values["pc"], distances)]
    return pd.DataFrame(rows)

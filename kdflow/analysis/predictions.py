"""Prediction analysis of a teacher and its students (thesis §6.2, Tables 6.1-6.2, Fig. 6.5, Fig. C.2).

Everything works on the dev split of kdflow's ``predictions.parquet`` tables (see
:func:`kdflow.training.predictions.prediction_table`: columns ``split``, ``idx``, ``label``, ``prediction``, ``logits``), for
classification tasks only. The thesis's points of focus (Tab. 6.1) covered here:

* P1  per model, the k most and least confident hits and mistakes (:func:`extreme_examples`);
* P2/P3 per model, the average confidence overall, on hits and on mistakes (:func:`model_summary`; Fig. 6.6);
* P5  Pearson correlation of every pair of models' confidences with a two-sided p-value (Fig. 6.5;
  :func:`confidence_correlations`);
* P6  overlap of the mistakes (and hits) of every pair of models (Fig. C.2; :func:`overlaps`);
* P7  examples the teacher gets right and every student gets wrong (:func:`teacher_right_students_wrong`).

:func:`analyse` bundles all of it as JSON-serialisable data, :func:`analysis_document` renders it for reading.

Confidence (§6.2): the softmax probability of the predicted class, so it lies in [1/C, 1] for C classes.

Mistake overlap (P6): the thesis (Fig. C.2) reports, for models M1 (row) and M2 (column), the fraction of M1's
mistakes that M2 also makes, |M1 ∩ M2| / |M1| -- an asymmetric matrix (``fraction_of_row``). The symmetric
Jaccard index |M1 ∩ M2| / |M1 ∪ M2| and the overlap coefficient |M1 ∩ M2| / min(|M1|, |M2|) are given too.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.stats import pearsonr

from kdflow.core.documents import Block, Code, Document, Heading, Paragraph, Table
from kdflow.core.intermediates import read_parquet

REQUIRED_COLUMNS = ("split", "idx", "label", "prediction", "logits")
FIELDS = ("prediction", "confidence", "correct")
CATEGORIES = ("confident_hits", "unconfident_hits", "confident_mistakes", "unconfident_mistakes")


# --- confidence ----------------------------------------------------------------------------------------------


def stack_logits(logits) -> np.ndarray:
    """An (n, classes) float array from a 2-D array or a sequence of per-row arrays (a Parquet list column)."""
    if isinstance(logits, pd.Series):
        logits = logits.to_list()
    if isinstance(logits, np.ndarray) and logits.dtype != object:
        array = logits.astype(np.float64)
    else:
        rows = [np.asarray(row, dtype=np.float64).ravel() for row in logits]
        if len({len(row) for row in rows}) > 1:
            raise ValueError("logits rows have different numbers of classes")
        array = np.stack(rows) if rows else np.empty((0, 0))
    if array.ndim != 2:
        raise ValueError(f"logits must be 2-D (examples x classes), got shape {array.shape}")
    return array


def confidences(logits, predictions: Sequence[int] | np.ndarray | None = None) -> np.ndarray:
    """Softmax probability of the predicted class per example (thesis §6.2).

    ``predictions`` defaults to the argmax of the logits (as kdflow predicts), i.e. the largest probability.
    """
    array = stack_logits(logits)
    if array.shape[1] < 2:
        raise ValueError("confidence needs classification logits (at least 2 classes); regression has one output")
    shifted = array - array.max(axis=1, keepdims=True)  # numerically stable softmax
    probs = np.exp(shifted)
    probs /= probs.sum(axis=1, keepdims=True)
    pred = probs.argmax(axis=1) if predictions is None else np.asarray(predictions, dtype=np.int64)
    if len(pred) != len(array):
        raise ValueError(f"{len(pred)} predictions for {len(array)} rows of logits")
    return probs[np.arange(len(array)), pred]


# --- alignment -----------------------------------------------------------------------------------------------


def column(model: str, field: str) -> str:
    """Name of a per-model column of the aligned frame, e.g. ``column("lstm_s", "confidence")``."""
    return f"{model}:{field}"


def models_of(aligned: pd.DataFrame) -> list[str]:
    """The models of an aligned frame, in their original order."""
    suffix = ":prediction"
    return [name[: -len(suffix)] for name in aligned.columns if name.endswith(suffix)]


def load_predictions(paths: Mapping[str, str | Path]) -> dict[str, pd.DataFrame]:
    """Read ``{model name: predictions.parquet path}`` into ``{model name: table}``."""
    return {name: read_parquet(path) for name, path in paths.items()}


def align(tables: Mapping[str, pd.DataFrame], split: str = "dev") -> pd.DataFrame:
    """Join the ``split`` rows of several models' prediction tables on ``idx``.

    Returns one row per example, sorted by ``idx``, with ``idx``, ``label`` (gold) and per model the columns
    ``<model>:prediction``, ``<model>:confidence`` and ``<model>:correct`` (see :func:`column`). Raises
    ValueError when a table lacks columns, has no/duplicate/unlabelled rows in ``split``, or when models cover
    different examples or disagree on a gold label.
    """
    if not tables:
        raise ValueError("no prediction tables to align")
    aligned: pd.DataFrame | None = None
    reference = None
    for model, table in tables.items():
        if ":" in model:
            raise ValueError(f"model name {model!r} must not contain ':'")
        missing = [name for name in REQUIRED_COLUMNS if name not in table.columns]
        if missing:
            raise ValueError(f"prediction table of {model!r} lacks column(s) {missing}")
        rows = table[table["split"] == split]
        if rows.empty:
            raise ValueError(f"prediction table of {model!r} has no {split!r} rows")
        if rows["idx"].duplicated().any():
            raise ValueError(f"prediction table of {model!r} repeats idx values in split {split!r}")
        if rows["label"].isna().any():
            raise ValueError(f"split {split!r} of {model!r} has examples without a gold label")
        rows = rows.sort_values("idx", kind="stable")
        idx = rows["idx"].to_numpy(dtype=np.int64)
        gold = rows["label"].to_numpy()
        pred = rows["prediction"].to_numpy(dtype=np.int64)
        own = pd.DataFrame(
            {
                column(model, "prediction"): pred,
                column(model, "confidence"): confidences(rows["logits"], pred),
                column(model, "correct"): pred == gold,
            }
        )
        if aligned is None:
            reference = model
            aligned = pd.DataFrame({"idx": idx, "label": gold.astype(np.int64)})
        else:
            ref_idx = aligned["idx"].to_numpy()
            if len(idx) != len(ref_idx) or not np.array_equal(idx, ref_idx):
                only_ref = np.setdiff1d(ref_idx, idx)
                only_own = np.setdiff1d(idx, ref_idx)
                raise ValueError(
                    f"{model!r} and {reference!r} cover different {split!r} examples: "
                    f"{len(only_own)} idx only in {model!r} (e.g. {only_own[:5].tolist()}), "
                    f"{len(only_ref)} only in {reference!r} (e.g. {only_ref[:5].tolist()})"
                )
            disagree = gold.astype(np.int64) != aligned["label"].to_numpy()
            if disagree.any():
                raise ValueError(
                    f"{model!r} and {reference!r} disagree on the gold label of idx {idx[disagree][:5].tolist()}"
                )
        aligned = pd.concat([aligned, own], axis=1)
    return aligned


def attach_texts(aligned: pd.DataFrame, texts: pd.DataFrame) -> pd.DataFrame:
    """Add a ``text`` column from a dev-split frame with ``idx``, ``text_a`` and optionally ``text_b`` (pairs are
    shown as ``text_a [SEP] text_b``). Raises ValueError if columns or examples are missing."""
    missing = [name for name in ("idx", "text_a") if name not in texts.columns]
    if missing:
        raise ValueError(f"texts frame lacks column(s) {missing}")
    if texts["idx"].duplicated().any():
        raise ValueError("texts frame repeats idx values")
    by_idx = texts.set_index("idx")
    absent = np.setdiff1d(aligned["idx"].to_numpy(), by_idx.index.to_numpy())
    if len(absent):
        raise ValueError(f"texts frame lacks {len(absent)} examples, e.g. idx {absent[:5].tolist()}")
    rows = by_idx.loc[aligned["idx"].to_numpy()]
    text = rows["text_a"].astype(str).to_numpy()
    if "text_b" in rows.columns:
        second = rows["text_b"]
        text = np.array([a if pd.isna(b) else f"{a} [SEP] {b}" for a, b in zip(text, second)], dtype=object)
    out = aligned.copy()
    out["text"] = text
    return out


# --- per-model statistics (P1-P3) ----------------------------------------------------------------------------


def _mean(values: np.ndarray) -> float | None:
    return float(np.mean(values)) if len(values) else None


def model_summary(aligned: pd.DataFrame, model: str) -> dict:
    """Accuracy and average confidence overall (with its standard deviation, Fig. 6.6), on hits and on mistakes
    (P2/P3). An average over no examples is ``None``."""
    conf = aligned[column(model, "confidence")].to_numpy()
    correct = aligned[column(model, "correct")].to_numpy(dtype=bool)
    return {
        "n": int(len(conf)),
        "accuracy": float(correct.mean()),
        "n_hits": int(correct.sum()),
        "n_mistakes": int((~correct).sum()),
        "mean_confidence": _mean(conf),
        "std_confidence": float(np.std(conf)) if len(conf) else None,
        "mean_confidence_hits": _mean(conf[correct]),
        "mean_confidence_mistakes": _mean(conf[~correct]),
    }


def _record(row: pd.Series, models: Sequence[str], labels: Sequence[str] | None) -> dict:
    """One example as plain Python data: idx, gold, (text), and per model prediction and confidence."""

    def name(label: int):
        return labels[label] if labels is not None else label

    record = {"idx": int(row["idx"]), "gold": name(int(row["label"]))}
    if "text" in row.index:
        record["text"] = str(row["text"])
    for model in models:
        prefix = "" if len(models) == 1 else f"{model}:"
        record[prefix + "prediction"] = name(int(row[column(model, "prediction")]))
        record[prefix + "confidence"] = float(row[column(model, "confidence")])
    return record


def extreme_examples(aligned: pd.DataFrame, model: str, k: int = 10, labels: Sequence[str] | None = None) -> dict:
    """P1: the k most and least confident hits and mistakes of ``model`` (ties broken by ascending idx).

    Returns ``{category: [record, ...]}`` for the categories in :data:`CATEGORIES`; a record has ``idx``,
    ``gold``, ``text`` (if :func:`attach_texts` was applied), ``prediction`` and ``confidence``. With ``labels``
    (the task's label names) gold and prediction are names instead of ids.
    """
    if k < 0:
        raise ValueError("k must be non-negative")
    conf = aligned[column(model, "confidence")].to_numpy()
    correct = aligned[column(model, "correct")].to_numpy(dtype=bool)
    idx = aligned["idx"].to_numpy()
    result = {}
    for category in CATEGORIES:
        subset = np.flatnonzero(correct if category.endswith("hits") else ~correct)
        key = -conf[subset] if category.startswith("confident") else conf[subset]
        chosen = subset[np.lexsort((idx[subset], key))][:k]
        result[category] = [_record(aligned.iloc[i], [model], labels) for i in chosen]
    return result


# --- model differences (P5, P6) ------------------------------------------------------------------------------


def overlaps(aligned: pd.DataFrame, models: Sequence[str] | None = None, of: str = "mistakes") -> dict:
    """P6 / Fig. C.2: how much two models' mistakes (``of="mistakes"``) or hits (``of="hits"``) coincide.

    Returns matrices as nested dicts ``matrix[row model][column model]``:

    * ``count``: |A ∩ B| (the diagonal is |A|);
    * ``fraction_of_row``: |A ∩ B| / |A|, the fraction of the row model's mistakes the column model shares --
      what the thesis reports (Fig. C.2, "as a percentage of the total ... made by model M1"); asymmetric;
    * ``jaccard``: |A ∩ B| / |A ∪ B|;
    * ``overlap_coefficient``: |A ∩ B| / min(|A|, |B|).

    A fraction with a zero denominator is ``None``.
    """
    if of not in ("mistakes", "hits"):
        raise ValueError("of must be 'mistakes' or 'hits'")
    models = list(models or models_of(aligned))
    sets = {}
    for model in models:
        correct = aligned[column(model, "correct")].to_numpy(dtype=bool)
        sets[model] = ~correct if of == "mistakes" else correct

    def ratio(numerator: int, denominator: int) -> float | None:
        return numerator / denominator if denominator else None

    result = {name: {a: {} for a in models} for name in ("count", "fraction_of_row", "jaccard", "overlap_coefficient")}
    for a in models:
        for b in models:
            both = int(np.sum(sets[a] & sets[b]))
            size_a, size_b = int(sets[a].sum()), int(sets[b].sum())
            result["count"][a][b] = both
            result["fraction_of_row"][a][b] = ratio(both, size_a)
            result["jaccard"][a][b] = ratio(both, int(np.sum(sets[a] | sets[b])))
            result["overlap_coefficient"][a][b] = ratio(both, min(size_a, size_b))
    return result


def pearson_test(x, y) -> tuple[float | None, float | None]:
    """Pearson r of two samples and its two-sided p-value under H0: no correlation (the t test with n-2 degrees
    of freedom). r is ``None`` if either sample is constant (no correlation is defined), p is ``None`` for n < 3
    (no degree of freedom left)."""
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    if len(x) != len(y):
        raise ValueError(f"samples of different lengths ({len(x)} and {len(y)})")
    if len(x) < 2 or np.all(x == x[0]) or np.all(y == y[0]):
        return None, None
    result = pearsonr(x, y)
    return float(result.statistic), float(result.pvalue) if len(x) >= 3 else None


def confidence_correlations(aligned: pd.DataFrame, models: Sequence[str] | None = None) -> dict:
    """P5 / Fig. 6.5: Pearson r of every pair of models' confidences and its two-sided p-value, as nested dicts
    ``{"n": examples, "r": matrix, "p": matrix}``."""
    models = list(models or models_of(aligned))
    r_matrix = {a: {} for a in models}
    p_matrix = {a: {} for a in models}
    for i, a in enumerate(models):
        for b in models[i:]:
            r, p = pearson_test(aligned[column(a, "confidence")], aligned[column(b, "confidence")])
            r_matrix[a][b] = r_matrix[b][a] = r
            p_matrix[a][b] = p_matrix[b][a] = p
    return {"n": int(len(aligned)), "r": r_matrix, "p": p_matrix}


# --- knowledge distillation (P7) -----------------------------------------------------------------------------


def teacher_right_students_wrong(
    aligned: pd.DataFrame, teacher: str, students: Sequence[str], labels: Sequence[str] | None = None
) -> list[dict]:
    """P7: examples the teacher predicts correctly and every student incorrectly, most confident teacher first
    (ties by idx); each record holds every model's prediction and confidence. Empty when there are no students."""
    if not students:
        return []
    mask = aligned[column(teacher, "correct")].to_numpy(dtype=bool)
    for student in students:
        mask = mask & ~aligned[column(student, "correct")].to_numpy(dtype=bool)
    chosen = np.flatnonzero(mask)
    conf = aligned[column(teacher, "confidence")].to_numpy()
    chosen = chosen[np.lexsort((aligned["idx"].to_numpy()[chosen], -conf[chosen]))]
    return [_record(aligned.iloc[i], [teacher, *students], labels) for i in chosen]


# --- entry points --------------------------------------------------------------------------------------------


def analyse(
    tables: Mapping[str, pd.DataFrame],
    teacher: str | None = "teacher",
    texts: pd.DataFrame | None = None,
    k: int = 10,
    labels: Sequence[str] | None = None,
    split: str = "dev",
) -> dict:
    """The whole prediction analysis of §6.2 on the ``split`` rows of ``{model name: prediction table}``.

    ``teacher`` names the teacher among the tables (the others are its students; ``None``: no teacher, P7 is
    skipped); ``texts`` is an optional dev-split frame with ``idx``/``text_a``/``text_b`` to show sentences;
    ``labels`` optional label names. Returns JSON-serialisable data: ``models``, ``per_model`` (summary and
    ``examples`` per :data:`CATEGORIES`), ``mistake_overlap`` and ``hit_overlap`` (see :func:`overlaps`),
    ``confidence_correlation`` and ``teacher_right_students_wrong``.
    """
    if teacher is not None and teacher not in tables:
        raise ValueError(f"teacher {teacher!r} is not among the models {list(tables)}")
    aligned = align(tables, split)
    if texts is not None:
        aligned = attach_texts(aligned, texts)
    models = list(tables)
    students = [m for m in models if m != teacher]
    per_model = {}
    for model in models:
        per_model[model] = model_summary(aligned, model)
        per_model[model]["examples"] = extreme_examples(aligned, model, k, labels)
    return {
        "split": split,
        "n_examples": int(len(aligned)),
        "k": int(k),
        "models": models,
        "teacher": teacher,
        "students": students,
        "per_model": per_model,
        "mistake_overlap": overlaps(aligned, models, "mistakes"),
        "hit_overlap": overlaps(aligned, models, "hits"),
        "confidence_correlation": confidence_correlations(aligned, models),
        "teacher_right_students_wrong": (
            teacher_right_students_wrong(aligned, teacher, students, labels) if teacher is not None else None
        ),
    }


def _records_blocks(records: Sequence[dict]) -> list[Block]:
    return [Table(pd.DataFrame(records), digits=3)] if records else [Paragraph("(none)")]


def analysis_document(result: dict) -> Document:
    """Render :func:`analyse`'s result as a page for people."""
    models = result["models"]
    document = Document(f"Prediction analysis ({result['split']} split, {result['n_examples']} examples)")
    if result.get("teacher") is not None:
        students = []
        for student in result["students"]:
            students += [", ", Code(student)] if students else [Code(student)]
        document.blocks.append(Paragraph(["Teacher: ", Code(result["teacher"]), "; students: ", *students, "."]))

    keys = ["n", "accuracy", "n_hits", "n_mistakes", "mean_confidence", "std_confidence",
            "mean_confidence_hits", "mean_confidence_mistakes"]
    summary = pd.DataFrame([{"model": m, **{key: result["per_model"][m][key] for key in keys}} for m in models])
    document.blocks += [Heading("Accuracy and confidence (thesis §6.2, P2/P3, Fig. 6.6)"), Table(summary, digits=3)]

    for of in ("mistake", "hit"):
        overlap = result[f"{of}_overlap"]
        rows = []
        for a in models:
            cells = [a]
            for b in models:
                fraction = overlap["fraction_of_row"][a][b]
                cells.append(f"{overlap['count'][a][b]} ({'—' if fraction is None else f'{100 * fraction:.1f}%'})")
            rows.append(cells)
        jaccard = [[a, *(overlap["jaccard"][a][b] for b in models)] for a in models]
        document.blocks += [
            Heading(f"Overlap of {of}s (P6, Fig. C.2)"),
            Paragraph(f"Cell = |row ∩ column| {of}s (fraction of the row model's {of}s shared by the column model)."),
            Table(pd.DataFrame(rows, columns=["row \\ column", *models])),
            Paragraph("Jaccard index |A ∩ B| / |A ∪ B|:"),
            Table(pd.DataFrame(jaccard, columns=["", *models]), digits=3),
        ]

    correlation = result["confidence_correlation"]
    rows = []
    for a in models:
        cells = [a]
        for b in models:
            r, p = correlation["r"][a][b], correlation["p"][a][b]
            if a == b:
                cells.append("1")
            elif r is None:
                cells.append("—")
            else:
                star = "*" if p is not None and p < 0.05 else ""
                cells.append(f"{r:.3f}{star} (p={'—' if p is None else f'{p:.3g}'})")
        rows.append(cells)
    document.blocks += [
        Heading("Correlation of confidences (P5, Fig. 6.5)"),
        Paragraph(f"Pearson r (two-sided p) over {correlation['n']} examples; * marks p < 0.05."),
        Table(pd.DataFrame(rows, columns=["", *models])),
    ]

    document.blocks.append(Heading(f"Most and least confident hits and mistakes (P1, k = {result['k']})"))
    for model in models:
        for category in CATEGORIES:
            document.blocks.append(Heading([Code(model), f": {category.replace('_', ' ')}"], level=3))
            document.blocks += _records_blocks(result["per_model"][model]["examples"][category])

    if result.get("teacher_right_students_wrong") is not None:
        records = result["teacher_right_students_wrong"]
        document.blocks.append(Heading(f"Teacher right, every student wrong (P7): {len(records)} examples"))
        document.blocks += _records_blocks(records)
    return document

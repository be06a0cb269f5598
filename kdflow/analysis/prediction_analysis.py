"""Prediction analysis of a teacher and its students (thesis §6.2, Tables 6.1-6.2, Fig. 6.5, Fig. C.2).

Everything works on the dev split of kdflow's ``predictions.parquet`` tables (see
:func:`kdflow.training.predictions.prediction_table`: columns ``split``, ``idx``, ``label``, ``prediction``, ``logits``), for
classification tasks only. The thesis's points of focus (Tab. 6.1) covered here:

* P1  per model, the k most and least confident hits and mistakes (:func:`extreme_examples`);
* P2/P3 per model, the average confidence overall, on hits and on mistakes, with standard deviations
  (:func:`model_summary`; Fig. 6.6's numbers: :func:`average_confidence_table`);
* P4  k random examples (seed 42) the teacher gets right and exactly one student gets right
  (:func:`one_student_right`);
* P5  the k examples with the largest and the smallest conf(student 1) - conf(student 2) (:func:`confidence_gap`;
  the thesis's BERT_S - LSTM_S), and the Pearson correlation of every pair of models' confidences with a
  two-sided p-value (Fig. 6.5; :func:`confidence_correlations`);
* P6  overlap of the mistakes (and hits) of every pair of models (Fig. C.2; :func:`overlaps`);
* P7  examples the teacher gets right and every student gets wrong (:func:`teacher_right_students_wrong`);
* P8  the k examples with the largest mean over students of (teacher confidence - student confidence)
  (:func:`teacher_confidence_gap`).

:func:`analyse` bundles all of it as JSON-serialisable data, :func:`analysis_document` renders it for reading.

Confidence (§6.2): the softmax probability of the predicted class, so it lies in [1/C, 1] for C classes.

How the thesis's analysis picked its examples (facts from its code, samsucik/knowledge-distil-bert): P4's random
draw takes the candidates sorted by gold label and shuffles them with seed 42 (scikit-learn's ``shuffle``, i.e.
``numpy.random.RandomState(42).permutation``), keeping the first k; the confidence gaps of P5 and P8 are
differences of confidences rounded to 2 decimals. kdflow does the same (:func:`random_pick`, :data:`GAP_DECIMALS`)
and breaks the ties that rounding makes by ascending idx. (P7's 15 examples were drawn the same way; kdflow lists
them all, most confident teacher first.) The standard deviations of Fig. 6.6 are sample standard deviations
(pandas' ``std``, n - 1 in the denominator).

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

from kdflow.core.documents import Block, Code, Document, Emphasis, Heading, Paragraph, Table
from kdflow.core.intermediates import read_parquet

REQUIRED_COLUMNS = ("split", "idx", "label", "prediction", "logits")
FIELDS = ("prediction", "confidence", "correct")
CATEGORIES = ("confident_hits", "unconfident_hits", "confident_mistakes", "unconfident_mistakes")
SUBSETS = ("all", "hits", "mistakes")  # Fig. 6.6's three bars per model
GAP_DECIMALS = 2  # P5 and P8 compare confidences rounded to 2 decimals, as the thesis's analysis did
SEED = 42  # the thesis's random draw of P4
# What the thesis observed (Table 6.2), shown beside kdflow's examples for comparison.
THESIS_OBSERVATIONS = {
    "P2": "On average, models are more confident on hits than on mistakes (see Fig. 6.6).",
    "P3": "On average, BERT_T is slightly more confident than either student (may be due to scoring more of the "
          "confident hits, especially on CoLA) (see Fig. 6.6).",
    "P4": "All examples are long and difficult, BERT_T is unconfident as well as one or both students (not "
          "necessarily the incorrect one). On Sara, several examples where BERT_T better understands meaning and is "
          "not mislead by keywords, but one student is.",
    "P5": "All the examples are difficult, with all models often unconfident or even mistaken. On SST-2, the LSTM_S "
          "is unconfident often when the teacher is unconfident (the same correlation is not observed for BERT_S). "
          "Fig. 6.5 quantitatively confirms this and shows moderate correlation between all model pairs' confidences "
          "on Sara (and mostly weak correlation on other downstream tasks).",
    "P7": "Very difficult examples; classified unconfidently (and mostly incorrectly) by both students, and mostly "
          "correctly by BERT_T. Overall, they demonstrate the teacher's superiority on challenging sentences, e.g. "
          "recognising bill's story about sue and max's about kathy both amazed me. as acceptable (CoLA) or you live "
          "around here? as ask_wherefrom (Sara).",
    "P8": "Similar to P7; complicated examples that require understanding of semantics (CoLA, Sara) and of mild "
          "sentiment possibly expressed in metaphors (SST-2), e.g. my heart is pounding me (CoLA, unacceptable), "
          "fuck yeah! (Sara, affirm; misclassified by both students as handleinsult).",
}


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


def _std(values: np.ndarray) -> float | None:
    """Sample standard deviation (n - 1 in the denominator, as pandas' ``std`` the thesis used); None below 2 values."""
    return float(np.std(values, ddof=1)) if len(values) > 1 else None


def model_summary(aligned: pd.DataFrame, model: str) -> dict:
    """Accuracy and average confidence overall, on hits and on mistakes (P2/P3), each with its sample standard
    deviation (Fig. 6.6's error bars). An average over no examples is ``None``, a deviation over fewer than two."""
    conf = aligned[column(model, "confidence")].to_numpy()
    correct = aligned[column(model, "correct")].to_numpy(dtype=bool)
    summary = {
        "n": int(len(conf)),
        "accuracy": float(correct.mean()),
        "n_hits": int(correct.sum()),
        "n_mistakes": int((~correct).sum()),
    }
    for subset, values in zip(SUBSETS, (conf, conf[correct], conf[~correct])):
        suffix = "" if subset == "all" else f"_{subset}"
        summary[f"mean_confidence{suffix}"] = _mean(values)
        summary[f"std_confidence{suffix}"] = _std(values)
    return summary


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


def random_pick(aligned: pd.DataFrame, candidates: np.ndarray, k: int, seed: int = SEED) -> np.ndarray:
    """Up to ``k`` of the ``candidates`` (row positions of ``aligned``) drawn at random as the thesis drew its
    examples: the candidates sorted by gold label (then idx), shuffled by ``numpy.random.RandomState(seed)`` --
    what scikit-learn's ``shuffle(..., random_state=seed, n_samples=k)`` does -- and the first ``k`` kept, in the
    order drawn. The same candidates and seed always give the same draw."""
    if k < 0:
        raise ValueError("k must be non-negative")
    candidates = np.asarray(candidates, dtype=np.int64)
    order = candidates[np.lexsort((aligned["idx"].to_numpy()[candidates], aligned["label"].to_numpy()[candidates]))]
    return order[np.random.RandomState(seed).permutation(len(order))[:k]]


def one_student_right(
    aligned: pd.DataFrame, teacher: str, students: Sequence[str], k: int = 10, seed: int = SEED,
    labels: Sequence[str] | None = None,
) -> dict:
    """P4: ``k`` random examples (:func:`random_pick`, seed 42 as the thesis) that the teacher predicts correctly
    and exactly one of the students correctly -- with the thesis's two students, one right and the other wrong.

    Returns ``{"seed", "candidates": how many examples qualify, "examples": records}``; a record holds every
    model's prediction and confidence and ``right_student``, the student that is right."""
    if len(students) < 2:
        raise ValueError("P4 needs at least two students")
    right = np.stack([aligned[column(student, "correct")].to_numpy(dtype=bool) for student in students])
    candidates = np.flatnonzero(aligned[column(teacher, "correct")].to_numpy(dtype=bool) & (right.sum(axis=0) == 1))
    records = []
    for i in random_pick(aligned, candidates, k, seed):
        record = _record(aligned.iloc[i], [teacher, *students], labels)
        record["right_student"] = students[int(np.argmax(right[:, i]))]
        records.append(record)
    return {"seed": int(seed), "candidates": int(len(candidates)), "examples": records}


def rounded_confidence(aligned: pd.DataFrame, model: str) -> np.ndarray:
    """A model's confidences rounded to :data:`GAP_DECIMALS` decimals, as P5 and P8 compare them."""
    return np.round(aligned[column(model, "confidence")].to_numpy(), GAP_DECIMALS)


def _by_gap(aligned: pd.DataFrame, gap: np.ndarray, models: Sequence[str], k: int, largest: bool,
            labels: Sequence[str] | None) -> list[dict]:
    """The ``k`` records with the largest (or smallest) ``gap``, ties by ascending idx, each with its ``gap``."""
    gap = np.round(gap, 10)  # differences of rounded numbers carry float noise (0.7 - 0.6); equal gaps must tie
    chosen = np.lexsort((aligned["idx"].to_numpy(), -gap if largest else gap))[:k]
    return [{**_record(aligned.iloc[i], models, labels), "gap": float(gap[i])} for i in chosen]


def confidence_gap(
    aligned: pd.DataFrame, first: str, second: str, k: int = 10, models: Sequence[str] | None = None,
    labels: Sequence[str] | None = None,
) -> dict:
    """P5's examples: the ``k`` examples with the largest ``gap`` = conf(first) - conf(second) (``first`` confident,
    ``second`` not) and the ``k`` with the smallest (the other way round), on confidences rounded to 2 decimals,
    ties by idx. The thesis's first and second are BERT_S and LSTM_S. Records hold the prediction and confidence
    of each of ``models`` (default: all) and the ``gap``."""
    if k < 0:
        raise ValueError("k must be non-negative")
    models = list(models or models_of(aligned))
    gap = rounded_confidence(aligned, first) - rounded_confidence(aligned, second)
    return {"first": first, "second": second,
            "largest": _by_gap(aligned, gap, models, k, True, labels),
            "smallest": _by_gap(aligned, gap, models, k, False, labels)}


# --- knowledge distillation (P7, P8) -------------------------------------------------------------------------


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


def teacher_confidence_gap(
    aligned: pd.DataFrame, teacher: str, students: Sequence[str], k: int = 10, labels: Sequence[str] | None = None
) -> list[dict]:
    """P8: the ``k`` examples with the largest ``gap`` = mean over students of (teacher confidence - student
    confidence), on confidences rounded to 2 decimals, ties by idx: the teacher confident, the students not. Each
    record holds every model's prediction and confidence and the ``gap``."""
    if not students:
        raise ValueError("P8 needs at least one student")
    if k < 0:
        raise ValueError("k must be non-negative")
    teacher_confidence = rounded_confidence(aligned, teacher)
    gap = np.mean([teacher_confidence - rounded_confidence(aligned, student) for student in students], axis=0)
    return _by_gap(aligned, gap, [teacher, *students], k, True, labels)


# --- entry points --------------------------------------------------------------------------------------------


def analyse(
    tables: Mapping[str, pd.DataFrame],
    teacher: str | None = "teacher",
    texts: pd.DataFrame | None = None,
    k: int = 10,
    labels: Sequence[str] | None = None,
    split: str = "dev",
    seed: int = SEED,
) -> dict:
    """The whole prediction analysis of §6.2 on the ``split`` rows of ``{model name: prediction table}``.

    ``teacher`` names the teacher among the tables (the others are its students, in order; ``None``: no teacher,
    P4, P7 and P8 are skipped); ``texts`` is an optional dev-split frame with ``idx``/``text_a``/``text_b`` to show
    sentences; ``labels`` optional label names; ``k`` the number of examples each selection shows and ``seed`` P4's
    random draw. Returns JSON-serialisable data: ``models``, ``per_model`` (summary and ``examples`` per
    :data:`CATEGORIES`), ``mistake_overlap`` and ``hit_overlap`` (see :func:`overlaps`), ``confidence_correlation``,
    ``one_student_right`` (P4; ``None`` with fewer than two students), ``confidence_gap`` (P5, of the first two
    students; ``None`` with fewer), ``teacher_right_students_wrong`` (P7) and ``teacher_confidence_gap`` (P8).
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
    with_teacher = teacher is not None and bool(students)
    pair = len(students) >= 2
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
        "one_student_right": (
            one_student_right(aligned, teacher, students, k, seed, labels) if with_teacher and pair else None
        ),
        "confidence_gap": confidence_gap(aligned, students[0], students[1], k, models, labels) if pair else None,
        "teacher_right_students_wrong": (
            teacher_right_students_wrong(aligned, teacher, students, labels) if teacher is not None else None
        ),
        "teacher_confidence_gap": (
            teacher_confidence_gap(aligned, teacher, students, k, labels) if with_teacher else None
        ),
    }


def average_confidence_table(analysis: Mapping) -> pd.DataFrame:
    """Thesis Fig. 6.6's numbers: per model (in the analysis's order) and subset of the dev examples (``all``,
    ``hits``, ``mistakes``), how many examples, the mean confidence and its sample standard deviation (NaN where
    undefined: no mistakes, or a single one). ``analysis``: :func:`analyse`'s result (as JSON)."""
    rows = []
    for model in analysis["models"]:
        summary = analysis["per_model"][model]
        sizes = {"all": summary["n"], "hits": summary["n_hits"], "mistakes": summary["n_mistakes"]}
        for subset in SUBSETS:
            suffix = "" if subset == "all" else f"_{subset}"
            mean, std = summary[f"mean_confidence{suffix}"], summary[f"std_confidence{suffix}"]
            rows.append({"model": model, "subset": subset, "n": sizes[subset],
                         "mean_confidence": np.nan if mean is None else mean,
                         "std_confidence": np.nan if std is None else std})
    return pd.DataFrame(rows)


def _records_blocks(records: Sequence[dict]) -> list[Block]:
    return [Table(pd.DataFrame(records), digits=3)] if records else [Paragraph("(none)")]


def _thesis(*points: str) -> Paragraph:
    return Paragraph(["Thesis (Table 6.2): ", Emphasis(" ".join(THESIS_OBSERVATIONS[point] for point in points))])


def analysis_document(result: dict) -> Document:
    """Render :func:`analyse`'s result as a page for people, each selection beside what the thesis observed."""
    models = result["models"]
    document = Document(f"Prediction analysis ({result['split']} split, {result['n_examples']} examples)")
    if result.get("teacher") is not None:
        students = []
        for student in result["students"]:
            students += [", ", Code(student)] if students else [Code(student)]
        document.blocks.append(Paragraph(["Teacher: ", Code(result["teacher"]), "; students: ", *students, "."]))

    def mean_std(summary: dict, suffix: str) -> str:
        mean, std = summary[f"mean_confidence{suffix}"], summary[f"std_confidence{suffix}"]
        return "—" if mean is None else f"{mean:.3f}" + ("" if std is None else f" ± {std:.3f}")

    rows = []
    for model in models:
        own = result["per_model"][model]
        rows.append({"model": model, **{key: own[key] for key in ("n", "accuracy", "n_hits", "n_mistakes")},
                     **{f"confidence ({subset})": mean_std(own, "" if subset == "all" else f"_{subset}")
                        for subset in SUBSETS}})
    summary = pd.DataFrame(rows)
    document.blocks += [
        Heading("Accuracy and confidence (thesis §6.2, P2/P3, Fig. 6.6)"),
        Paragraph("Confidence: mean ± sample standard deviation on all examples, on hits and on mistakes."),
        Table(summary, digits=3),
        _thesis("P2", "P3"),
    ]

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
    if result.get("confidence_gap") is not None:
        gap = result["confidence_gap"]
        first, second = Code(gap["first"]), Code(gap["second"])
        document.blocks += [
            Heading("Confident student, unconfident student (P5)"),
            Paragraph(["gap = conf(", first, ") − conf(", second, ") on confidences rounded to 2 decimals (the "
                       "thesis: conf(BERT_S) − conf(LSTM_S)); the examples with the largest gap, then the smallest."]),
            Heading(["Largest gap: ", first, " confident, ", second, " not"], level=3),
            *_records_blocks(gap["largest"]),
            Heading(["Smallest gap: ", second, " confident, ", first, " not"], level=3),
            *_records_blocks(gap["smallest"]),
            _thesis("P5"),
        ]

    document.blocks.append(Heading(f"Most and least confident hits and mistakes (P1, k = {result['k']})"))
    for model in models:
        for category in CATEGORIES:
            document.blocks.append(Heading([Code(model), f": {category.replace('_', ' ')}"], level=3))
            document.blocks += _records_blocks(result["per_model"][model]["examples"][category])

    if result.get("one_student_right") is not None:
        drawn = result["one_student_right"]
        document.blocks += [
            Heading(f"Teacher right, exactly one student right (P4): {len(drawn['examples'])} random of "
                    f"{drawn['candidates']} examples"),
            Paragraph(f"Drawn with seed {drawn['seed']}, as the thesis drew its 10; right_student is the student that "
                      "is right."),
            *_records_blocks(drawn["examples"]),
            _thesis("P4"),
        ]
    if result.get("teacher_right_students_wrong") is not None:
        records = result["teacher_right_students_wrong"]
        document.blocks.append(Heading(f"Teacher right, every student wrong (P7): {len(records)} examples"))
        document.blocks += [*_records_blocks(records), _thesis("P7")]
    if result.get("teacher_confidence_gap") is not None:
        document.blocks += [
            Heading("Confident teacher, unconfident students (P8)"),
            Paragraph("gap = mean over the students of (teacher confidence − student confidence), confidences rounded "
                      f"to 2 decimals; the {len(result['teacher_confidence_gap'])} examples with the largest gap."),
            *_records_blocks(result["teacher_confidence_gap"]),
            _thesis("P8"),
        ]
    return document

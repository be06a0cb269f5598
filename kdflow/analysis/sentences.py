"""Sentences a user supplies, classified by several models of one task (thesis Tables 6.3 and C.1).

The thesis let its teacher and both students classify 21 CoLA dev sentences that the teacher got right and a
student wrong, each followed by the author's perturbed, hand-labelled variants (Table C.1, 70 sentences), and shows
7 of them with each model's prediction and confidence (Table 6.3). kdflow reads such a list from a *sentence file*
and gives every model's prediction and confidence (softmax probability of the predicted class, as in §6.2) per
sentence, beside the predictions and confidences the file reports (the thesis's) where it reports them.

A sentence file is tab-separated UTF-8 text (a byte-order mark is ignored) with a header line, one sentence per
line, no quoting; blank lines are skipped. Its columns, in any order:

* ``sentence`` (required): the text, read as the task's first sentence;
* ``label``: the gold label, a label id (``0``, ``1``, ...) or a label name of the task (CoLA: 0 = unacceptable,
  1 = acceptable); empty where unknown;
* ``group``: sentences sharing a group are variants of one original; ``original``: ``1`` marks that original
  (Table C.1's "O"), ``0`` or empty a variant;
* ``<name>_prediction`` and ``<name>_confidence``, in pairs: the prediction (label id or name) and confidence in
  [0, 1] that a reference reports for its model ``<name>``, both empty where it reports nothing.

``reference/thesis_table_c1_sentences.tsv`` is Table C.1 with Table 6.3's reported predictions as ``bert_t``,
``bert_s`` and ``lstm_s`` (the thesis's BERT_T, BERT_S and LSTM_S).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from kdflow.analysis.prediction_analysis import confidences
from kdflow.core.documents import Code, Document, Heading, Paragraph, Table
from kdflow.core.errors import UserError
from kdflow.core.precision import FP32, Precision
from kdflow.distillation.named_models import LoadedModel
from kdflow.training.batching import batches, tokenize
from kdflow.training.loop import predict

COLUMNS = ("group", "original", "label", "sentence")
REPORTED = re.compile(r"^([a-z0-9_]+)_(prediction|confidence)$")
MAX_LENGTH = 128  # the thesis's maximum sequence length


class SentenceFileError(UserError, ValueError):
    """A sentence file that cannot be read; the message names the file and, where it applies, the line."""


@dataclass
class Sentences:
    """A sentence file as data: ``frame`` has ``group`` (str or None), ``original`` (bool), ``label`` (label id,
    nullable Int64), ``sentence`` and, per reported model, ``<name>_prediction`` (label id, nullable Int64) and
    ``<name>_confidence`` (float or NaN); ``reported`` names the reported models in file order."""

    frame: pd.DataFrame
    reported: list[str]


def _label_id(raw: str, labels: Sequence[str]) -> int:
    if raw in labels:
        return labels.index(raw)
    if raw.isdigit() and int(raw) < len(labels):
        return int(raw)
    raise ValueError(f"{raw!r} is neither a label id (0-{len(labels) - 1}) nor a label name of the task "
                     f"({', '.join(labels)})")


def read_sentences(path: str | Path, labels: Sequence[str]) -> Sentences:
    """Read a sentence file (see the module docstring) for a task with label names ``labels``; raises
    :class:`SentenceFileError` naming the file, the line and what is wrong."""
    path, labels = Path(path), list(labels)
    lines = path.read_text(encoding="utf-8-sig").splitlines()
    if not lines or not lines[0].strip():
        raise SentenceFileError(f"{path}:1: no header line (expected columns such as 'sentence' and 'label')")
    header = lines[0].split("\t")
    reported = []
    for name in header:
        match = REPORTED.match(name)
        if name not in COLUMNS and not match:
            raise SentenceFileError(f"{path}:1: unknown column {name!r}; expected {', '.join(COLUMNS)} and "
                                    "<model>_prediction/<model>_confidence pairs")
        if match and match[1] not in reported:
            reported.append(match[1])
    if len(set(header)) < len(header):
        raise SentenceFileError(f"{path}:1: repeated column(s) {sorted({n for n in header if header.count(n) > 1})}")
    if "sentence" not in header:
        raise SentenceFileError(f"{path}:1: no 'sentence' column (columns: {', '.join(header)})")
    for name in reported:
        for kind in ("prediction", "confidence"):
            if f"{name}_{kind}" not in header:
                other = "confidence" if kind == "prediction" else "prediction"
                raise SentenceFileError(f"{path}:1: column '{name}_{other}' without '{name}_{kind}'")
    rows = []
    for number, line in enumerate(lines[1:], start=2):
        if not line.strip():
            continue
        fields = line.split("\t")
        if len(fields) != len(header):
            raise SentenceFileError(
                f"{path}:{number}: expected {len(header)} tab-separated fields, found {len(fields)}"
            )
        raw = dict(zip(header, fields))
        try:
            rows.append(_row(raw, reported, labels))
        except ValueError as error:
            raise SentenceFileError(f"{path}:{number}: {error}") from None
    if not rows:
        raise SentenceFileError(f"{path}: no sentences")
    columns = [*COLUMNS, *(f"{name}_{kind}" for name in reported for kind in ("prediction", "confidence"))]
    frame = pd.DataFrame(rows, columns=columns)
    for column in ["label", *(f"{name}_prediction" for name in reported)]:
        frame[column] = frame[column].astype("Int64")  # label ids, <NA> where none is given
    return Sentences(frame, reported)


def _row(raw: dict[str, str], reported: Sequence[str], labels: Sequence[str]) -> dict:
    sentence = raw["sentence"].strip()
    if not sentence:
        raise ValueError("empty sentence")
    original = raw.get("original", "").strip()
    if original not in ("", "0", "1"):
        raise ValueError(f"original must be 1, 0 or empty, not {original!r}")
    label = raw.get("label", "").strip()
    try:
        row = {"group": raw.get("group", "").strip() or None, "original": original == "1", "sentence": sentence,
               "label": _label_id(label, labels) if label else None}
    except ValueError as error:
        raise ValueError(f"label {error}") from None
    for name in reported:
        prediction, confidence = raw[f"{name}_prediction"].strip(), raw[f"{name}_confidence"].strip()
        if bool(prediction) != bool(confidence):
            raise ValueError(f"{name}_prediction and {name}_confidence must both be given or both be empty")
        if prediction:
            try:
                row[f"{name}_prediction"] = _label_id(prediction, labels)
            except ValueError as error:
                raise ValueError(f"{name}_prediction {error}") from None
            try:
                value = float(confidence)
            except ValueError:
                value = np.nan
            if not 0 <= value <= 1:
                raise ValueError(f"{name}_confidence {confidence!r} is not a probability in [0, 1]")
            row[f"{name}_confidence"] = value
        else:
            row[f"{name}_prediction"], row[f"{name}_confidence"] = None, np.nan
    return row


def classify(model: LoadedModel, sentences: Sequence[str], device: torch.device, precision: Precision = FP32,
             batch_size: int = 64) -> np.ndarray:
    """A model's logits ``[n, classes]`` on ``sentences`` (each read as a single sentence, cut at 128 tokens),
    computed in ``precision``."""
    frame = pd.DataFrame({"text_a": list(sentences), "text_b": None})
    encoded = tokenize(frame, model.tokenizer, MAX_LENGTH, labelled=False)
    model.module.to(device)
    return predict(model.logits, batches(encoded, batch_size, regression=False), device, precision)


def sentence_table(sentences: Sentences, logits: Mapping[str, np.ndarray], labels: Sequence[str],
                   reported: Mapping[str, str] | None = None) -> pd.DataFrame:
    """One row per sentence: ``group``, ``original``, ``sentence``, ``label`` (name), then per model (in the order of
    ``logits``) ``<model>:prediction`` (label name) and ``<model>:confidence``, each followed by the reported
    model's ``reported:<name>:prediction`` and ``reported:<name>:confidence`` that ``reported`` maps it to
    (``{model: reported name}``); reported models no model is mapped to come last."""
    reported = dict(reported or {})
    unknown = sorted(set(reported.values()) - set(sentences.reported))
    if unknown:
        raise SentenceFileError(f"the sentence file reports no predictions of {unknown} (it has: "
                                f"{', '.join(sentences.reported) or 'none'})")
    frame = sentences.frame

    def names(ids: pd.Series) -> list:
        return [None if pd.isna(i) else labels[int(i)] for i in ids]

    table = pd.DataFrame({"group": frame["group"], "original": frame["original"], "sentence": frame["sentence"],
                          "label": names(frame["label"])})

    def add_reported(name: str) -> None:
        table[f"reported:{name}:prediction"] = names(frame[f"{name}_prediction"])
        table[f"reported:{name}:confidence"] = frame[f"{name}_confidence"].astype(float)

    for model, values in logits.items():
        if len(values) != len(frame):
            raise ValueError(f"{len(values)} rows of logits of {model!r} for {len(frame)} sentences")
        predictions = np.asarray(values).argmax(axis=1)
        table[f"{model}:prediction"] = [labels[i] for i in predictions]
        table[f"{model}:confidence"] = confidences(values, predictions)
        if model in reported:
            add_reported(reported[model])
    for name in sentences.reported:
        if name not in reported.values():
            add_reported(name)
    return table


def sentence_summary(table: pd.DataFrame, models: Sequence[str], reported: Mapping[str, str] | None = None
                     ) -> pd.DataFrame:
    """Per model: how many sentences it classified, how many of the labelled ones it gets right, and, where it is
    mapped to a reported model, on how many sentences that model's reported prediction is given, how many of
    those predictions it shares and the mean absolute difference of their confidences."""
    reported = dict(reported or {})
    labelled = table["label"].notna()
    rows = []
    for model in models:
        prediction = table[f"{model}:prediction"]
        row = {"model": model, "sentences": len(table), "labelled": int(labelled.sum()),
               "correct": int((prediction[labelled] == table.loc[labelled, "label"]).sum()),
               "reported_model": reported.get(model), "compared": 0, "same_prediction": None,
               "mean_abs_confidence_difference": None}
        if model in reported:
            other = f"reported:{reported[model]}"
            given = table[f"{other}:prediction"].notna()
            row["compared"] = int(given.sum())
            if given.any():
                row["same_prediction"] = int((prediction[given] == table.loc[given, f"{other}:prediction"]).sum())
                difference = table.loc[given, f"{model}:confidence"] - table.loc[given, f"{other}:confidence"]
                row["mean_abs_confidence_difference"] = float(difference.abs().mean())
        rows.append(row)
    return pd.DataFrame(rows)


def sentence_document(table: pd.DataFrame, summary: pd.DataFrame, task: str, source: str) -> Document:
    """The page of a sentence list: the summary, then per sentence the gold label and every model's prediction and
    confidence (as ``label 0.97``), each reported prediction beside the model it is mapped to."""
    document = Document(f"Sentences classified by every model: {task} (thesis Tables 6.3 and C.1)")
    document.blocks += [
        Paragraph(["Sentences from ", Code(source), "; confidence = softmax probability of the predicted class. "
                   "'reported:' columns are the predictions and confidences the sentence file gives (for the "
                   "thesis's list: Table 6.3's BERT_T, BERT_S and LSTM_S)."]),
        Heading("Summary"),
        Table(summary, digits=3),
    ]
    shown = pd.DataFrame({"group": table["group"], "O": np.where(table["original"], "O", ""),
                          "sentence": table["sentence"], "label": table["label"]})
    for column in table.columns:
        if column.endswith(":prediction"):
            name = column[: -len(":prediction")]
            confidence = table[f"{name}:confidence"]
            shown[name] = [None if pd.isna(p) else f"{p} {c:.2f}" for p, c in zip(table[column], confidence)]
    document.blocks += [Heading("Predictions (label and confidence)"), Table(shown)]
    return document

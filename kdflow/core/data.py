"""Data ingestion: raw GLUE / Sara files (or the Hugging Face hub) to one normalised schema.

Every split of every task becomes a Parquet table with the columns

    idx     int64    the example's id in its source split (GLUE's ``index`` column, else its row number)
    text_a  string   first (or only) sentence
    text_b  string   second sentence of a pair, null for single-sentence tasks
    label   int64 (classification) / float64 (regression), null where the split is unlabelled (GLUE test)

and ``meta.json`` beside them records the label names, split sizes and the exact source files (with SHA-256).

The classic GLUE TSV files are read with quoting disabled, as the official loaders do (some sentences carry a
stray ``"``); a BOM is stripped (MRPC). Anything malformed stops ingestion with a :class:`DataError` naming the
file and line, instead of a traceback from deep inside a CSV library: a byte that is not UTF-8, a wrong field
count, a label outside the task's set, a score that is not a finite number on the task's scale (STS-B: 0-5).
"""

from __future__ import annotations

import csv
import hashlib
import json
import math
import sys
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pyarrow as pa

from kdflow.core import run_files
from kdflow.core.errors import UserError, not_utf8
from kdflow.core.intermediates import read_json, read_parquet, write_parquet
from kdflow.core.io import atomic_output
from kdflow.core.tasks import Task, TsvLayout

csv.field_size_limit(sys.maxsize)  # a few GLUE/MNLI fields are longer than csv's default limit

HUB_DATASET = "nyu-mll/glue"
SARA_LABEL_FILE = "int_to_intent.tsv"


class DataError(UserError, ValueError):
    """Raw data that cannot be ingested; the message names the file and, where it applies, the line."""


@dataclass
class Split:
    idx: list[int]
    text_a: list[str]
    text_b: list[str] | None
    label: list | None  # None for an unlabelled split

    def __len__(self) -> int:
        return len(self.idx)

    def to_table(self, regression: bool) -> pa.Table:
        label_type = pa.float64() if regression else pa.int64()
        n = len(self)
        return pa.table(
            {
                "idx": pa.array(self.idx, pa.int64()),
                "text_a": pa.array(self.text_a, pa.string()),
                "text_b": pa.array(self.text_b if self.text_b is not None else [None] * n, pa.string()),
                "label": pa.array(self.label if self.label is not None else [None] * n, label_type),
            }
        )


def _column_index(path: Path, header: list[str] | None, column: str | int) -> int:
    if isinstance(column, int):
        return column
    if column not in header:
        raise DataError(f"{path}: missing column {column!r}; the header has {header}")
    return header.index(column)


def read_tsv_split(path: Path, layout: TsvLayout, label_values: tuple[str, ...] | None, regression: bool,
                   score_range: tuple[float, float] | None = None) -> Split:
    """Read one split in the classic GLUE TSV layout (quoting disabled, BOM stripped)."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: file not found")
    try:
        return _read_tsv_split(path, layout, label_values, regression, score_range)
    except UnicodeDecodeError as error:
        raise DataError(not_utf8(path, error)) from None


def _read_tsv_split(path: Path, layout: TsvLayout, label_values: tuple[str, ...] | None, regression: bool,
                    score_range: tuple[float, float] | None) -> Split:
    with open(path, encoding="utf-8-sig", newline="") as f:
        rows = csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE)
        header = next(rows, None) if layout.header else None
        if layout.header and header is None:
            raise DataError(f"{path}: empty file (expected a header line)")
        n_columns = len(header) if header is not None else layout.n_columns
        text_cols = [_column_index(path, header, c) for c in layout.text_columns]
        label_col = None if layout.label_column is None else _column_index(path, header, layout.label_column)
        index_col = header.index("index") if header is not None and "index" in header else None
        label_ids = {value: i for i, value in enumerate(label_values or ())}

        split = Split([], [], [] if len(text_cols) == 2 else None, [] if label_col is not None else None)
        for row in rows:
            line = rows.line_num
            if not row or row == [""]:
                continue  # blank line (e.g. a trailing newline)
            if len(row) != n_columns:
                raise DataError(f"{path}:{line}: expected {n_columns} tab-separated fields, found {len(row)}")
            if index_col is not None:
                try:
                    split.idx.append(int(row[index_col]))
                except ValueError:
                    raise DataError(f"{path}:{line}: index {row[index_col]!r} is not an integer") from None
            else:
                split.idx.append(len(split.idx))
            split.text_a.append(row[text_cols[0]])
            if split.text_b is not None:
                split.text_b.append(row[text_cols[1]])
            if label_col is not None:
                split.label.append(_parse_label(f"{path}:{line}", row[label_col].strip(), label_ids, regression,
                                                score_range))
    if not len(split):
        raise DataError(f"{path}: no examples (empty split)")
    return split


def _parse_label(where: str, raw: str, label_ids: dict[str, int], regression: bool,
                 score_range: tuple[float, float] | None):
    if regression:
        try:
            score = float(raw)
        except ValueError:
            raise DataError(f"{where}: score {raw!r} is not a number") from None
        return _check_score(where, score, score_range)
    if raw not in label_ids:
        raise DataError(f"{where}: unknown label {raw!r}; expected one of {sorted(label_ids)}")
    return label_ids[raw]


def _check_score(where: str, score: float, score_range: tuple[float, float] | None) -> float:
    if not math.isfinite(score):
        raise DataError(f"{where}: score {score} is not a finite number")
    if score_range is not None and not score_range[0] <= score <= score_range[1]:
        raise DataError(f"{where}: score {score:g} is outside the task's scale {score_range[0]:g}-{score_range[1]:g}")
    return score


def read_sara_labels(directory: Path) -> tuple[str, ...]:
    """Intent names from ``int_to_intent.tsv`` (``id<TAB>name``); ids must be 0..K-1."""
    path = Path(directory) / SARA_LABEL_FILE
    # Read as a two-column "pair" (id, name) to reuse the checked TSV reader.
    rows = read_tsv_split(path, TsvLayout(SARA_LABEL_FILE, (0, 1), header=False, n_columns=2), None, False)
    if rows.text_a != [str(i) for i in range(len(rows))]:
        raise DataError(f"{path}: intent ids must be 0, 1, 2, ... in file order")
    return tuple(rows.text_b)


def task_labels(task: Task, raw_dir: Path | None) -> tuple[str, ...] | None:
    return read_sara_labels(raw_dir) if task.source == "sara" else task.labels


def read_local(task: Task, raw_dir: Path) -> tuple[dict[str, Split], tuple[str, ...] | None, list[Path]]:
    """Read every split of ``task`` from ``raw_dir`` (the task's own directory). Returns splits, labels, files."""
    raw_dir = Path(raw_dir)
    if not raw_dir.is_dir():
        raise DataError(f"{raw_dir}: data directory for task {task.name!r} not found")
    labels = task_labels(task, raw_dir)
    label_values = tuple(map(str, range(len(labels)))) if task.source == "sara" else task.tsv_label_values
    splits, files = {}, []
    for split_name, layout in task.tsv.items():
        path = raw_dir / layout.filename
        splits[split_name] = read_tsv_split(path, layout, label_values, task.regression, task.score_range)
        files.append(path)
    if task.source == "sara":
        files.append(raw_dir / SARA_LABEL_FILE)
    return splits, labels, files


def read_hub(task: Task) -> dict[str, Split]:
    """Download every split of a GLUE task from the Hugging Face hub (needs network access)."""
    if task.hub_config is None:
        raise DataError(f"task {task.name!r} is not on the Hugging Face hub: configure a local data directory")
    import datasets  # imported lazily: slow, and only needed without local data

    splits = {}
    for split_name, hub_split in task.hub.items():
        try:
            ds = datasets.load_dataset(HUB_DATASET, task.hub_config, split=hub_split)
        except Exception as error:  # offline, a proxy, an outage: each library layer raises its own type
            reason = (str(error).strip().splitlines() or [type(error).__name__])[0]
            raise DataError(
                f"task {task.name!r}: `data.glue_dir` is not set, so its data comes from the Hugging Face hub "
                f"({HUB_DATASET}), which failed ({type(error).__name__}: {reason}): set `data.glue_dir` to a copy of "
                "GLUE in the classic TSV layout, or run `snakemake --until prepare_task` where the hub is reachable"
            ) from None
        columns = ds.to_dict()
        labels = columns["label"]
        labelled = any(label != -1 for label in labels)  # GLUE test labels are hidden (-1)
        if labelled:
            _check_hub_labels(task, f"{HUB_DATASET}/{task.hub_config} {hub_split}", labels)
        text_b = columns[task.hub_text_columns[1]] if task.is_pair else None
        splits[split_name] = Split(
            idx=list(columns["idx"]),
            text_a=columns[task.hub_text_columns[0]],
            text_b=text_b,
            label=labels if labelled and task.tsv[split_name].label_column is not None else None,
        )
    return splits


def _check_hub_labels(task: Task, where: str, labels: list) -> None:
    for row, label in enumerate(labels):
        if task.regression:
            _check_score(f"{where} row {row}", float(label), task.score_range)
        elif label not in range(len(task.labels)):
            raise DataError(f"{where} row {row}: label {label!r} is not one of the task's ids 0-{len(task.labels) - 1}")


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def prepare_task(task: Task, raw_dir: Path | None, out_dir: Path) -> dict:
    """Ingest ``task`` from ``raw_dir`` (or the hub when None) into ``out_dir``/{split}.parquet + meta.json."""
    if raw_dir is not None:
        splits, labels, files = read_local(task, raw_dir)
        source = {"kind": "local", "files": {str(p): sha256(p) for p in files}}
    else:
        splits, labels = read_hub(task), task.labels
        source = {"kind": "hub", "dataset": HUB_DATASET, "config": task.hub_config}
    meta = {
        "task": task.name,
        "labels": list(labels) if labels is not None else None,
        "regression": task.regression,
        "pair": task.is_pair,
        "metrics": list(task.metrics),
        "splits": {name: len(split) for name, split in splits.items()},
        "labelled_splits": [name for name, split in splits.items() if split.label is not None],
        "source": source,
    }
    with atomic_output(out_dir) as directory:
        directory.mkdir()
        for name, split in splits.items():
            write_parquet(split.to_table(task.regression), directory / f"{name}.parquet")
        (directory / run_files.DATA_META).write_text(json.dumps(meta, indent=2) + "\n")
    return meta


@dataclass
class TaskData:
    """A prepared task as downstream stages see it."""

    meta: dict
    directory: Path

    @classmethod
    def load(cls, directory: Path) -> "TaskData":
        directory = Path(directory)
        return cls(read_json(directory / run_files.DATA_META), directory)

    @property
    def num_labels(self) -> int:
        return 1 if self.meta["regression"] else len(self.meta["labels"])

    def split(self, name: str) -> pd.DataFrame:
        return read_parquet(self.directory / f"{name}.parquet")

    def is_labelled(self, name: str) -> bool:
        return name in self.meta["labelled_splits"]

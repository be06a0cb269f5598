"""The papers' result tables next to kdflow's: one row per score the paper reports (reference/paper_results.csv),
with kdflow's value for it, the difference (for scores) and where kdflow's value comes from.

A table spec (config ``paper_tables.tables.<id>``) names the paper table (``source``, ``table``) and says how its
names map onto kdflow's: ``teacher`` (the kdflow teacher of the paper's teacher rows), ``experiments`` (searched in
order for the students' scores), ``students`` (paper student -> kdflow student), ``methods`` (paper method ->
kdflow method entry; unlisted methods keep their name), ``student_methods`` (per paper student, over ``methods``:
the thesis's LSTM_S "kd" is kdflow's ``mse_logits``), ``inference`` (paper student -> task -> the named model of
config ``models`` whose size and CPU speed fill the thesis's Table 5.2 columns), ``tasks`` (the tasks kdflow runs
for this table; default: all of the paper's) and ``title``.

Beside each CPU speed the paper reports (``ms_per_example_cpu``, PyTorch) the table has a row of its own for kdflow's
ONNX Runtime CPU time of the same model on the same batches (``ms_per_example_onnxruntime_cpu``, issue 55): the paper
measured no such thing, so its value there is empty (NaN, "—" on the pages), never 0.

kdflow's values: a student's is its experiment's headline, the mean dev score of the seeds that chose its grid
point (the like of a paper's best dev score), or on other splits their mean there; the spread check uses only the
chosen point's held-out seeds (their mean, std and number), which took no part in the choice; a teacher's is its
single fine-tuned model. A paper's average is kdflow's average over the same scores (per task the mean of its
metrics, then the mean over tasks: GLUE's rule, which is how Universal-KD's Table 3 averages its 12 test scores)
when kdflow has all of them. GLUE test scores need the GLUE server, so kdflow never has them; their rows point to
the submission files instead.

A spec of ``kind: hyperparameters`` is a table of selected hyperparameters instead (Universal-KD Tables 7-9,
reference/selected_hyperparameters.csv): per task, each hyperparameter the paper chose beside the value of the grid
point kdflow selected on dev (results/selection/<experiment>.json).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from kdflow.core import statistics
from kdflow.core.deviation_entries import STAND_IN, statement
from kdflow.core.documents import Bullets, Document, Emphasis, Heading, Link, Paragraph, Table, joined
from kdflow.core.documents import signed as signed_number
from kdflow.core.tasks import GLUE_FILES
from kdflow.reporting.works import SHORT_NAMES
from kdflow.workflow.job_settings import canonical, run_values
from kdflow.workflow.results_paths import (EXPERIMENT_TABLE_CSV, EXPERIMENT_TABLE_PAGE, GLUE_SUBMISSION, INFERENCE,
                                           SELECTION, TEACHER_METRICS)

TEACHER_METHOD = "teacher"
AVERAGE_TASK = "average"
ONNXRUNTIME_METRIC = "ms_per_example_onnxruntime_cpu"  # kdflow.export.onnx_inference.measure_onnxruntime's key
# the keys of kdflow.analysis.inference.measure and kdflow.export.onnx_inference.measure_onnxruntime: the paper
# reports the first two, kdflow adds ONNX Runtime's speed (issue 55)
INFERENCE_METRICS = ("params_millions_non_embedding", "ms_per_example_cpu", ONNXRUNTIME_METRIC)
ADDED_ROWS = {"ms_per_example_cpu": ONNXRUNTIME_METRIC}  # a paper metric -> the row kdflow adds after each of its rows
NOT_IN_PAPER = "kdflow's own row, not the paper's: ONNX Runtime's CPU time of the same model, batches and threads"
HYPERPARAMETERS_KIND = "hyperparameters"
HYPERPARAMETER_COLUMNS = ["source", "table", "student", "method", "task", "hyperparameter", "paper", "kdflow",
                          "agrees", "kdflow_student", "kdflow_method", "kdflow_from", "kdflow_point", "paper_note",
                          "kdflow_note"]
# The papers' MNLI test scores are matched/mismatched accuracies; kdflow keeps mismatched as its own split. Their
# plain MNLI dev accuracy is the matched one, which is kdflow's `dev`.
MNLI_SPLIT_SUFFIX = {"accuracy_matched": "", "accuracy_mismatched": "_mismatched"}
SHORT_METRICS = {"params_millions_non_embedding": "params (M)",
                 "ms_per_example_cpu": "ms/example (CPU; lower is better)",
                 ONNXRUNTIME_METRIC: "ms/example (ONNX Runtime CPU; lower is better)",
                 "accuracy_matched": "m", "accuracy_mismatched": "mm"}  # MNLI-m/mm, as GLUE names them
COLUMNS = ["source", "table", "teacher", "student", "method", "task", "metric", "split", "paper", "kdflow",
           "difference", "kdflow_held_out", "kdflow_std", "seeds", "within_spread", "kdflow_student", "kdflow_method",
           "kdflow_from", "paper_note", "kdflow_note"]


def read_reference(path) -> pd.DataFrame:
    """The papers' scores; ``table`` stays text ("2", "5.2") and missing notes are empty strings."""
    return pd.read_csv(path, dtype={"table": str}).fillna({"note": ""})


def is_hyperparameter_table(spec: dict) -> bool:
    return spec.get("kind") == HYPERPARAMETERS_KIND


def table_rows(reference: pd.DataFrame, spec: dict) -> pd.DataFrame:
    """The reference rows of the spec's paper table, checking that the spec's names exist in it: a misspelt
    student or method would otherwise leave its cells silently empty."""
    rows = reference[(reference.source == spec["source"]) & (reference.table == str(spec["table"]))]
    if rows.empty:
        raise ValueError(f"reference has no rows for {spec['source']} Table {spec['table']}")
    students, methods = set(rows.student), set(rows.method)
    named = {
        "students": (spec.get("students", {}), students),
        "methods": (spec.get("methods", {}), methods),
        "student_methods": (spec.get("student_methods", {}), students),
        "inference": (spec.get("inference", {}), students),
    }
    named |= {f"student_methods of {s}": (m, methods) for s, m in spec.get("student_methods", {}).items()}
    for key, (mapping, known) in named.items():
        unknown = sorted(set(mapping) - known)
        if unknown:
            raise ValueError(f"{key} names {unknown}, not in {spec['source']} Table {spec['table']}: {sorted(known)}")
    return rows.reset_index(drop=True)


def with_added_rows(rows: pd.DataFrame) -> pd.DataFrame:
    """The paper's rows, each of a metric in :data:`ADDED_ROWS` followed by a row of kdflow's own metric for the
    same student, method, task and split, with no paper value (NaN) and :data:`NOT_IN_PAPER` as its note."""
    added = rows[rows.metric.isin(ADDED_ROWS)].assign(metric=lambda f: f.metric.map(ADDED_ROWS), value=np.nan,
                                                      note=NOT_IN_PAPER)
    order = sorted([*((i, 0) for i in rows.index), *((i, 1) for i in added.index)])
    return pd.concat([rows, added], keys=[0, 1]).swaplevel().loc[order].reset_index(drop=True)


def kdflow_score(task: str, metric: str, split: str) -> tuple[str, str]:
    """(split, metric) under which kdflow stores the paper's score of ``task``."""
    if task == "mnli" and metric in MNLI_SPLIT_SUFFIX:
        return split + MNLI_SPLIT_SUFFIX[metric], "accuracy"
    return split, metric


def kdflow_names(row, spec: dict) -> tuple[str | None, str]:
    """The kdflow student (None if the spec maps none) and method entry of a paper row's student and method."""
    overrides = spec.get("student_methods", {}).get(row.student, {})
    return (spec.get("students", {}).get(row.student),
            overrides.get(row.method, spec.get("methods", {}).get(row.method, row.method)))


def _plan(row, spec: dict) -> dict:
    """Where kdflow's value for one paper row comes from (``kind``: average, teacher, experiment, inference or
    missing), under which kdflow names, and why it is missing when it must be."""
    teacher_row = row.method == TEACHER_METHOD
    student, method = (spec["teacher"], TEACHER_METHOD) if teacher_row else kdflow_names(row, spec)
    plan = {"kind": "missing", "kdflow_student": student, "kdflow_method": method, "kdflow_from": None, "note": ""}
    tasks = spec.get("tasks")
    if row.task == AVERAGE_TASK:
        return {**plan, "kind": "average"}
    if tasks is not None and row.task not in tasks:
        return {**plan, "note": "kdflow does not run this task for this table (spec `tasks`)"}
    if row.metric in INFERENCE_METRICS:
        model = spec.get("inference", {}).get(row.student, {}).get(row.task)
        if model is None:
            return {**plan, "note": "no model is measured for it (spec `inference`)"}
        return {**plan, "kind": "inference", "kdflow_from": model}
    if (row.task, kdflow_score(row.task, row.metric, row.split)[0]) in GLUE_FILES:
        files = ", ".join(GLUE_SUBMISSION.format(experiment=e) + "/" for e in spec["experiments"])
        where = "" if teacher_row else f" (the students' submission files: {files})"
        return {**plan, "note": f"GLUE test labels are private: only the GLUE server scores test predictions{where}"}
    if teacher_row:
        return {**plan, "kind": "teacher", "kdflow_from": "teacher"}
    if student is None:
        return {**plan, "note": f"no kdflow student for {row.student} (spec `students`)"}
    return {**plan, "kind": "experiment"}


def required_inputs(spec: dict, reference: pd.DataFrame) -> dict[str, list[str]]:
    """What kdflow must produce for the spec's table: the spec teacher's tasks, the experiments and the measured
    models (config ``models``) its cells read; rows kdflow cannot fill need nothing."""
    planned = [(row.task, _plan(row, spec)) for row in table_rows(reference, spec).itertuples()]
    return {
        "teacher_tasks": list(dict.fromkeys(task for task, plan in planned if plan["kind"] == "teacher")),
        "experiments": list(spec["experiments"]) if any(p["kind"] == "experiment" for _, p in planned) else [],
        "inference_models": list(dict.fromkeys(p["kdflow_from"] for _, p in planned if p["kind"] == "inference")),
    }


def input_files(spec: dict, reference: pd.DataFrame) -> dict[str, list[str]]:
    """The files of :func:`required_inputs`, in its order (Snakemake rule inputs)."""
    needed = required_inputs(spec, reference)
    return {
        "teacher_metrics": [TEACHER_METRICS.format(teacher=spec["teacher"], task=t) for t in needed["teacher_tasks"]],
        "experiment_tables": [EXPERIMENT_TABLE_CSV.format(experiment=e) for e in needed["experiments"]],
        "inference": [INFERENCE.format(model=m) for m in needed["inference_models"]],
    }


def table_inputs(tables: dict, name: str, reference: pd.DataFrame) -> dict:
    """What rule paper_table reads for table ``name`` of the config's ``paper_tables`` (``tables``): the paper's
    numbers and kdflow's scores (:func:`input_files`), or, for Universal-KD Tables 7-9, the experiments'
    selections."""
    spec = tables["tables"][name]
    if is_hyperparameter_table(spec):
        return {"reference": tables["selected_hyperparameters"],
                "selections": [SELECTION.format(experiment=e) for e in spec["experiments"]]}
    return {"reference": tables["reference"], **input_files(spec, reference)}


def load_inputs(spec: dict, reference: pd.DataFrame, files: Mapping[str, list]) -> dict:
    """Read the files of :func:`input_files` (``files`` as it returns them) into :func:`paper_table`'s inputs."""
    needed = required_inputs(spec, reference)

    def read_json(paths):
        return [json.loads(Path(path).read_text()) for path in paths]

    return {
        "teacher_metrics": dict(zip(needed["teacher_tasks"], read_json(files["teacher_metrics"]), strict=True)),
        "experiment_tables": dict(
            zip(needed["experiments"], map(pd.read_csv, files["experiment_tables"]), strict=True)
        ),
        "inference": dict(zip(needed["inference_models"], read_json(files["inference"]), strict=True)),
    }


def paper_table(
    reference: pd.DataFrame,
    spec: dict,
    teacher_metrics: Mapping[str, dict],
    experiment_tables: Mapping[str, pd.DataFrame],
    inference: Mapping[str, dict],
) -> pd.DataFrame:
    """Every paper row of the spec's table with kdflow's value (NaN where it has none, with the reason in
    ``kdflow_note``). ``teacher_metrics``: task -> the spec teacher's metrics.json; ``experiment_tables``:
    experiment -> its table of selected students; ``inference``: model -> :func:`kdflow.analysis.inference.measure`."""
    students = {}
    for experiment in (e for e in spec["experiments"] if e in experiment_tables):
        for score in experiment_tables[experiment].itertuples():
            key = (score.task, score.student, score.method, score.split, score.metric)
            students.setdefault(key, (score.headline, score.mean, score.std, score.seeds, experiment))

    def value(row, plan) -> dict:
        split, metric = kdflow_score(row.task, row.metric, row.split)
        if plan["kind"] == "teacher":
            found = teacher_metrics[row.task]["scores"].get(split, {}).get(metric)
            if found is None:
                return {"kdflow_note": f"the teacher has no {split} {metric}"}
            return {"kdflow": 100 * found, "seeds": 1}
        if plan["kind"] == "inference":
            model = plan["kdflow_from"]
            measured = inference[model]
            if measured.get(metric) is None:  # ONNX Runtime not installed or not run, or a file from before it
                missing = f"{INFERENCE.format(model=model)} has no {metric}"
                return {"kdflow_note": measured.get("onnxruntime_reason") or missing}
            return {"kdflow": measured[metric]}
        if plan["kind"] == "experiment":
            key = (row.task, plan["kdflow_student"], plan["kdflow_method"], split, metric)
            if key not in students:
                return {"kdflow_note": f"not in the tables of experiments {', '.join(spec['experiments'])}"}
            headline, mean, std, seeds, experiment = students[key]
            return {"kdflow": headline, "kdflow_held_out": mean, "kdflow_std": std, "seeds": seeds,
                    "kdflow_from": experiment}
        return {"kdflow_note": plan["note"]}

    rows = with_added_rows(table_rows(reference, spec))
    records = []
    for row in rows.itertuples():
        plan = _plan(row, spec)
        records.append({
            **row._asdict(),
            "paper": row.value,
            "paper_note": row.note,
            **{key: plan[key] for key in ("kdflow_student", "kdflow_method", "kdflow_from")},
            "kdflow": np.nan,
            "kdflow_held_out": np.nan,
            "kdflow_std": np.nan,
            "seeds": pd.NA,
            "kdflow_note": "",
            **value(row, plan),
        })
    table = pd.DataFrame(records)
    _fill_averages(table)
    table["difference"] = (table["kdflow"] - table["paper"]).where(is_score(table))
    table["seeds"] = table["seeds"].astype("Int64")
    table["within_spread"] = [within_spread(row.paper, row.kdflow_held_out, row.kdflow_std, row.seeds)
                              for row in table.itertuples()]
    table["within_spread"] = table["within_spread"].astype("boolean")
    return table[COLUMNS]


def within_spread(paper: float, mean: float, std: float, seeds) -> bool | None:
    """Whether the paper's (single-run) score lies where one more kdflow run would fall (the 95% seed interval of
    :func:`kdflow.core.statistics.seed_interval`); None where kdflow's seeds cannot decide - fewer than
    :data:`DECIDING_SEEDS`, or a zero spread (seeds that all scored the same, as a student predicting one class
    does: its interval is a point, which any paper number misses) - or without both scores."""
    if pd.isna(seeds) or pd.isna(paper) or int(seeds) < DECIDING_SEEDS or not std > 0:
        return None
    low, high = statistics.seed_interval(mean, std, int(seeds))
    return bool(low <= paper <= high) if np.isfinite(low) else None


def is_score(table: pd.DataFrame) -> pd.Series:
    """Which rows are scores: not the model sizes and CPU speeds of thesis Table 5.2, which depend on the hardware
    and the implementation, so that kdflow − paper means nothing for them."""
    return ~table.metric.isin(INFERENCE_METRICS)


def _fill_averages(table: pd.DataFrame) -> None:
    """kdflow's value of each average row: GLUE's average of the scores the paper averages, all of them present."""
    scores = table[(table.task != AVERAGE_TASK) & is_score(table)]
    for index, row in table[table.task == AVERAGE_TASK].iterrows():
        parts = scores[(scores.student == row.student) & (scores.method == row.method) & (scores.split == row.split)]
        if parts.kdflow.notna().all():
            table.loc[index, "kdflow"] = parts.groupby("task").kdflow.mean().mean()
        else:
            table.loc[index, "kdflow_note"] = "kdflow lacks some of the scores this averages"


def column_namer(table: pd.DataFrame):
    """How a paper table's pages name the column of a row: its task, and its metric and split where the task has
    several ("mnli m", "sst2 params (M)"); a table of selected hyperparameters (no metrics) names tasks alone."""
    if "metric" not in table:
        return lambda row: row.task
    metrics_of_task = table.groupby("task").metric.nunique()
    splits_of_score = table.groupby(["task", "metric"]).split.nunique()

    def column(row) -> str:
        label = [row.task]
        if metrics_of_task[row.task] > 1:
            label.append(SHORT_METRICS.get(row.metric, row.metric))
        if splits_of_score[row.task, row.metric] > 1:
            label.append(row.split)
        return " ".join(label)

    return column


def _wide(table: pd.DataFrame, cell, only: pd.Series | None = None) -> pd.DataFrame:
    """One row per paper student and method, one column per score, holding ``cell(row)`` texts.
    ``only``: a mask of the rows to show; columns are named after the whole table either way."""
    column = column_namer(table)

    def kdflow_name(row) -> str:
        if pd.isna(row.kdflow_student):
            return "—"
        return row.kdflow_student if row.method == TEACHER_METHOD else f"{row.kdflow_student} / {row.kdflow_method}"

    shown = table if only is None else table[only]
    columns = list(dict.fromkeys(column(row) for row in shown.itertuples()))
    lines: dict[tuple, dict] = {}
    for row in shown.itertuples():
        line = lines.setdefault((row.student, row.method), {"kdflow": kdflow_name(row)})
        line[column(row)] = cell(row)
    rows = [[s, m, line["kdflow"], *(line.get(c, "") for c in columns)] for (s, m), line in lines.items()]
    return pd.DataFrame(rows, columns=[*KEY_COLUMNS, *columns])


KEY_COLUMNS = ["student", "method", "kdflow"]
# Data columns per table of a page: with the key columns, a table of "kdflow (paper)" cells then fits the report's
# frame (1,120 px in a 1,400-px window; tests/test_demo.py measures it in a browser).
COLUMNS_PER_TABLE = 5


def split_by_task(wide: pd.DataFrame, per_table: int = COLUMNS_PER_TABLE) -> list[pd.DataFrame]:
    """A wide table (:func:`_wide`) as several, each with the key columns and at most ``per_table`` data columns,
    a task's columns kept together (unless one task alone has more)."""
    groups: dict[str, list[str]] = {}
    for column in wide.columns[len(KEY_COLUMNS):]:
        groups.setdefault(column.split(" ")[0], []).append(column)
    chunks: list[list[str]] = []
    for columns in groups.values():
        if chunks and len(chunks[-1]) + len(columns) <= per_table:
            chunks[-1] += columns
        else:
            chunks.append(list(columns))
    return [wide[KEY_COLUMNS + chunk] for chunk in chunks] or [wide]


def _number(value, digits: int, missing: str, signed: bool = False) -> str:
    if pd.isna(value):
        return missing
    return signed_number(value, digits) if signed else f"{value:.{digits}f}"


def paper_digits(table: pd.DataFrame) -> dict[str, int]:
    """Per metric, the decimals the paper prints its numbers with: the most any of them needs (a transcribed 91.0
    reads back as 91, so one value alone does not tell)."""
    def decimals(value: float) -> int:
        text = f"{value:.6f}".rstrip("0")
        return len(text) - text.index(".") - 1
    return {metric: max((decimals(v) for v in rows.paper.dropna()), default=0)
            for metric, rows in table.groupby("metric")}


def _digits(digits: int | None, precision: dict[str, int]):
    """The decimals of a row's numbers: ``digits`` where given, else the paper's for the row's metric (for a row
    kdflow adds, :data:`ADDED_ROWS`, the paper's metric it stands beside)."""
    paper_metric = {added: metric for metric, added in ADDED_ROWS.items()}
    return lambda row: digits if digits is not None else precision.get(paper_metric.get(row.metric, row.metric), 2)


def _score_cell(of):
    """"kdflow (paper)", both with ``of(row)`` decimals (:func:`_digits`); a paper value can be missing too (ALP-KD
    Table 1 is transcribed only where Universal-KD quotes it)."""
    return lambda row: f"{_number(row.kdflow, of(row), '—')} ({_number(row.paper, of(row), '—')})"


def _notes(table: pd.DataFrame) -> list[str]:
    """Each distinct note once, with the students and methods it is about."""
    notes = []
    for column, whose in (("paper_note", "paper"), ("kdflow_note", "kdflow")):
        for note, rows in table[table[column] != ""].groupby(column, sort=False):
            about = dict.fromkeys(f"{row.student} / {row.method}" for row in rows.itertuples())
            notes.append(f"{whose}: {note} ({', '.join(about)})")
    return notes


def read_deviations(path) -> list[dict]:
    """Rule run_deviations' entries of a paper result (kdflow.reporting.protocols.deviations_of); none without the
    file (no ledger)."""
    return json.loads(Path(path).read_text()) if path else []


def deviation_blocks(deviations: list[dict]) -> list:
    """The ledger's entries of a table, as the last section of its page (none without entries): as the ledger
    words them, or, where protocols.deviations_of checked them against a run that ran other values, the run's."""
    stand_ins = [entry for entry in deviations if entry["kind"] == STAND_IN]
    listed = [entry for entry in deviations if entry["kind"] != STAND_IN]
    if not listed:
        return []
    checked = bool(stand_ins) or any("this_run" in entry for entry in listed)
    intro = ("From the ledger (reference/deviations.yaml), which is written for config.yaml's full reproduction, "
             "checked against the settings this run used: where this run ran other values than an entry explains, "
             "the entry gives this run's values instead of its explanation, and the settings where this run departs "
             "from the paper with no entry in the ledger close the list." if checked else
             "From the ledger (reference/deviations.yaml): every known difference between what this run (config.yaml's "
             "full reproduction) ran and what the paper did.")
    blocks = [Heading("Differences from the paper's protocol"), Paragraph(intro)]
    if stand_ins:
        blocks.append(Paragraph("In this run " + ", ".join(f"{entry['run_name']} stands for {entry['ledger_name']}"
                                                           for entry in stand_ins)
                                + " (the ledger's and config.yaml's names of the paper's models): the settings below "
                                "compare this run's models with the paper's."))
    blocks.append(Bullets([[Emphasis(entry["kind"]), ": " + statement(entry)] for entry in listed]))
    return blocks


DECIDING_SEEDS = 3  # held-out seeds below which a seed interval is too wide (t at 1 df: 12.7) to mark a cell
SPREAD_MARKS = {True: " ✓", False: " ✗", pd.NA: ""}
SPREAD_LEGEND = (f"✓: the paper's number lies within kdflow's {statistics.CONFIDENCE:.0%} seed interval, where one more "
                 "kdflow run would fall (mean ± t s √(1 + 1/n), s the sample std over the n held-out seeds, which "
                 "took no part in choosing the grid point): the difference is within kdflow's seed spread. ✗: outside "
                 f"it. No mark: kdflow's seeds cannot decide - fewer than {DECIDING_SEEDS} held-out seeds, or a zero spread "
                 "(every seed scored the same, as a student that predicts one class does).")


def paper_caption(artifacts_path, spec: dict) -> Paragraph | None:
    """The paper's own caption of the spec's table (reference/paper_artifacts.csv), quoted with its section; None
    where the list has no caption for it."""
    artifacts = pd.read_csv(artifacts_path, dtype=str, keep_default_na=False)
    found = artifacts[(artifacts.paper == spec["source"]) & (artifacts.kind == "table")
                      & (artifacts.number == str(spec["table"])) & (artifacts.caption != "")]
    if found.empty:
        return None
    name = f"{SHORT_NAMES.get(spec['source'], spec['source'])} Table {spec['table']}"
    return Paragraph([Emphasis(f"{name} in the paper ({found.section.iloc[0]}):"), f" “{found.caption.iloc[0]}”"])


def provenance(table: pd.DataFrame) -> pd.DataFrame:
    """Per paper student and method, kdflow's student and method and where its numbers come from: the experiment
    (whose page is in the report under Experiments), the teacher, or the model whose speed is measured."""
    rows = table[table["kdflow_from"].notna()]
    return pd.DataFrame([{"student": student, "method": method, "kdflow": kdflow_student if method == TEACHER_METHOD
                          else f"{kdflow_student} / {kdflow_method}",
                          "from": ", ".join(dict.fromkeys(group["kdflow_from"]))}
                         for (student, method, kdflow_student, kdflow_method), group in rows.groupby(
                             ["student", "method", "kdflow_student", "kdflow_method"], sort=False, dropna=False)],
                        columns=["student", "method", "kdflow", "from"])


def experiment_links(experiments: Sequence[str]) -> list[Paragraph]:
    """The line that opens the pages of the experiments a paper table reads (in the report, under Experiments)."""
    if not experiments:
        return []
    links = [Link(name, EXPERIMENT_TABLE_PAGE.format(experiment=name)) for name in experiments]
    return [Paragraph(["The experiments it reads, each with its runs and seeds: ", *joined(links, " · "), "."])]


def _opening(scale_note: str, caption: Paragraph | None) -> list:
    """A page's first blocks: the scale note, emphasised, where there is one, then the paper's caption."""
    return [Paragraph([Emphasis(scale_note)])] * bool(scale_note) + [caption] * (caption is not None)


def paper_document(table: pd.DataFrame, title: str, digits: int | None = None, deviations: list[dict] = (),
                   caption: Paragraph | None = None, scale_note: str = "", experiments: Sequence[str] = ()) -> Document:
    """The table as people read it: the paper's caption, "kdflow (paper)" per cell, where kdflow's numbers come
    from, then kdflow − paper of the scores, the notes, and the ledger's differences between what kdflow ran and
    what the paper did. Numbers have the paper's decimals per metric, or ``digits``. ``scale_note``
    (:func:`kdflow.workflow.job_settings.scale_note`) opens the page where the run cannot stand beside the paper."""
    of = _digits(digits, paper_digits(table))
    differences = _wide(table, lambda r: _number(r.difference, of(r), "—", signed=True) + SPREAD_MARKS[r.within_spread],
                        only=is_score(table))
    document = Document(title, _opening(scale_note, caption) + [
        Paragraph("Each cell: kdflow (paper). kdflow: the headline of the configuration selected on dev, the mean "
                  "of the seeds that chose it, as a paper's best dev score (teachers: the fine-tuned model); — : "
                  "kdflow has no value (see the notes)."),
        *map(Table, split_by_task(_wide(table, _score_cell(of)))),
        Heading("Where kdflow's numbers come from"),
        Table(provenance(table)),
        *experiment_links(experiments),
        Heading("kdflow − paper, for scores"),
        Paragraph(SPREAD_LEGEND),
        *map(Table, split_by_task(differences)),
    ])
    notes = _notes(table)
    if notes:
        document.blocks += [Heading("Notes"), Bullets(notes)]
    document.blocks += deviation_blocks(deviations)
    return document


LATEX_SPECIAL = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
                 "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}", "—": "---",
                 "−": "$-$"}


def latex_escape(text: str) -> str:
    return "".join(LATEX_SPECIAL.get(char, char) for char in text)


def paper_latex(table: pd.DataFrame, title: str, digits: int | None = None) -> str:
    """A booktabs tabular of "kdflow (paper)" cells (``---``: kdflow has no value), at the paper's precision."""
    return _latex(_wide(table, _score_cell(_digits(digits, paper_digits(table)))), title)


def _latex(cells: pd.DataFrame, title: str) -> str:
    """A booktabs tabular of text cells after three name columns, written directly rather than through pandas'
    Styler, which needs jinja2."""
    lines = [
        f"% {latex_escape(title)}: kdflow (paper); --- : no kdflow value",
        r"\begin{tabular}{lll" + "r" * (len(cells.columns) - 3) + "}",
        r"\toprule",
        " & ".join(map(latex_escape, cells.columns)) + r" \\",
        r"\midrule",
        *(" & ".join(map(latex_escape, row)) + r" \\" for row in cells.itertuples(index=False)),
        r"\bottomrule",
        r"\end{tabular}",
    ]
    return "\n".join(lines) + "\n"


def write_paper_table(table: pd.DataFrame, title: str, csv_path, markdown_path, latex_path, html_path=None,
                      deviations: list[dict] = (), caption: Paragraph | None = None, scale_note: str = "",
                      experiments: Sequence[str] = ()) -> None:
    table.to_csv(csv_path, index=False, float_format="%.4f")
    paper_document(table, title, deviations=deviations, caption=caption, scale_note=scale_note,
                   experiments=experiments).write(markdown_path, html_path)
    Path(latex_path).write_text(paper_latex(table, title))


def title_of(spec: dict) -> str:
    """The config's title of a paper table, else the paper's name for it ("ALP-KD Table 2")."""
    return spec.get("title") or f"{SHORT_NAMES.get(spec['source'], spec['source'])} Table {spec['table']}"


# Selected hyperparameters (Universal-KD Tables 7-9): the paper's choice beside kdflow's dev-selected grid point.


def hyperparameter_runs(reference: pd.DataFrame, spec: dict) -> list[dict]:
    """Each (task, kdflow student, kdflow method) of the spec's table with the hyperparameters the paper gives for
    it: what the workflow resolves every grid point's values of (:func:`kdflow.workflow.job_settings.run_values`)."""
    runs: dict[tuple, dict] = {}
    for row in table_rows(reference, spec).itertuples():
        student, method = kdflow_names(row, spec)
        if student is not None:
            run = runs.setdefault((row.task, student, method),
                                  {"task": row.task, "student": student, "method": method, "hyperparameters": []})
            run["hyperparameters"] = list(dict.fromkeys([*run["hyperparameters"], row.hyperparameter]))
    return list(runs.values())


def run_key(task: str, student: str, method: str) -> str:
    return f"{task}/{student}/{method}"


def selected_values(config: dict, name: str, selected: pd.DataFrame | None) -> dict:
    """For a table of selected hyperparameters, the values every grid point of its runs trains with, per
    experiment that has the run (experiment -> :func:`run_key` -> point -> value); nothing for a table of
    scores. ``selected``: the paper's selected hyperparameters (config ``paper_tables.selected_hyperparameters``)."""
    spec = config["paper_tables"]["tables"][name]
    if not is_hyperparameter_table(spec):
        return {}
    values = {}
    for experiment in spec["experiments"]:
        setup = config["experiments"][experiment]
        for run in hyperparameter_runs(selected, spec):
            task, student, method = run["task"], run["student"], run["method"]
            if task in setup["tasks"] and student in setup["students"] and method in setup["methods"]:
                values.setdefault(experiment, {})[run_key(task, student, method)] = run_values(
                    config, experiment, task, student, method, run["hyperparameters"])
    return canonical(values)


def hyperparameter_table(reference: pd.DataFrame, spec: dict, selections: Mapping[str, dict],
                         values: Mapping[str, Mapping[str, dict]]) -> pd.DataFrame:
    """Every row of the spec's table of selected hyperparameters with kdflow's value at the grid point selected
    on dev. ``selections``: experiment -> its selection JSON; ``values``: experiment -> :func:`run_key` -> grid
    point -> hyperparameter -> value. The spec's experiments are searched in order, as for scores."""
    selected = {}
    for experiment in (e for e in spec["experiments"] if e in selections):
        for entry in selections[experiment]["selections"]:
            key = run_key(entry["task"], entry["student"], entry["method"])
            if key in values.get(experiment, {}):
                selected.setdefault(key, (experiment, entry["selected"]))
    records = []
    for row in table_rows(reference, spec).itertuples():
        student, method = kdflow_names(row, spec)
        record = {**row._asdict(), "paper": row.value, "paper_note": row.note, "kdflow_student": student,
                  "kdflow_method": method, "kdflow": np.nan, "kdflow_from": None, "kdflow_point": None,
                  "kdflow_note": ""}
        found = None if student is None else selected.get(run_key(row.task, student, method))
        if student is None:
            record["kdflow_note"] = f"no kdflow student for {row.student} (spec `students`)"
        elif found is None:
            record["kdflow_note"] = f"not in the selections of experiments {', '.join(spec['experiments'])}"
        else:
            experiment, point = found
            value = values[experiment][run_key(row.task, student, method)][point].get(row.hyperparameter)
            record.update(kdflow=np.nan if value is None else value, kdflow_from=experiment, kdflow_point=point)
            if value is None:
                record["kdflow_note"] = f"kdflow's runs have no {row.hyperparameter}"
        records.append(record)
    table = pd.DataFrame(records)
    table["agrees"] = np.isclose(table.kdflow.astype(float), table.paper.astype(float))  # False where kdflow has none
    return table[HYPERPARAMETER_COLUMNS]


def _hyperparameter_cells(table: pd.DataFrame) -> pd.DataFrame:
    """One row per paper student, method and hyperparameter, one column per task: "kdflow (paper)"."""
    tasks = list(dict.fromkeys(table.task))
    lines: dict[tuple, dict] = {}
    for row in table.itertuples():
        line = lines.setdefault((row.student, row.method, row.hyperparameter), {})
        line[row.task] = f"{'—' if pd.isna(row.kdflow) else f'{row.kdflow:g}'} ({row.paper:g})"
    rows = [[s, m, h, *(line.get(t, "") for t in tasks)] for (s, m, h), line in lines.items()]
    return pd.DataFrame(rows, columns=["student", "method", "hyperparameter", *tasks])


def hyperparameter_document(table: pd.DataFrame, title: str, deviations: list[dict] = (),
                            caption: Paragraph | None = None, scale_note: str = "",
                            experiments: Sequence[str] = ()) -> Document:
    """The table as people read it: the paper's caption, "kdflow (paper)" per task and hyperparameter, how many
    agree, the notes and the ledger's entries."""
    known = table[table.kdflow.notna()]
    document = Document(title, _opening(scale_note, caption) + [
        Paragraph("Each cell: kdflow (paper). kdflow: the value of the grid point selected on dev (mean over seeds); "
                  "— : kdflow has no selection for it (see the notes)."),
        Table(_hyperparameter_cells(table)),
        Paragraph(f"kdflow selected the paper's value in {int(known.agrees.sum())} of {len(known)} cells it has."),
        Heading("Where kdflow's numbers come from"),
        Table(known.groupby(["student", "method"], sort=False)["kdflow_from"].unique().map(", ".join)
              .rename("from").reset_index()),
        *experiment_links(experiments),
    ])
    notes = _notes(table)
    if notes:
        document.blocks += [Heading("Notes"), Bullets(notes)]
    document.blocks += deviation_blocks(deviations)
    return document


def write_hyperparameter_table(table: pd.DataFrame, title: str, csv_path, markdown_path, latex_path,
                               html_path=None, deviations: list[dict] = (), caption: Paragraph | None = None,
                               scale_note: str = "", experiments: Sequence[str] = ()) -> None:
    table.to_csv(csv_path, index=False)
    hyperparameter_document(table, title, deviations, caption, scale_note, experiments).write(markdown_path,
                                                                                             html_path)
    Path(latex_path).write_text(_latex(_hyperparameter_cells(table), title))

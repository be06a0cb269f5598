"""Rule export_student: the student an experiment selected for a task, student and method, as a folder people load
with ``transformers`` alone (docs/export.md).

The run exported is the one a selected grid point stands for, as GLUE submissions and named models take it
(:func:`kdflow.distillation.selection.selected_run`): the selected point's seed with the best dev score. The folder
holds the model (``config.json`` with the task's label names, ``model.safetensors``), the tokenizer it reads, for
the students without a ``transformers`` class the model's code (:mod:`kdflow.export.conversion` says which class each
student becomes and why), a model card (``README.md``, :mod:`kdflow.export.model_card`) and ``kdflow.json``, the same
facts for programs.

Before the folder is written, the export loads it back as a user would (``from_pretrained`` and ``AutoTokenizer`` on
the folder, the texts tokenised with ``truncation=True``) and checks it against kdflow on every dev example: the
logits of kdflow's own student, reloaded from the run (float32, CPU), within
:data:`kdflow.export.conversion.TOLERANCE`, and the same predictions; and the predictions the run recorded
(``predictions.parquet``), which must be the same where the run computed them in float32 (a run in bf16 or fp16
recorded lower-precision logits: their agreement is measured and stated, not required). An export that disagrees is
an error, and nothing is written.
"""

from __future__ import annotations

import logging
import subprocess
from fnmatch import fnmatchcase
from pathlib import Path

import numpy as np
import pandas as pd
import yaml
from transformers import AutoModelForSequenceClassification, AutoTokenizer

from kdflow.core import run_files
from kdflow.core.data import TaskData
from kdflow.core.errors import UserError
from kdflow.core.intermediates import read_json, read_parquet
from kdflow.core.io import atomic_output, write_json
from kdflow.distillation.selection import selected_run
from kdflow.export.conversion import (
    NO_LENGTH_LIMIT,
    accepted_inputs,
    agreement,
    agrees,
    exported_logits,
    exported_model,
    exported_tokenizer,
    kdflow_logits,
    needs_remote_code,
    tokenizer_kind,
)
from kdflow.export.model_card import model_card
from kdflow.export.onnx_export import check_onnx, export_onnx
from kdflow.students import modeling_kdflow_student as remote
from kdflow.students.loading import load_distilled
from kdflow.workflow.provenance import PACKAGE_ROOT

log = logging.getLogger("kdflow")

CHECKED_SPLIT = "dev"  # where kdflow's scores and selection come from; every example of it is checked
FP32 = "fp32"  # kdflow.core.precision's name of float32


def selection_entry(selection: dict, task: str, student: str, method: str) -> dict:
    for entry in selection["selections"]:
        if (entry["task"], entry["student"], entry["method"]) == (task, student, method):
            return entry
    known = sorted({f"{e['task']}/{e['student']}/{e['method']}" for e in selection["selections"]})
    raise UserError(f"the selection has no run of student {student!r} with method {method!r} on {task!r}; it "
                    f"has {', '.join(known)}")


def export_student(request: dict, selection_path, runs_dir, data_dir, teacher_model_dir, out_dir,
                   context: dict | None = None, onnx: bool = False) -> dict:
    """Export the selected run of ``request`` (``experiment``, ``task``, ``student``, ``method``) to ``out_dir``.
    ``runs_dir``: the directory of that student and method's runs (``results/students/<experiment>/<task>/
    <student>/<method>``). ``context`` is what the card states beyond the run: ``teacher`` (its name and settings),
    ``paper``, ``deviations`` (ledger entries), ``config_files``, ``config_overrides``, ``rebuild`` (the command).
    ``onnx``: also write ``model.onnx`` (:mod:`kdflow.export.onnx_export`), checked under onnxruntime against the
    PyTorch model on every dev example. Returns the export record (``kdflow.json``)."""
    context = context or {}
    task_name, student_name, method = request["task"], request["student"], request["method"]
    selection = read_json(selection_path)
    entry = selection_entry(selection, task_name, student_name, method)
    point, seed = selected_run(selection, task_name, student_name, method)
    run_dir = Path(runs_dir) / point / f"seed{seed}"
    run = read_json(run_dir / run_files.METRICS)
    task = TaskData.load(data_dir)
    regression, labels = task.meta["regression"], task.meta["labels"]
    max_length = run["hyperparameters"]["max_seq_length"]
    teacher_model_dir = Path(teacher_model_dir)

    student = load_distilled(run_dir, teacher_model_dir.parent, task.num_labels)
    remote_code = needs_remote_code(student)  # a model export does not know fails here, before any conversion
    tokenizer = exported_tokenizer(student, teacher_model_dir, max_length)
    model = exported_model(student, labels, regression, tokenizer)
    accepted_inputs(tokenizer, model)
    log.info("exporting %s/%s/%s/%s (point %s, seed %s) as %s", request["experiment"], task_name, student_name, method,
             point, seed, type(model).__name__)

    with atomic_output(out_dir) as folder:
        if remote_code:  # the folder gets the model's code and config.json its auto_map
            remote.KdflowStudentConfig.register_for_auto_class()
            remote.KdflowStudentForSequenceClassification.register_for_auto_class(
                "AutoModelForSequenceClassification")
        model.save_pretrained(folder)
        tokenizer.save_pretrained(folder)
        checks = check_folder(folder, student, teacher_model_dir, task, run_dir, max_length, run["precision"],
                              remote_code)
        cut = None if tokenizer.model_max_length >= NO_LENGTH_LIMIT else int(tokenizer.model_max_length)
        record = export_record(request, entry, point, seed, run, run_dir, type(model).__name__, remote_code,
                               (max_length, cut), labels, regression, checks, context)
        record["tokenizer"] = tokenizer_kind(student)
        if onnx:
            path = export_onnx(model, tokenizer, folder)
            record["onnx"] = {"file": run_files.ONNX_MODEL, CHECKED_SPLIT: check_onnx(path, model, tokenizer,
                                                                         task.split(CHECKED_SPLIT), regression)}
        write_json(Path(folder) / run_files.EXPORT_RECORD, record)
        (Path(folder) / run_files.MODEL_CARD).write_text(model_card(record))
    return record


def check_folder(folder: Path, student, teacher_model_dir: Path, task: TaskData, run_dir: Path, max_length: int,
                 precision: str, remote_code: bool) -> dict:
    """Load the folder back as a user would and compare it with kdflow on every dev example; a disagreement is a
    :class:`~kdflow.core.errors.UserError`. The model's class is taken from this package for the students with
    code in the folder (the same file, copied verbatim): ``trust_remote_code`` would import it through the user's
    module cache, which tests/test_export.py exercises in a fresh process instead."""
    if remote_code:
        model = remote.KdflowStudentForSequenceClassification.from_pretrained(folder)
    else:
        model = AutoModelForSequenceClassification.from_pretrained(folder)
    tokenizer = AutoTokenizer.from_pretrained(folder, config=model.config)  # no second look-up of the model's class
    frame = task.split(CHECKED_SPLIT)
    regression = task.meta["regression"]
    exported = exported_logits(model, tokenizer, frame)
    kdflow = agreement(kdflow_logits(student, teacher_model_dir, frame, max_length), exported, regression)
    recorded = agreement(recorded_logits(run_dir / run_files.PREDICTIONS, CHECKED_SPLIT, frame), exported, regression)
    recorded["precision"] = precision
    recorded["required"] = precision == FP32
    if not agrees(kdflow) or (recorded["required"] and not agrees(recorded)):
        raise UserError(f"the exported folder does not predict what kdflow's student does on {CHECKED_SPLIT} "
                        f"(against the reloaded student: {kdflow}; "
                        f"against {run_dir / run_files.PREDICTIONS}: {recorded}); nothing was written")
    log.info("exported folder checked on %d %s examples: max |logit difference| %.2e against kdflow's student, "
             "%.2e against the run's predictions", kdflow["examples"], CHECKED_SPLIT,
             kdflow["max_abs_logit_difference"], recorded["max_abs_logit_difference"])
    return {"split": CHECKED_SPLIT, "kdflow_student": kdflow, "recorded_predictions": recorded}


def recorded_logits(path: Path, split: str, frame: pd.DataFrame) -> np.ndarray:
    """The logits a run recorded for ``split``, in ``frame``'s order of examples."""
    table = read_parquet(path, columns=["split", "idx", "logits"])
    table = table[table["split"] == split].set_index("idx")
    missing = sorted(set(frame["idx"]) - set(table.index))
    if missing:
        raise UserError(f"{path} has no {split} predictions for examples {missing[:5]}: was the task prepared "
                        "again after the student was trained?")
    return np.stack(table.loc[frame["idx"].to_numpy(), "logits"].to_numpy()).astype(np.float32)


def export_record(request: dict, entry: dict, point: str, seed: str, run: dict, run_dir: Path, model_class: str,
                  remote_code: bool, lengths: tuple[int, int | None], labels, regression: bool, checks: dict,
                  context: dict) -> dict:
    """``lengths``: the run's ``max_seq_length`` and where the exported tokenizer cuts (None: never)."""
    grid = entry["grid"][point]
    return {
        **{key: request[key] for key in ("experiment", "task", "student", "method")},
        "paper": context.get("paper"),
        "scale_note": context.get("scale_note", ""),
        "license": context.get("license"),
        "student_spec": run["student"],
        "model_class": model_class,
        "trust_remote_code": remote_code,
        "labels": [] if regression else list(labels),
        "regression": regression,
        "max_seq_length": lengths[0],
        "tokenizer_max_length": lengths[1],
        "run": {"point": point, "seed": int(seed), "directory": run_dir.as_posix(), "scores": run["scores"],
                "best": run["best"], "precision": run["precision"]},
        "teacher": context.get("teacher"),
        "method_options": run["method_options"],
        "stages": run["stages"],
        "transfer": run["transfer"],
        "hyperparameters": run["hyperparameters"],
        "selection": {"main_metric": entry["main_metric"], "points": sorted(entry["grid"]), "selected": point,
                      "selection_seeds": entry["selection_seeds"], "held_out_seeds": entry["held_out_seeds"],
                      "dev_by_seed": grid["dev_by_seed"], "diverged_seeds": grid["diverged_seeds"],
                      "headline": entry["headline"], "held_out": entry["scores"]},
        "agreement": checks,
        "deviations": context.get("deviations", []),
        "provenance": {**source_commit(), "config_files": context.get("config_files", []),
                       "config_overrides": context.get("config_overrides", {}), "rebuild": context.get("rebuild")},
    }


def source_commit(repository: Path = PACKAGE_ROOT.parent) -> dict:
    """The kdflow commit that exports (``commit``: None outside a git checkout) and whether tracked files differ
    from it (``uncommitted_changes``)."""
    def git(*args: str) -> str | None:
        try:
            done = subprocess.run(["git", *args], cwd=repository, capture_output=True, text=True, timeout=30,
                                  check=False)
        except (OSError, subprocess.TimeoutExpired):
            return None
        return done.stdout.strip() if done.returncode == 0 else None

    commit = git("rev-parse", "HEAD")
    changes = git("status", "--porcelain", "--untracked-files=no") if commit else None
    return {"commit": commit, "uncommitted_changes": None if changes is None else bool(changes)}


def applicable_deviations(ledger_path, paper_tables: list[str], experiment: str, task: str, student: str,
                          method: str, teacher: str) -> list[dict]:
    """The ledger's entries (reference/deviations.yaml) for the paper tables made from ``experiment``, less those
    whose settings all name another experiment, task, student, method entry or teacher: what the card lists as this
    student's differences from its paper."""
    if not ledger_path or not paper_tables:
        return []
    here = {"experiments": experiment, "teachers": teacher}

    def concerns(pattern: str) -> bool:
        parts = pattern.split(".")
        if parts[0] not in here:
            return True  # a setting of every job (precision, the transfer sets' generation, ...)
        checks = [(parts[1:2], here[parts[0]])]
        if parts[0] == "experiments" and len(parts) > 2 and parts[2] not in ("grid", "points"):
            checks.append((parts[2:3], task))
            if len(parts) > 4 and parts[3] in ("student", "method_options"):
                checks.append((parts[4:5], student if parts[3] == "student" else method))
        elif parts[0] == "teachers" and len(parts) > 2:
            checks.append((parts[2:3], task))
        return all(fnmatchcase(value, part[0]) for part, value in checks if part)

    kept = []
    for entry in yaml.safe_load(Path(ledger_path).read_text()) or []:
        tables = sorted(set(entry.get("tables", [])) & set(paper_tables))
        setting = entry.get("setting", [])
        patterns = [setting] if isinstance(setting, str) else list(setting)
        if tables and (not patterns or any(concerns(pattern) for pattern in patterns)):
            kept.append({"tables": tables, **{key: entry[key] for key in ("kind", "paper", "kdflow", "why", "effect")
                                             if key in entry}})
    return kept


def rebuild_command(target: str, config_files: list[str], replace_config: bool, overrides: dict) -> str:
    """The command that makes ``target`` again with the same config."""
    parts = ["snakemake", "--cores", "1"]
    if config_files:
        parts += ["--configfile", *config_files]
    if replace_config:
        parts.append("--replace-workflow-config")
    if overrides:
        parts += ["--config", *(f"{key}={value}" for key, value in overrides.items())]
    return " ".join([*parts, target])
